"""The package is a registered Airflow provider, cheap to import, and configured through Airflow."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from support.airflow_run import VENV_BIN, airflow_env

from airflow_lineage_provider import lineage_run


def _airflow(home: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(VENV_BIN / "airflow"), *args],
        env=airflow_env(home, home / "dags", env),
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.airflow
def test_airflow_providers_list_shows_the_package(airflow_home):
    result = _airflow(airflow_home, "providers", "list")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "airflow-lineage-provider" in result.stdout


@pytest.mark.airflow
def test_config_section_is_declared_with_defaults(airflow_home):
    result = _airflow(airflow_home, "config", "get-value", "lineage_provider", "namespace")
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "default"
    listed = _airflow(airflow_home, "config", "list", "--section", "lineage_provider", "--include-descriptions")
    assert "raises ValueError/TypeError before the user's" in listed.stdout


def test_importing_the_package_does_not_import_airflow():
    code = "import sys, airflow_lineage_provider; print('airflow' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"


def test_provider_info_is_import_free():
    code = (
        "import sys; from airflow_lineage_provider.get_provider_info import get_provider_info; "
        "info = get_provider_info(); print(info['package-name'], 'airflow' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip()
    assert out == "airflow-lineage-provider False"


def test_the_built_wheel_ships_py_typed_the_facet_schemas_and_the_migrations(tmp_path: Path) -> None:
    """What users install is the wheel, not this checkout: build it (in pip's isolated build environment, as
    any install does) and look inside."""
    repo = Path(__file__).resolve().parent.parent
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(tmp_path), str(repo)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    (wheel,) = tmp_path.glob("airflow_lineage_provider-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "airflow_lineage_provider/py.typed" in names
    assert any(n.startswith("airflow_lineage_provider/schemas/") and n.endswith(".json") for n in names)
    assert not any(n.startswith(("tests/", "bench/")) for n in names)
    # The migrations of the lineage store and the outbox: Alembic reads these files from the installed package.
    from airflow_lineage_provider.consumer.store.schema.migrations import LATEST
    from airflow_lineage_provider.outbox.migrations import SCHEMA_VERSION

    for scripts, latest in (("consumer/store/schema/alembic", LATEST), ("outbox/alembic", SCHEMA_VERSION)):
        folder = f"airflow_lineage_provider/{scripts}"
        assert {f"{folder}/env.py", f"{folder}/script.py.mako"} <= names, f"{scripts} is not in the wheel"
        revisions = sorted(n for n in names if n.startswith(f"{folder}/versions/") and n.endswith(".py"))
        assert [name.rsplit("/", 1)[1][:4] for name in revisions] == [f"{v:04d}" for v in range(1, latest + 1)]


def test_openlineage_yml_configuration_outside_airflow(tmp_path, monkeypatch, lineage_client_reset):
    events_file = tmp_path / "events.ndjson"
    config = tmp_path / "openlineage.yml"
    config.write_text(f"transport:\n  type: file\n  log_file_path: {events_file}\n  append: true\n")
    monkeypatch.setenv("OPENLINEAGE_CONFIG", str(config))
    with lineage_run("script.job", outputs=["main/out"]):
        pass
    from support.capture import read_events

    assert [e["eventType"] for e in read_events(events_file)] == ["START", "COMPLETE"]
