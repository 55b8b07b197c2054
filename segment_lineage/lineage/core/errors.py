"""The exception tree of the lineage package.

Everything raised on purpose derives from :class:`LineageError`, so callers
(the CLI above all) catch one root. Subclasses also derive from the built-in
category they belong to, and carry the ids they are about.

Two outcomes are kept apart on purpose:

* :class:`ConflictError`, :class:`RefusedError` and the validation errors mean
  *definitely not applied*: nothing changed, the caller may fix and retry.
* :class:`OutcomeUnknownError` means the write may or may not have landed.
  Never clean up after it; re-read first.
"""

from __future__ import annotations


class LineageError(Exception):
    """Root of every error this package raises on purpose."""

    #: Hint for the operator: what to do about it. Shown by the CLI.
    remedy: str | None = None

    def __init__(self, message: str, *, remedy: str | None = None) -> None:
        super().__init__(message)
        if remedy is not None:
            self.remedy = remedy

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else type(self).__name__


class InvalidInputError(LineageError, ValueError):
    """Bad input (a name, a period, a location, an argument). Nothing changed."""


class InvalidNameError(InvalidInputError):
    """A table, segment or entry name failed the allow-list."""

    def __init__(self, kind: str, name: object, problem: str) -> None:
        super().__init__(f"invalid {kind} name {name!r}: {problem}")
        self.kind = kind
        self.name = name
        self.problem = problem


class InvalidPeriodError(InvalidInputError):
    def __init__(self, text: object, problem: str) -> None:
        super().__init__(
            f"invalid period {text!r}: {problem} "
            "(use a number with a unit, such as 0s, 30m, 12h, 7d or 1d12h)"
        )
        self.text = text


class NotFoundError(LineageError, LookupError):
    """Something named does not exist."""


class TableNotFoundError(NotFoundError):
    def __init__(self, table: str, *, dropping: bool = False) -> None:
        if dropping:  # marked dropping by a drop that did not finish: its name and root stay taken
            super().__init__(
                f"table {table!r} is being dropped (a drop of it did not finish)",
                remedy=f"finish the drop: lineage table drop {table} --force",
            )
        else:
            remedy = "create it with 'lineage table create'"
            super().__init__(f"table {table!r} does not exist", remedy=remedy)
        self.table = table


class VersionGoneError(NotFoundError):
    """A table version that is no longer retained (or never existed)."""

    def __init__(
        self,
        table: str,
        version: int,
        oldest: int | None,
        newest: int | None = None,
        why: str = "is no longer retained",
        keep: str | None = None,
    ) -> None:
        """``keep``: the hint's way to keep such versions readable, when
        another setting than the versions kept took this one."""
        if newest is not None and version > newest:
            message = f"table {table!r} has no version {version} yet (the newest is {newest})"
        else:
            message = f"snapshot too old: version {version} of table {table!r} {why}"
            if oldest is not None:
                message += f" (the oldest readable version is {oldest})"
        remedy = "list versions with 'lineage history'"
        if keep is not None:
            remedy += f"; {keep}"
        elif newest is None or version <= newest:  # a busy table outran its kept versions, maybe
            remedy += f"; to keep more, 'lineage table alter {table} --versions-kept N' (default 64)"
        super().__init__(message, remedy=remedy)
        self.table = table
        self.version = version
        self.oldest = oldest


class TableExistsError(LineageError):
    def __init__(self, table: str, existing: str | None = None) -> None:
        if existing is None or existing == table:
            msg = f"table {table!r} already exists"
        else:
            msg = f"table {table!r} differs only in case from existing table {existing!r}"
        super().__init__(msg)
        self.table = table
        self.existing = existing


class EntryNotFoundError(NotFoundError):
    def __init__(self, table: str, entry_id: str) -> None:
        super().__init__(
            f"lineage entry {entry_id!r} does not exist in table {table!r}",
            remedy="list the entries with 'lineage entries TABLE'",
        )
        self.table = table
        self.entry_id = entry_id


class SegmentNotFoundError(NotFoundError):
    def __init__(self, table: str, segments: list[str]) -> None:
        shown = ", ".join(segments[:5]) + (" ..." if len(segments) > 5 else "")
        super().__init__(f"segment(s) not registered in table {table!r}: {shown}")
        self.table = table
        self.segments = segments


