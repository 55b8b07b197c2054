"""The store contract every lineage store meets, the in-memory store, and leader election over it."""
