"""Marquez's API: its answer shapes, paths, values and errors."""
