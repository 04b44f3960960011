"""The ``airflow-lineage`` command line.

Each command group lives in its own module exposing ``register(subparsers)``, which adds its
sub-commands with ``set_defaults(handler=...)``; a handler takes the parsed arguments and returns the
exit code. Errors a user can act on are raised as :class:`CommandError` and printed as one line.
"""

from __future__ import annotations

import argparse
import sys
from importlib import import_module

from airflow_lineage_provider.version import __version__

#: Modules contributing sub-commands, in the order they appear in ``--help``.
COMMAND_MODULES = (
    "airflow_lineage_provider.cli.outbox_commands",
    "airflow_lineage_provider.cli.serve_command",
    "airflow_lineage_provider.cli.store_commands",
    "airflow_lineage_provider.cli.design_commands",
    "airflow_lineage_provider.cli.impact_command",
)


class CommandError(Exception):
    """A failure the user can act on: printed as ``airflow-lineage: error: <message>``, exit code 2."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="airflow-lineage",
        description="Operate airflow-lineage-provider: the outbox, shipping and export, the lineage consumer, and "
        "design-time lineage.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module_name in COMMAND_MODULES:
        try:
            module = import_module(module_name)
        except ModuleNotFoundError as error:
            if error.name != module_name:
                raise
            continue  # a command group not installed in this build
        module.register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except CommandError as error:
        print(f"airflow-lineage: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("airflow-lineage: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
