"""``python -m airflow_lineage_provider`` runs the ``airflow-lineage`` command line."""

import sys

from airflow_lineage_provider.cli import main

sys.exit(main())
