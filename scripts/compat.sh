#!/usr/bin/env bash
# The compatibility matrix: the Airflow-facing tests (pytest marker `airflow`) in one virtualenv per supported set
# of versions, built under .venv-compat/<set> (idempotent: re-installed only when pyproject.toml or the set's pins
# change). Usage: scripts/compat.sh [floors|3.1|3.2|3.3|all] [extra pytest arguments]; default `all`.
# The sets, their pins and why: docs/compatibility.md. Exits non-zero when any set fails.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}

# Each set: the versions pip is told to install besides the package and its test extras ("name==x" pins the
# version, other specifiers only keep pip away from releases that break that Airflow; see docs/compatibility.md).
pins_for() {
  case "$1" in
    # The declared lower bounds of pyproject.toml, all together (Airflow 3.1.8: earlier 3.1 patches lack the
    # listener's skip hook, so the stock listener never completes a skipped task's run; docs/compatibility.md).
    # Airflow 3.1 sets an attribute on cryptography's MultiFernet, a Rust class from cryptography 51 on.
    floors) echo "apache-airflow==3.1.8 apache-airflow-providers-openlineage==2.20.0 openlineage-python==1.52.0" \
      "sqlalchemy==2.0.5.post1 fastapi==0.117.0 starlette==0.48.0 uvicorn==0.37.0 alembic==1.13.1 msgspec==0.19.0" \
      "cryptography<51" ;;
    # The newest patch of each supported minor, with whatever pip resolves beside it (newest providers and client).
    # 3.1.8 is both the floor and the newest 3.1 patch: this set differs from the floors in everything else.
    3.1) echo "apache-airflow==3.1.8 cryptography<51" ;;
    # Airflow 3.2.2 declares no upper bound on FastAPI or svcs, and breaks with the newest of both
    # (as its published constraints pin them); Alembic 1.18 logs plugin set-up at INFO on every migration.
    3.2) echo "apache-airflow==3.2.2 fastapi<0.137 svcs<26.2 alembic<1.18" ;;
    3.3) echo "apache-airflow==3.3.2" ;;
    *) return 1 ;;
  esac
}

build() {
  local set=$1 venv=.venv-compat/$1 pins want
  pins=$(pins_for "$set")
  want=$( (cat pyproject.toml; echo "$pins") | sha256sum | cut -d' ' -f1)
  if [ ! -x "$venv/bin/python" ]; then
    echo "==> creating $venv with $($PYTHON --version)"
    "$PYTHON" -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check --upgrade pip
  fi
  if [ ! -f "$venv/.alp-installed" ] || [ "$(cat "$venv/.alp-installed")" != "$want" ]; then
    echo "==> installing airflow-lineage-provider[test] with: $pins"
    # shellcheck disable=SC2086  # the pins are words on purpose
    if ! "$venv/bin/pip" install --quiet --disable-pip-version-check -e ".[test]" $pins > "$venv/install.log" 2>&1; then
      tail -40 "$venv/install.log" >&2
      return 1
    fi
    echo "$want" > "$venv/.alp-installed"
  fi
}

run_set() {
  local set=$1 venv=.venv-compat/$1
  shift
  echo
  echo "================ compatibility set '$set': $(pins_for "$set")"
  build "$set" || return 1
  "$venv/bin/python" -m pip list --disable-pip-version-check 2>/dev/null \
    | grep -iE '^(apache-airflow|apache-airflow-core|apache-airflow-task-sdk|apache-airflow-providers-openlineage|openlineage-python|sqlalchemy|fastapi|starlette|uvicorn|alembic|msgspec|pydantic) ' \
    | awk '{printf "    %s %s\n", $1, $2}'
  # Each set imports the package from this checkout (editable install) with its own Airflow; -n 2: the Airflow
  # tests build a DAG run per file, a file per worker.
  "$venv/bin/python" -m pytest -p no:cacheprovider -q -m airflow -n 2 --dist loadfile "$@"
}

case "${1:-all}" in
  all) sets="floors 3.1 3.2 3.3" ;;
  floors | 3.1 | 3.2 | 3.3) sets=$1 ;;
  *) echo "usage: $0 [floors|3.1|3.2|3.3|all] [pytest arguments]" >&2; exit 2 ;;
esac
[ $# -gt 0 ] && shift
mkdir -p .venv-compat
summary=()
failed=0
for set in $sets; do
  start=$SECONDS
  if run_set "$set" "$@"; then result=passed; else result=FAILED; failed=1; fi
  summary+=("$(printf '  %-7s %-6s %4ds' "$set" "$result" $((SECONDS - start)))")
done
echo
echo "================ compatibility summary"
printf '%s\n' "${summary[@]}"
exit "$failed"
