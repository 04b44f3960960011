"""The ingest's write path: events applied to the graph, inline or deferred, and declarations."""
