#!/usr/bin/env bash
# Create (or refresh) the project's virtualenv in .venv with the package and its test dependencies.
# Idempotent: re-runs only `pip install` when pyproject.toml changed since the last run.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "==> creating .venv with $($PYTHON --version)"
  "$PYTHON" -m venv .venv
  .venv/bin/pip install --quiet --upgrade pip
fi
stamp=.venv/.alp-installed
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "==> installing airflow-lineage-provider and its test dependencies into .venv"
  if ! .venv/bin/pip install --quiet --disable-pip-version-check -e ".[test]" > .venv/install.log 2>&1; then
    cat .venv/install.log >&2
    exit 1
  fi
  echo "$want" > "$stamp"
fi
