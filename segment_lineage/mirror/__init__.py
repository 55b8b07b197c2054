"""Every engine reads the consistent snapshot: each lineage version of a
mirrored table published as a version of an open table format (Delta Lake)
under the table's root, with ZooKeeper staying the single truth.

:mod:`.plan` (pure: what one lineage version changes in the mirror),
:mod:`.delta` (the Delta log, through ``deltalake``: the only module that
imports it), :mod:`.log_files` (the log's files as they are, through deep
storage), :mod:`.publisher` (sync, status, the version map) and :mod:`.hook`
(publishing right after a commit). Retention keeps every file a mirror
version engines may still read references, and asks :mod:`.window` alone
which those are. See docs/engines.md.
"""
