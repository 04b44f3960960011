"""Routes over the lineage graph: walks (:mod:`.lineage`), column lineage, the paged graph, drift between declared
and observed lineage, and datasets whose names conflict."""
