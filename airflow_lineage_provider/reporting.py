"""How this package reports problems without ever breaking the user's task.

Two kinds of problem are told apart:

* *Misuse* of the API (a ``run_id`` that is not a UUID, an unknown event type, a dataset entry of an
  unsupported type): reported with a message naming the value and the accepted forms. By default it is
  logged and the offending piece is skipped; with ``[lineage_provider] strict`` on it is raised, so users'
  own tests and CI catch it before the code under lineage runs.
* *Failures* while building or emitting an event (bad connector, unreachable transport, unserializable
  facet): logged once per distinct message at WARNING, then at DEBUG, and always swallowed.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict

log = logging.getLogger("airflow_lineage_provider")

#: Distinct messages remembered per process (messages name values, so a long-lived process — a scheduler, an
#: API server — meets new ones for ever). The least recently seen is forgotten first and, if it comes back,
#: is logged at WARNING once more.
REMEMBERED_MESSAGES = 4096

_seen: OrderedDict[str, None] = OrderedDict()
_seen_lock = threading.Lock()


def warn_once(message: str, *, exc_info: BaseException | None = None) -> None:
    """Log ``message`` at WARNING the first time this process sees it (among the last
    :data:`REMEMBERED_MESSAGES` distinct ones), and at DEBUG afterwards."""
    with _seen_lock:
        first = message not in _seen
        _seen[message] = None
        _seen.move_to_end(message)
        if len(_seen) > REMEMBERED_MESSAGES:
            _seen.popitem(last=False)
    log.log(logging.WARNING if first else logging.DEBUG, "%s", message, exc_info=exc_info if first else None)


def report_misuse(error: ValueError | TypeError) -> None:
    """Raise ``error`` when ``[lineage_provider] strict`` is on; otherwise log it (once) and return."""
    from airflow_lineage_provider import conf

    if conf.strict():
        raise error
    warn_once(f"{error} (skipped; set [lineage_provider] strict = True to raise instead)")


def forget_reported() -> None:
    """Forget which messages were logged, so the next occurrence logs at WARNING again (for tests)."""
    with _seen_lock:
        _seen.clear()
