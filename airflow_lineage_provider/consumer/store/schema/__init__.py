"""The store's schema: its tables, their migrations and the store's own settings."""
