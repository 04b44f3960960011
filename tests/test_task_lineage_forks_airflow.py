"""The stock listener's forks import nothing of this package: the task process loaded it all beforehand.

The listener builds START and COMPLETE each in a process it forks from the task. A module of this package
imported first inside such a fork is imported again in every fork, on every event: the cost the @task.lineage
overhead budget has no room for. Python's ``-X importtime`` report (``PYTHONPROFILEIMPORTTIME``)
names every module a process imports, forks included, on the stderr they share: imported once in the task
process, a module shows up once for the whole run; imported in the forks, once per fork.
"""

from __future__ import annotations

import re
import sqlite3
from collections import Counter
from pathlib import Path

import pytest
from support.airflow_run import dags_test

pytestmark = pytest.mark.airflow

DAG = """
import pendulum
from airflow.sdk import BaseOperator, dag, task

from airflow_lineage_provider import LineageMixin


class Export(LineageMixin, BaseOperator):
    def execute(self, context):
        return None


@dag(schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), catchup=False)
def fork_imports():
    previous = None
    for i in range(3):
        @task.lineage(
            inputs=["warehouse/orders"],
            outputs=["warehouse/out_{{ ti.task_id }}_{{ ds_nodash }}"],
            connector="forks_warehouse",
        )
        def step(n: int = 0) -> int:
            return n + 1

        current = step.override(task_id=f"step_{i}")()
        if previous is not None:
            previous >> current
        previous = current
    previous >> Export(
        task_id="export",
        lineage_inputs=["warehouse/orders"],
        lineage_outputs=["file:///exports/orders_{{ ds_nodash }}.csv"],
        lineage_connector="forks_warehouse",
    )


fork_imports()
"""

#: ``import time: self [us] | cumulative | <indent>module`` (CPython's -X importtime format).
IMPORT_LINE = re.compile(r"^import time:\s+\d+ \|\s+\d+ \|( *)(\S+)\s*$")


def imports_per_statement(output: str) -> Counter[str]:
    """How many import statements loaded each module. The report lists the modules one statement loads,
    nested ones (indented) first, the statement's own (one space) last; ``import a.b`` lists ``a.b`` twice,
    once for the submodule and once for the statement, which counts once here."""
    counts: Counter[str] = Counter()
    statement: set[str] = set()
    for line in output.splitlines():
        match = IMPORT_LINE.match(line)
        if match is None:
            continue
        statement.add(match.group(2))
        if len(match.group(1)) <= 1:
            counts.update(statement)
            statement = set()
    return counts


def test_listener_forks_import_no_module_of_the_package(airflow_home: Path, tmp_path: Path):
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "fork_imports_dag.py").write_text(DAG)
    with sqlite3.connect(tmp_path / "warehouse.db") as conn:
        conn.execute("CREATE TABLE orders (id INTEGER, amount NUMERIC(10, 2))")
    events = tmp_path / "events.ndjson"
    env = {"PYTHONPROFILEIMPORTTIME": "1", "AIRFLOW_CONN_FORKS_WAREHOUSE": f"sqlite:///{tmp_path / 'warehouse.db'}"}
    result = dags_test(airflow_home, dags, "fork_imports", events_file=events, env=env)
    assert result.returncode == 0, result.output[-4000:]

    tasks = [e for e in result.events if e["job"]["name"] != "fork_imports"]
    assert sorted(e["eventType"] for e in tasks) == ["COMPLETE"] * 4 + ["START"] * 4, "all came through the listener"
    imported = imports_per_statement(result.output)
    assert imported["airflow_lineage_provider.operators.mixin"] == 1, "the -X importtime report is in the output"
    again = {module: n for module, n in imported.items() if module.startswith("airflow_lineage_provider") and n > 1}
    assert not again, f"modules of the package imported inside the listener's forks (times imported): {again}"
