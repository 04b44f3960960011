"""The lineage graph: walks, subgraphs and listings, dataset identity, renderings and containment."""
