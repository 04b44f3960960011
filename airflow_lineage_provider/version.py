"""The package version, kept import-free so the build and ``get_provider_info`` can read it cheaply."""

__version__ = "0.1.0"
