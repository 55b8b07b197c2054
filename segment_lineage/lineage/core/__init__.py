"""The pure core: the data model, its transitions, visibility, names, periods and errors.

Nothing here does I/O or imports an outside system."""
