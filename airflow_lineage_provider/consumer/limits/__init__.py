"""Bounds that keep one client from starving the process: the ``Host`` allow-list, paths and queries, the bodies of
routes other than ingest, unknown query names, listing answers, graph walks and clients that stop reading."""
