#!/usr/bin/env bash
# The whole test suite, from a fresh clone: set-up, lint (ruff), types (mypy), then pytest. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
echo "==> ruff"
.venv/bin/ruff check .
.venv/bin/ruff format --check .
echo "==> mypy"
.venv/bin/mypy  # the package, as configured in pyproject.toml
echo "==> mypy bench/"
.venv/bin/mypy bench/  # the benchmark scripts, and the tests/support helpers they import (mypy_path)
echo "==> pytest"
set +e
# On every core (pytest-xdist), each test file on one worker: a file's module fixtures (an Airflow home, a DAG
# run) are built once, as in a serial run. Pass -n 0 to run serially.
.venv/bin/python -m pytest -p no:cacheprovider -n auto --dist loadfile "$@"
status=$?
set -e
if [ "$status" -eq 5 ]; then
  echo "pytest collected no tests: failing, a green run must run tests" >&2
  exit 1
fi
# The whole suite (no pytest arguments, as CI runs it) is followed by the Airflow-facing tests at the declared
# floors, in their own virtualenv (.venv-compat/floors): the lowest versions pyproject.toml accepts must work too.
# The whole matrix (each supported Airflow minor) is `bash scripts/compat.sh all`; see docs/compatibility.md.
if [ $# -eq 0 ]; then
  echo "==> compatibility: the Airflow-facing tests at the floors"
  set +e
  bash scripts/compat.sh floors
  compat=$?
  set -e
  [ "$status" -ne 0 ] || status=$compat
fi
exit "$status"
