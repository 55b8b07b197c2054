"""A deterministic simulation of the whole protocol, in the manner of
FoundationDB's simulation testing and TigerBeetle's VOPR.

Every actor (pushers, readers, rollbacks, reverts, deletes and re-adds,
retention passes, the metadata sweep, table creates) runs the project's real
code on a thread of one seeded scheduler; only one runs at a time, and the
baton changes hands at every store call and every failpoint. Faults (crashes,
lost answers, session expiry, pauses, clock jumps) are injected at those
switch points, and a checker holds the promises after every step.

``python -m simulation --seeds 50``; see docs/faults.md.
"""
