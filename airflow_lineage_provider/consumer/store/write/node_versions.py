"""Which nodes an ingest rewrites, and so bumps ``lineage_nodes.version``: only those it changes.

A node's version keys what answers keep of it in memory (graph cards, Marquez job objects:
:mod:`.versioned_cache`), so it must move whenever what they show of the node changes — and only then,
or every overlapping answer is built again and every named row rewritten for nothing.

* **A job** is rewritten by every event naming it: a RunEvent writes its run (a Job shows its newest runs,
  a card its latest run's state and times), a JobEvent its declared edges (a Job's inputs and outputs).
* **A dataset** is rewritten only when the event moves its own row — ``created_at`` earlier, ``updated_at``,
  ``declared_at`` or ``observed_at`` later (a card's ``updatedAt`` and ``declaredOnly``) — and bumped after
  the batch's writes when the batch changes its schema or facets (a card's fields and type; compared with the
  stored ones), brings a producer this process has not recorded for it or a name it claims (a grouped card's
  producers and aliases; a change of its group bumps every name, :func:`.identity.regroup`). A dataset an
  event names again with nothing new, at a time not after its latest, is left alone: an event resent under
  another key, late events, a second reader of the same table.

Other writes that change what answers show (tags, retention, a reset) bump versions themselves
(:func:`.versioned_cache.bump_versions`).
"""

from __future__ import annotations

from functools import cache

from sqlalchemy import or_

from airflow_lineage_provider.consumer.store.schema import tables
from airflow_lineage_provider.consumer.store.write import lifecycle
from airflow_lineage_provider.consumer.store.write.statements import Statement, done, insert_for, later


@cache
def node_upsert(dialect: str) -> Statement:
    """The nodes' ``INSERT ... ON CONFLICT DO UPDATE`` for ``dialect``, rewriting (and bumping) a stored node only
    as the module says, ``RETURNING`` ``(node_key, id)`` of the nodes it inserted or rewrote: the ids of the
    others are read after (:func:`..ingest._write_nodes`)."""
    n = tables.nodes
    statement = insert_for(dialect, n)
    incoming = statement.excluded
    statement = statement.on_conflict_do_update(
        index_elements=["node_key"],
        set_={
            "created_at": lifecycle.earliest_sql(n.c.created_at, incoming.created_at),
            "updated_at": lifecycle.latest_sql(n.c.updated_at, incoming.updated_at),
            "version": n.c.version + 1,
            "declared_at": lifecycle.latest_sql(n.c.declared_at, incoming.declared_at),
            "observed_at": lifecycle.latest_sql(n.c.observed_at, incoming.observed_at),
        },
        where=or_(
            incoming.kind == "job",
            incoming.created_at < n.c.created_at,
            incoming.updated_at > n.c.updated_at,
            later(incoming.declared_at, n.c.declared_at),
            later(incoming.observed_at, n.c.observed_at),
        ),
    )
    return done(statement, "node_key", returning=("node_key", "id"))
