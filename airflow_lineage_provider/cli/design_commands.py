"""``airflow-lineage publish-dags``: publish the declared lineage of Airflow's DAGs once, now.

What the export DAG's ``publish_dags`` task does on a schedule, for a one-off run (after a deployment, for a
new consumer with ``--all``): DAGs whose serialized version changed since their last publication are
published as OpenLineage ``JobEvent``s into the outbox, with a progress bar on a terminal and the summary line
(printed once, on stdout).

It runs where Airflow's CLI runs and finds connections as ``airflow connections get`` does — secrets
backends, ``AIRFLOW_CONN_*``, the metadata database (:mod:`~airflow_lineage_provider.design.airflow_lookups`) —
both ``[lineage_provider] publish_metadata_conn_id`` and the connections that name the declared datasets.
Exit codes: 0 done, 1 a ``--dag-id`` the metadata database does not know (the others are published), 2 an
error, told in one line without a traceback (bad URL, unreachable database, undefined connection).
"""

from __future__ import annotations

import argparse
import logging
import sys
import warnings
from typing import Any

from airflow_lineage_provider.cli import CommandError
from airflow_lineage_provider.cli.progress import progress_bar

log = logging.getLogger(__name__)


def run_publish_dags(args: argparse.Namespace) -> int:
    from sqlalchemy.exc import SQLAlchemyError

    from airflow_lineage_provider.design.airflow_lookups import as_airflow_cli
    from airflow_lineage_provider.design.publisher import publish_dags
    from airflow_lineage_provider.design.serialized_dags import MetadataDatabaseError, first_line
    from airflow_lineage_provider.outbox.database import OutboxUrlError, redacted

    # A connection found in the metadata database is Airflow's core Connection, whose get_hook() warns about
    # Airflow's own internals (its ProvidersManager): nothing a user can act on, so not on their terminal.
    warnings.filterwarnings("ignore", message=r"ProvidersManager\.hooks is deprecated")
    with as_airflow_cli(), progress_bar("publishing DAGs") as (plan, advance):
        try:
            report = publish_dags(
                outbox_url=args.outbox,
                metadata_db_url=args.metadata_db,
                dag_ids=args.dag_id or None,
                republish_all=args.all,
                progress=advance,
                on_plan=plan,
            )
        except (MetadataDatabaseError, OutboxUrlError) as error:
            raise CommandError(str(error)) from None
        except SQLAlchemyError as error:
            where = redacted(args.metadata_db or args.outbox or "the configured database")
            raise CommandError(f"database error ({where}): {first_line(error)}") from None
        except Exception as error:  # anything else: one line too; the traceback at DEBUG
            log.debug("publish-dags failed", exc_info=error)
            raise CommandError(f"could not publish: {type(error).__name__}: {first_line(error)}") from None
    print(report.summary())
    if report.not_found:
        print(
            f"airflow-lineage: no DAG {', '.join(map(repr, report.not_found))} in the metadata database "
            "(see `airflow dags list`)",
            file=sys.stderr,
        )
        return 1
    return 0


def register(subparsers: Any) -> None:
    """Add ``publish-dags`` to the ``airflow-lineage`` parser."""
    help_text = "Publish the declared lineage of Airflow's DAGs (OpenLineage JobEvents) into the outbox."
    parser = subparsers.add_parser("publish-dags", help=help_text, description=help_text)
    parser.add_argument(
        "--outbox", metavar="URL", help="SQLAlchemy URL of the outbox (default: [lineage_provider] outbox_url)"
    )
    parser.add_argument(
        "--metadata-db",
        metavar="URL",
        help="SQLAlchemy URL of Airflow's metadata database (default: the [lineage_provider] "
        "publish_metadata_conn_id connection when set, else Airflow's own [database] sql_alchemy_conn)",
    )
    parser.add_argument(
        "--all", action="store_true", help="publish every DAG again, not only those changed since the last time"
    )
    parser.add_argument("--dag-id", action="append", metavar="DAG_ID", help="only this DAG (repeat for several)")
    parser.set_defaults(handler=run_publish_dags)
