"""Crash-safe cleanup: the planner, the fenced executor, and the leader-elected daemon."""
