"""The producer side: building OpenLineage run events for user code and sending them.

Modules, from the outside in: :mod:`.run` (the ``lineage_run`` lifecycle), :mod:`.emit` (one event),
:mod:`.task_facets` (this package's run facets for an event of the task), :mod:`.dataset_refs` (accepted dataset
forms), :mod:`.connectors` (naming and schema lookup per database), :mod:`.dataset_facets` (schema and
column-lineage helpers) and :mod:`.client` (where events go).

Below the producer and the facets, which both read it: :mod:`airflow_lineage_provider.task_context` (the
Airflow task the code runs in, looked up once, and the enclosing ``lineage_run``) and
:mod:`airflow_lineage_provider.parent_run` (links to the Airflow task's OpenLineage run).
"""
