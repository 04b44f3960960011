"""Operations on the whole store: retention, reset, statistics and idle connections."""
