"""Routes that operate the store: retention and prunes, reset, statistics and the ingest log."""
