"""segment-lineage: atomic segment replacement, rollback and safe cleanup, with lineage in ZooKeeper."""
