"""What differs between the supported Airflow minors (3.1 up to 3.3), in one place.

Names that moved are looked up where each release keeps them, newest location first, on first use:
``from airflow_lineage_provider.airflow_compat import DagBag`` gives Airflow's own class, whichever release is
installed. Behaviour that differs is checked by feature (does the object have it?), never by version number.
Importing this module imports nothing of Airflow; each name is imported when first asked for.
"""

from __future__ import annotations

import functools
import importlib
from typing import Any

#: Each name, and the public (module, attribute) locations that hold it, newest release first.
MOVED: dict[str, tuple[tuple[str, str], ...]] = {
    # 3.2 renamed the serializer; 3.1 has SerializedDAG with the same to_dict/from_dict.
    "DagSerialization": (
        ("airflow.serialization.serialized_objects", "DagSerialization"),
        ("airflow.serialization.serialized_objects", "SerializedDAG"),
    ),
    # 3.2 moved the DAG file parser out of airflow.models.
    "DagBag": (("airflow.dag_processing.dagbag", "DagBag"), ("airflow.models.dagbag", "DagBag")),
    # The Task SDK's exceptions (3.2+); 3.1 raises airflow.exceptions' own.
    "AirflowSkipException": (
        ("airflow.sdk.exceptions", "AirflowSkipException"),
        ("airflow.exceptions", "AirflowSkipException"),
    ),
}


def locate(name: str) -> Any:
    """The object Airflow keeps under ``name`` (a key of :data:`MOVED`), from the first location that has it."""
    tried = []
    for module_name, attribute in MOVED[name]:
        try:
            return getattr(importlib.import_module(module_name), attribute)
        except (ImportError, AttributeError):
            tried.append(f"{module_name}.{attribute}")
    raise ImportError(f"this Airflow has no {name} (looked for {', '.join(tried)})")


def __getattr__(name: str) -> Any:
    if name not in MOVED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = locate(name)
    globals()[name] = value  # found once per process
    return value


def param_is_set(param: Any) -> bool:
    """Whether an Airflow param (the Task SDK's ``Param`` or a deserialized one) holds a value, ``None`` included.

    "No default" is a sentinel of Airflow's; copies of a DAG's params hold copies of it, which the SDK's
    ``Param.has_value`` (an identity check) takes for values on some releases, so it is recognised by its type.
    """
    return not isinstance(param.value, _unset_types())


@functools.cache
def _unset_types() -> tuple[type, ...]:
    """The types of Airflow's "no default" sentinels: the Task SDK's (what a ``Param()`` without a default holds)
    and, from 3.2, the server-side one of deserialized params."""
    from airflow.sdk import Param

    found: list[type] = [type(Param().value)]
    try:
        from airflow.serialization.definitions.notset import ArgNotSet
    except ImportError:  # Airflow 3.1: deserialized params are the Task SDK's
        pass
    else:
        found.append(ArgNotSet)
    return tuple(found)


def param_source(param: Any, key: str, dag_params: Any) -> str | None:
    """Where a param of a task (or of its DAG) was set: ``"task"`` or ``"dag"``, or ``None`` when not recorded.

    Airflow 3.2+ records it on the param (``Param.source``). Airflow 3.1 does not: there a task's params hold the
    DAG's merged in, so a param whose value is the DAG's own is taken as the DAG's.
    """
    if hasattr(param, "source"):
        source = param.source
        return str(source) if source is not None else None
    if dag_params and key in dag_params:
        getter = getattr(dag_params, "get_param", None)
        dag_value = getter(key).value if callable(getter) else dag_params[key]
        if dag_value == param.value:
            return "dag"
    return "task"
