"""The fault harness: the scenarios of the fault matrix run against a real
ZooKeeper ensemble on loopback, with real pushes, readers and retention, and
a report of what was injected, what was checked and what held.

Run it with ``python -m faults`` (``--quick`` for the short subset).
"""
