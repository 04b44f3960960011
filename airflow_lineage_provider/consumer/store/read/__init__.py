"""Reads other than walks: visibility, listings, search, sources, tags, drift and the read-only store."""