class RefusedError(LineageError):
    """A precondition of the operation does not hold. Nothing changed.

    ``expected`` and ``found`` say what the rule wanted and what it saw.
    """

    def __init__(
        self,
        message: str,
        *,
        table: str | None = None,
        entry_id: str | None = None,
        expected: str | None = None,
        found: str | None = None,
        remedy: str | None = None,
    ) -> None:
        super().__init__(message, remedy=remedy)
        self.table = table
        self.entry_id = entry_id
        self.expected = expected
        self.found = found


class ConflictError(RefusedError):
    """The operation collides with another live lineage entry. Nothing changed."""


class RunningEntryConflict(ConflictError):
    """The colliding entry is IN_PROGRESS: a push may wait for it to end."""


class ContentionError(LineageError):
    """Too many concurrent writers: the bounded retries ran out. Nothing changed.

    Safe to retry later.
    """

    def __init__(
        self,
        table: str,
        attempts: int,
        seconds: float,
        *,
        doing: str = "applying the change",
        waiting: str = "",
        floor_wait_s: float = 0.0,
    ) -> None:
        tries = f"{attempts} time" if attempts == 1 else f"{attempts} times"
        if waiting:  # most of the time went on waiting for other writers, not on losing races
            told = f"table {table!r} was kept busy by other writers for {seconds:.1f}s"
            told += f" ({waiting}; tried {tries})"
        else:
            told = f"table {table!r} changed under us {tries} in {seconds:.1f}s"
        super().__init__(
            f"{told}; gave up without {doing}",
            remedy="retry later, or reduce the number of concurrent writers",
        )
        self.table = table
        self.attempts = attempts
        self.seconds = seconds  # from the first attempt to giving up
        self.floor_wait_s = floor_wait_s  # of the time, how long it waited on other writers' floors


class OutcomeUnknownError(LineageError):
    """A write was sent but its result could not be learned.

    It may or may not have been applied. Do not clean up after it: re-read.
    """

    def __init__(self, table: str, commit_id: str, cause: str) -> None:
        super().__init__(
            f"the outcome of commit {commit_id} on table {table!r} is unknown ({cause})",
            remedy="look before doing anything else: 'lineage history TABLE' shows whether the commit "
            "landed ('lineage entries TABLE', a push's entry)",
        )
        self.table = table
        self.commit_id = commit_id


class TooLargeError(InvalidInputError):
    """A record or request would exceed the size budget. Refused before sending."""


class CorruptRecordError(LineageError):
    """A stored record could not be decoded. Readers and retention fail closed."""

    def __init__(self, where: str, problem: str, *, remedy: str | None = None) -> None:
        super().__init__(f"corrupt lineage record at {where}: {problem}", remedy=remedy)
        self.where = where
        self.problem = problem


class StoreUnavailableError(LineageError, ConnectionError):
    """The metadata store could not be reached. Nothing was written."""


class AuthError(LineageError, PermissionError):
    """The store refused our credentials or our identity lacks a permission."""


class ServerError(LineageError):
    """Starting or stopping the embedded ZooKeeper server failed."""


class MirrorHeldError(RefusedError):
    """Another process holds the table's mirror: one publishes to its log,
    or removes it (a drop, a disable), at a time."""

    def __init__(self, table: str, holder: str | None = None) -> None:
        who = f"another process ({holder})" if holder else "another process"
        super().__init__(
            f"{who} holds the Delta mirror of table {table!r} (publishing to it, or removing it); "
            "nothing was changed",
            table=table,
            remedy="wait for it to finish, then retry (a holder that was killed lets go when its "
            "ZooKeeper session times out; one that hangs, when it is stopped)",
        )


class PassRunningError(RefusedError):
    """Another retention pass holds the table: passes over one table never overlap."""

    def __init__(self, table: str) -> None:
        super().__init__(
            f"another retention pass is running on table {table!r}; this pass deleted nothing",
            table=table,
            remedy="wait for it to finish (the daemon's passes hold the table while they run), then retry; "
            "a pass that was killed lets go when its ZooKeeper session times out",
        )


class ClaimLostError(RefusedError):
    """A commit made on behalf of a push's entry found the push's claim gone:
    its ZooKeeper session ended (the process paused past its session timeout,
    or was cut off), so another process may have judged it dead and acted.
    Checked in the same request as the commit: nothing was committed."""

    def __init__(self, table: str, entry_id: str, done: str = "") -> None:
        super().__init__(
            f"the push to table {table!r} lost its claim on entry {entry_id} (its ZooKeeper session "
            f"ended while it ran, so another process may have taken over); it committed nothing"
            + (f"; {done}" if done else ""),
            table=table,
            entry_id=entry_id,
            remedy="look at 'lineage history' and push again if the data is not there "
            "(a push with --job-id pushes nothing twice)",
        )
