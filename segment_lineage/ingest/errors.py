"""Errors of the ingest package: one root, derived from the lineage root so the
CLI's single handler covers them; and deep storage's, under its own name."""

from __future__ import annotations

import signal
from pathlib import PurePosixPath

from segment_lineage.lineage.core.errors import (
    InvalidInputError,
    LineageError,
    OutcomeUnknownError,
    RefusedError,
    StoreUnavailableError,
)
from segment_lineage.lineage.storage.errors import StorageError

__all__ = [
    "IngestError",
    "NoColumnsError",
    "PushError",
    "PushInputError",
    "PushInterrupted",
    "PushNotCommittedError",
    "PushOutcomeUnknownError",
    "PushRefusedError",
    "SnapshotTooOldError",
    "StorageError",
    "check_csv_header",
    "unreadable_input",
]


class IngestError(LineageError):
    """Root of the errors the ingest package defines. Deep storage's
    :class:`StorageError` (which ingest raises too) is named here as well,
    but derives from the lineage root, not from this one: storage lies below
    ingest."""


class PushError(IngestError):
    """A push failed; its entry was reverted (or is left for the next push to clean up)."""


class PushNotCommittedError(PushError, StoreUnavailableError):
    """ZooKeeper went away during a push, before its commit was sent: it did
    not commit. Says what was left behind and that a retry is safe."""

    def __init__(self, table: str, entry_id: str, cause: str, left: str) -> None:
        super().__init__(
            f"push to {table!r} did not commit: ZooKeeper became unreachable ({cause}); {left}; "
            "pushing again is safe",
            remedy=f"push again once ZooKeeper answers ('lineage entries {table}' shows the entry)",
        )
        self.table = table
        self.entry_id = entry_id


class PushOutcomeUnknownError(IngestError, OutcomeUnknownError):
    """A push's completion was sent but no answer came: it may have landed.
    Nothing was cleaned up."""

    def __init__(self, table: str, entry_id: str, commit_id: str, cause: str, job_id: str | None) -> None:
        retry = (
            f"pushing again with --job-id {job_id} is safe (a job that landed is not pushed twice)"
            if job_id
            else "push again only once it shows IN_PROGRESS or REVERTED (a push without --job-id that "
            "landed would be applied twice)"
        )
        LineageError.__init__(
            self,
            f"push to {table!r}: whether it committed is unknown: its completion of entry {entry_id} "
            f"(commit {commit_id}) was sent but no answer came ({cause}); nothing was cleaned up; {retry}",
            remedy=f"'lineage entries {table}': COMPLETED means it landed; IN_PROGRESS, the next push "
            "cleans it up",
        )
        self.table = table
        self.commit_id = commit_id
        self.entry_id = entry_id


class PushRefusedError(IngestError, RefusedError):
    """A push's input or mode does not fit the table. Nothing was written."""


class PushInputError(IngestError, InvalidInputError):
    """A push's arguments are malformed (an unknown mode, say). Nothing was written."""


class NoColumnsError(IngestError, RefusedError):
    """A table read before its first push recorded any column."""


class SnapshotTooOldError(IngestError):
    """A snapshot's files were reclaimed by retention."""

    def __init__(self, table: str, version: int, detail: str) -> None:
        super().__init__(
            f"snapshot too old: version {version} of table {table!r} can no longer be read ({detail})",
            remedy="read the table again to get the current snapshot",
        )
        self.table = table
        self.version = version


def signal_name(signum: int) -> str:
    """SIGINT, SIGTERM, ... (``signal N`` for a number no signal has)."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


class PushInterrupted(KeyboardInterrupt):
    """A push stopped by SIGINT or SIGTERM, after cleaning up (``cleanup``:
    nothing to undo, its entry reverted and files queued, it had completed,
    or left to the next push). An interrupt, not a LineageError: it ends the
    program unless caught."""

    def __init__(self, table: str, entry_id: str, signum: int, cleanup: str) -> None:
        name = signal_name(signum)
        what = {
            "nothing": "it had not started; nothing changed",
            "reverted": f"entry {entry_id} reverted, its files queued for retention",
            "completed": f"entry {entry_id} had already completed; the push landed",
        }.get(cleanup, f"entry {entry_id} left for the next push to clean up (reverting it failed)")
        super().__init__(f"push to {table!r} interrupted by {name}: {what}")
        self.table = table
        self.entry_id = entry_id
        self.signum = signum
        self.cleanup = cleanup  # nothing, reverted, completed or left


class PushSetInterrupted(KeyboardInterrupt):
    """A push set stopped by SIGINT or SIGTERM, after cleaning up every table
    as :class:`PushInterrupted` says for one (``cleanups``: table -> what
    became of its entry)."""

    def __init__(self, set_id: str, signum: int, cleanups: dict[str, str]) -> None:
        name = signal_name(signum)
        by: dict[str, list[str]] = {}
        for table, cleanup in sorted(cleanups.items()):
            by.setdefault(cleanup, []).append(table)
        if set(by) == {"completed"}:
            what = "it had already landed in every table"
        else:
            said = {
                "nothing": "not started in {}",
                "reverted": "entries reverted in {} (their files queued for retention)",
                "completed": "completed in {}",
            }
            left = "left for the next push to clean up in {} (reverting failed)"
            what = "; ".join(said.get(c, left).format(", ".join(t)) for c, t in by.items())
        super().__init__(f"push set {set_id} interrupted by {name}: {what}")
        self.set_id = set_id
        self.signum = signum
        self.cleanups = dict(cleanups)


def unreadable_input(path: str, fmt: str, exc: BaseException) -> IngestError:
    """The error for an input that could not be read: bad input (exit 2) when
    the input itself is at fault (missing, not allowed, not in its format),
    a refusal (exit 1) when reading it failed on the way (an I/O error, a
    store that did not answer), which a rerun may get past."""
    first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if isinstance(exc, FileNotFoundError) and first == path:  # Arrow's word for a device or a pipe
        first = "not a regular file or a directory of files"
    message = f"cannot read input {path!r} as {fmt}: {first}"
    named = _named_format(path)
    remedy = None
    if named not in (None, fmt):
        remedy = f'its name says {named}: --format {named} (in a push set\'s block, format = "{named}")'
    at_fault = (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError, ValueError)
    if isinstance(exc, at_fault) or not isinstance(exc, OSError):  # ArrowInvalid is a ValueError
        return PushInputError(message, remedy=remedy)
    return PushRefusedError(message, remedy=remedy)


def _named_format(path: str) -> str | None:
    """The input format a file's name suggests (never taken as given: a
    format is chosen out loud), for the hint after a failed read."""
    suffix = PurePosixPath(path.rstrip("/")).suffix.lower().lstrip(".")
    return {"csv": "csv", "json": "json", "jsonl": "json", "ndjson": "json", "parquet": "parquet"}.get(suffix)


def check_csv_header(path: str, names: list[str]) -> None:
    """PushInputError when a CSV input's first row looks like data, not a
    header (every name a number): read as a header, it would name the
    columns after one row's values and leave that row out."""

    def number(text: str) -> bool:
        try:
            float(text)
        except ValueError:
            return False
        return True

    if names and all(number(name) for name in names):
        raise PushInputError(
            f"the CSV input {path!r} has no header row: its first row ({', '.join(names[:5])}) is numbers",
            remedy="add a header row naming the columns",
        )
