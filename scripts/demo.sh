#!/usr/bin/env bash
# The main job: an end-to-end demo on embedded defaults (SQLite, a local folder), from a fresh clone.
#
#   example DAGs (lineage_run, @task.lineage, LineageMixin) under `airflow dags test`, stock listener on
#     -> OutboxTransport (SQLite outbox)                      `airflow-lineage status`
#     -> the openlineage_export DAG: ships to this package's consumer and exports NDJSON files
#     -> the consumer (`airflow-lineage serve`, SQLite store): a graph query, and the lineage page's URL
#
# The consumer keeps running afterwards so the printed URL opens; DEMO_KEEP_SERVER=0 stops it at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
root=$PWD
demo=$root/.demo
if [ -f "$demo/consumer.pid" ]; then kill "$(cat "$demo/consumer.pid")" 2> /dev/null || true; fi
rm -rf "$demo"
mkdir -p "$demo"

export AIRFLOW_HOME=$demo/airflow
export AIRFLOW__CORE__DAGS_FOLDER=$root/dags
export AIRFLOW__CORE__LOAD_EXAMPLES=False
export LINEAGE_DEMO_DIR=$demo
export AIRFLOW_CONN_LINEAGE_DEMO_WAREHOUSE="sqlite:///$demo/warehouse.db"
unset OPENLINEAGE_URL OPENLINEAGE_CONFIG OPENLINEAGE_DISABLED || true
for var in $(env | grep -o '^OPENLINEAGE__[A-Z_]*' || true); do unset "$var"; done
# Every event - the stock listener's and lineage_run's - goes into the outbox, a local SQLite file.
export AIRFLOW__OPENLINEAGE__TRANSPORT='{"type": "airflow_lineage_provider.outbox.OutboxTransport"}'
export AIRFLOW__LINEAGE_PROVIDER__OUTBOX_URL="sqlite:///$demo/outbox.db"
export AIRFLOW__LINEAGE_PROVIDER__EXPORT_PATH=$demo/lineage-files
cli=.venv/bin/airflow-lineage

echo "==> airflow db migrate (SQLite metadata DB in $AIRFLOW_HOME)"
.venv/bin/airflow db migrate > "$demo/migrate.log" 2>&1 || { tail -40 "$demo/migrate.log"; exit 1; }

run_dag() {
  local dag_id=$1 log="$demo/dags-test-$1.log"
  echo "==> airflow dags test $dag_id"
  .venv/bin/airflow dags test "$dag_id" 2026-02-01 > "$log" 2>&1 || { tail -60 "$log"; exit 1; }
  grep -q "state=success" "$log" || { tail -60 "$log"; echo "$dag_id did not succeed" >&2; exit 1; }
}
run_dag example_lineage_run
run_dag example_task_lineage

echo "==> the outbox after the DAG runs: events waiting for delivery"
$cli status

# The consumer's usual port, 6580, unless something already listens there.
port=$(.venv/bin/python -c '
import socket
with socket.socket() as s:
    try:
        s.bind(("127.0.0.1", 6580))
    except OSError:
        s.bind(("127.0.0.1", 0))
    print(s.getsockname()[1])')
consumer=http://127.0.0.1:$port
echo "==> airflow-lineage serve: the lineage consumer on $consumer (SQLite store $demo/lineage-store.db)"
$cli serve --store "sqlite:///$demo/lineage-store.db" --port "$port" --log-level warning > "$demo/consumer.log" 2>&1 &
echo $! > "$demo/consumer.pid"
for _ in $(seq 1 100); do
  curl -fsS "$consumer/api/v1/namespaces" > /dev/null 2>&1 && break
  sleep 0.2
done
curl -fsS "$consumer/api/v1/namespaces" > /dev/null || { cat "$demo/consumer.log"; exit 1; }

# The export DAG ships to the Airflow connection openlineage_default and exports to export_path.
export AIRFLOW_CONN_OPENLINEAGE_DEFAULT="{\"conn_type\": \"openlineage\", \"schema\": \"http\", \"host\": \"127.0.0.1\", \"port\": $port}"
run_dag openlineage_export

echo "==> the outbox after the export DAG: delivered to the consumer and exported to files"
$cli status
echo "Exported files:"
(cd "$demo/lineage-files" && find . -type f | sort | sed 's/^/  /')

echo "==> the lineage the DAGs produced (task events from the stock listener, custom jobs from lineage_run)"
cat $(find "$demo/lineage-files" -type f -name '*.ndjson' | sort) > "$demo/events.ndjson"
.venv/bin/python scripts/show_lineage.py "$demo/events.ndjson" --job-prefix example_lineage_run

echo "==> the consumer's graph around the report table"
.venv/bin/python scripts/demo_graph.py "$consumer" "dataset:sqlite://$demo/warehouse.db:main.customer_totals"

if [ "${DEMO_KEEP_SERVER:-1}" = "0" ]; then
  kill "$(cat "$demo/consumer.pid")"
  echo "Consumer stopped (DEMO_KEEP_SERVER=0)."
else
  echo "The consumer keeps running for the page above; stop it with: kill $(cat "$demo/consumer.pid")"
fi
