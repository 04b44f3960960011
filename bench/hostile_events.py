"""What a hostile event costs the consumer to answer, beside an ordinary one.

``tests/test_consumer_hostile_fuzz.py`` checks the behaviour (no 5xx, no traceback, every listing still answers);
this measures the time. Each shape is a COMPLETE RunEvent with a value nested ``depth`` levels (arrays and objects
alternating) of ``width`` characters put in one place (run facets, a dataset's facets, the job's name), posted
alone and as a batch of three, then followed by the four listings the test reads. The ordinary event is the same
without the value (the event is nested 3 levels deep where the value goes: 61 levels of it reach the limit of 64).
In-process (FastAPI's test client) on a fresh SQLite store per shape, after one untimed round; the median of
``--repeat`` tries of each request, in milliseconds.

    .venv/bin/python bench/hostile_events.py --repeat 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from fastapi.testclient import TestClient  # noqa: E402
from support.consumer_helpers import run_event  # noqa: E402

from airflow_lineage_provider.consumer import create_app  # noqa: E402
from airflow_lineage_provider.consumer.security.access import Access  # noqa: E402

#: ``(label, place, depth, width)`` of each hostile shape; the ordinary event first.
SHAPES = [
    ("ordinary event", None, 0, 0),
    ("run facet at the depth limit (accepted)", "run.facets", 61, 10),
    ("run facet a level past it (refused)", "run.facets", 62, 10),
    ("run facet 900 deep (refused)", "run.facets", 900, 10),
    ("dataset facet of 5,000 NULs", "output.facets", 1, 5_000),
    ("dataset facet of 5,000 lone surrogates", "output.facets", 1, 5_000),
    ("job name of 5,000 characters", "job.name", 0, 5_000),
]
LISTINGS = ("/api/v1/events", "/api/v1/jobs", "/api/v1/datasets", "/api/v1/namespaces")


def _nest(levels: int, leaf: Any) -> Any:
    value = leaf
    for level in range(levels):
        value = {"k": value} if level % 2 else [value]
    return value


def hostile_body(label: str, place: str | None, depth: int, width: int) -> str:
    """The JSON of the shape's event."""
    event = run_event("COMPLETE", "fuzzed")
    text = "\ud800" * width if "surrogates" in label else ("\x00" * width if "NUL" in label else "x" * width)
    value = _nest(depth, text)
    if place == "run.facets":
        event["run"]["facets"] = {"f": value}
    elif place == "output.facets":
        event["outputs"] = [{"namespace": "w", "name": "t", "facets": {"f": value}}]
    elif place == "job.name":
        event["job"]["name"] = text
    return json.dumps(event, ensure_ascii=True)


def timed(client: TestClient, method: str, path: str, **kwargs: Any) -> tuple[float, int]:
    started = time.perf_counter()
    answer = client.request(method, path, **kwargs)
    return (time.perf_counter() - started) * 1000, answer.status_code


def measure(store_url: str, body: str, repeat: int) -> dict[str, tuple[float, int]]:
    """The median time and the status of the single post, the batch post and the slowest listing."""
    app = create_app(store_url=store_url, anonymous=Access.ADMIN)
    found: dict[str, list[tuple[float, int]]] = {"single": [], "batch": [], "listing": []}
    json_type = {"Content-Type": "application/json"}
    try:
        with TestClient(app) as client:
            for _ in range(repeat + 1):
                found["single"].append(timed(client, "POST", "/api/v1/lineage", content=body, headers=json_type))
                batch = f"[{body},{body},{body}]"
                found["batch"].append(timed(client, "POST", "/api/v1/lineage/batch", content=batch, headers=json_type))
                found["listing"].append(max(timed(client, "GET", path) for path in LISTINGS))
    finally:
        app.state.store.dispose()
    return {name: (statistics.median(ms for ms, _ in tries[1:]), tries[-1][1]) for name, tries in found.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3, help="tries of each request per shape (the longest counts)")
    args = parser.parse_args()
    print("| event | POST one, ms (status) | POST batch of 3, ms (status) | slowest listing after, ms |")
    print("|---|---:|---:|---:|")
    for label, place, depth, width in SHAPES:
        with tempfile.TemporaryDirectory(prefix="alp-hostile-") as tmp:
            found = measure(
                f"sqlite:///{Path(tmp) / 'lineage.db'}", hostile_body(label, place, depth, width), args.repeat
            )
        single, batch, listing = found["single"], found["batch"], found["listing"]
        print(
            f"| {label} | {single[0]:.1f} ({single[1]}) | {batch[0]:.1f} ({batch[1]}) | {listing[0]:.1f} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
