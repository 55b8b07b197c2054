"""The lineage: a table's segments, entries and versions, kept in a store (ZooKeeper)."""
