"""Timings of the OpenLineage listener's parts in task processes, for ``bench/task_overhead.py --timings``.

Installed as ``sitecustomize`` (on ``PYTHONPATH``) in the scheduler's environment, so every process forked from
it — LocalExecutor workers, task processes, the listener's children — carries it. When a module named in
``_PROBES`` is imported, the listed callables are wrapped with a clock; each call appends
``pid<TAB>part<TAB>seconds`` to the file in ``BENCH_TIMINGS``. The clock is ``time.perf_counter`` (monotonic
and system-wide on Linux), so a forked child's start can be measured from its parent's call to ``fork``.

Parts:

* ``hook:<name>`` — the whole listener hook in the task process (what the task waits for);
* ``fork:parent`` — ``_fork_execute`` in the task process: fork, the child's whole life, the wait for it;
* ``fork:to-child`` — from entering ``_fork_execute`` to the child running the event's callable;
* ``thread:parent`` — ``_thread_execute``: start, the callable, join;
* ``callable`` — the event's work (extraction, facets, building, emission), in the child or the thread;
* ``extract`` — the stock extractor manager; ``custom_run_facets`` — ``get_user_provided_run_facets``;
* ``client`` — ``get_or_create_openlineage_client`` (client and transport set-up on first use in a process);
* ``transport:init`` / ``transport:emit`` — the outbox transport's construction and append.

Measurement only: it wraps the listener's methods and never ships with the package.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import os
import sys
import time
from typing import Any

_OUT = os.environ.get("BENCH_TIMINGS", "")
_FORK_ENTERED: list[float] = []


def _record(part: str, seconds: float) -> None:
    with open(_OUT, "a") as out:
        out.write(f"{os.getpid()}\t{part}\t{seconds:.6f}\n")


def _timed(part: str, function: Any) -> Any:
    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            _record(part, time.perf_counter() - started)

    return wrapper


def _hook(name: str, function: Any) -> Any:
    """The listener hook ``name``, timed, recording the modules first imported while it ran (``imports:<name>``)."""
    timed = _timed(f"hook:{name}", function)

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        before = set(sys.modules)
        try:
            if _PROFILES:
                return _profiled(lambda: timed(*args, **kwargs), "hook", record=False)
            return timed(*args, **kwargs)
        finally:
            with open(_OUT, "a") as out:
                out.write(f"{os.getpid()}\timports:{name}\t{' '.join(sorted(set(sys.modules) - before))}\n")

    return wrapper


def _patch_listener(module: Any) -> None:
    listener = module.OpenLineageListener
    for hook in ("on_task_instance_running", "on_task_instance_success", "on_task_instance_failed"):
        setattr(listener, hook, _hook(hook, listener.__dict__[hook]))
    fork_execute = listener._fork_execute

    def _fork_execute(self: Any, callable: Any, callable_name: str) -> Any:
        _FORK_ENTERED[:] = [time.perf_counter()]
        return fork_execute(self, callable, callable_name)

    listener._fork_execute = _timed("fork:parent", _fork_execute)
    listener._thread_execute = _timed("thread:parent", listener._thread_execute)
    execute = listener._execute

    def _execute(self: Any, callable: Any, callable_name: str, use_fork: bool = False) -> Any:
        def probed() -> Any:
            if _FORK_ENTERED and os.getpid() != _PARENT[0]:
                _record("fork:to-child", time.perf_counter() - _FORK_ENTERED[0])
            if _PROFILES:
                return _profiled(callable)
            return _timed("callable", callable)()

        _PARENT[:] = [os.getpid()]
        return execute(self, probed, callable_name, use_fork)

    listener._execute = _execute
    module.get_user_provided_run_facets = _timed("custom_run_facets", module.get_user_provided_run_facets)


_PARENT: list[int] = [0]
#: A folder: each event's callable also runs under cProfile, its stats written there (``<pid>-<n>.prof``).
_PROFILES = os.environ.get("BENCH_CPROFILE", "")


def _profiled(callable: Any, kind: str = "callable", record: bool = True) -> Any:
    """Run ``callable`` under cProfile (this thread only: a hook's profile leaves out a thread it waits for)."""
    import cProfile

    profile = cProfile.Profile()
    started = time.perf_counter()
    try:
        return profile.runcall(callable)
    finally:
        if record:
            _record(kind, time.perf_counter() - started)
        profile.dump_stats(os.path.join(_PROFILES, f"{kind}-{os.getpid()}-{time.monotonic_ns()}.prof"))


def _patch_manager(module: Any) -> None:
    module.ExtractorManager.extract_metadata = _timed("extract", module.ExtractorManager.extract_metadata)


def _patch_adapter(module: Any) -> None:
    adapter = module.OpenLineageAdapter
    adapter.get_or_create_openlineage_client = _timed("client", adapter.get_or_create_openlineage_client)


def _patch_transport(module: Any) -> None:
    transport = module.OutboxTransport
    transport.__init__ = _timed("transport:init", transport.__init__)
    transport.emit = _timed("transport:emit", transport.emit)


_PROBES = {
    "airflow.providers.openlineage.plugins.listener": _patch_listener,
    "airflow.providers.openlineage.extractors.manager": _patch_manager,
    "airflow.providers.openlineage.plugins.adapter": _patch_adapter,
    "airflow_lineage_provider.outbox.transport": _patch_transport,
}


class _Loader(importlib.abc.Loader):
    def __init__(self, loader: Any, patch: Any) -> None:
        self.loader, self.patch = loader, patch

    def create_module(self, spec: Any) -> Any:
        return self.loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self.loader.exec_module(module)
        self.patch(module)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        patch = _PROBES.get(name)
        if patch is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _Loader(spec.loader, patch)
        return spec


if _OUT:
    sys.meta_path.insert(0, _Finder())
