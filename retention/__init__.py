"""The retention daemon: garbage collection of replaced and abandoned segments."""
