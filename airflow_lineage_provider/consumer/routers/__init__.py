"""HTTP routers of the consumer, one per resource."""
