"""Marquez's API: its answer shapes, what they are built from, its routes, path and query parameters, and errors."""
