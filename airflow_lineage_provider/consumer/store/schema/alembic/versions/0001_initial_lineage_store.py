"""Version 1: the first release's tables.

Stores are created from :mod:`airflow_lineage_provider.consumer.store.schema.tables` and stamped head, never by
running this chain from nothing: this revision is where the history starts, and a store its release wrote
has nothing to change.
"""

from __future__ import annotations

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Nothing to change on a store already at version 1."""
