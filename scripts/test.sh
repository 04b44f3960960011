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
exit "$status"
