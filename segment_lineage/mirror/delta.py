"""The Delta Lake log of a table's mirror, through ``deltalake``: the only
module that imports it.

The log lives under the table's root (``_delta_log/``) and references the
segments' files where they are. Every commit the publisher makes names the
lineage version it publishes twice: in its commit metadata (for people and
for mapping versions both ways) and as the version of a Delta application
transaction (``txn``), which the log's snapshot carries, so the newest
published lineage version is read without reading the history. A commit is
made against the log version the publisher read, never rebased onto a newer
one (``max_commit_retries=0``): two publishers racing, one lands, the other
reads again. The log's expired-entry cleanup is off (retention reads old
commits to know which files a reader may still time-travel to), and vacuum
is never ours to run: retention deletes files, and knows which the mirror
references.
"""

from __future__ import annotations

import contextlib
import json
import threading
from typing import Any
from urllib.parse import unquote

import pyarrow as pa

from segment_lineage.lineage.core.errors import LineageError
from segment_lineage.lineage.core.model import TableState
from segment_lineage.lineage.core.schema import Schema
from segment_lineage.lineage.storage.arrow_types import arrow_schema
from segment_lineage.lineage.storage.deep import DeepStore
from segment_lineage.mirror.errors import MirrorConflict, MirrorError, MirrorRefusedError, damaged_log
from segment_lineage.mirror.location import location
from segment_lineage.mirror.log_files import RESET_OPERATION, Commit, LogFiles, window_start
from segment_lineage.mirror.plan import (
    Columns,
    Shown,
    Step,
    after,
    described,
    overwrites,
)
from segment_lineage.mirror.stats import files_stats

APP_ID = "segment-lineage"
LOG_SETTINGS = {
    "delta.enableExpiredLogCleanup": "false",  # old commits tell retention what readers may still read
    "delta.logRetentionDuration": "interval 3650 days",
}
MAX_HISTORY = 1_000_000  # mirror commits read for a version map, newest first


def encode_fields(schema: Schema) -> tuple[tuple[str, ...], Any]:
    """Each column as the log records it (sorted-key JSON), and the deltalake schema."""
    from deltalake import Schema as DeltaSchema

    try:
        delta = DeltaSchema.from_arrow(arrow_schema(schema))
    except Exception as exc:  # noqa: BLE001  deltalake raises bare Exception for a type it lacks
        raise MirrorRefusedError(f"the table's columns have no Delta Lake schema: {_first(exc)}") from None
    return _fields(delta.to_json()), delta


def _fields(schema_json: str) -> tuple[str, ...]:
    doc = json.loads(schema_json)
    return tuple(json.dumps(field, sort_keys=True) for field in doc.get("fields", []))


def _first(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class DeltaLog:
    """The log of one table's mirror, as read once (``open``); ``commit``
    moves it one version on. A commit another writer made after our read
    fails with :class:`MirrorConflict`: open the log again."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.store = DeepStore.for_root(root)
        self.uri, self.options = location(self.store)
        self.files = LogFiles(self.store)
        self._table: Any = None
        self._written: int | None = None  # a version this log wrote since: loaded when next wanted
        self._loading = threading.Lock()  # a load in the background (:meth:`prefetch`) and a use
        self.shown = Shown(None, 0, frozenset(), ())
        # A lineage version whose visible files are exactly ``shown.files`` (the
        # one this process published last, set by the publisher): the next
        # step is planned from what changed since it. None once the log is
        # read, reset or removed.
        self.base: TableState | None = None
        self.newest: Commit | None = None
        self._all: list[Commit] | None = None  # the whole history, once read (until the log moves)

    @staticmethod
    def open(root: str) -> DeltaLog:
        log = DeltaLog(root)
        log._read()
        return log

    def exists(self) -> bool:
        return self.shown.version is not None

    def mark(self) -> tuple[tuple[int, int] | None, ...] | None:
        """The log's newest commit file as it is now, and the next one's
        absence (:meth:`LogFiles.mark`); None before the first commit."""
        return None if self.shown.version is None else self.files.mark(self.shown.version)

    def _read(self) -> None:
        self._all, self._written, self.base = None, None, None
        from deltalake import DeltaTable

        try:
            if not DeltaTable.is_deltatable(self.uri, self.options):
                self._table, self.shown, self.newest = None, Shown(None, 0, frozenset(), ()), None
                return
            table = DeltaTable(self.uri, storage_options=self.options)
            self._table = table
            self.shown = shown = self._shown(table)
            # The loaded version's own commit, read by its file's name (no listing).
            self.newest = None if shown.version is None else self.files.commit_at(shown.version)
        except MirrorError:
            raise
        except Exception as exc:  # noqa: BLE001  deltalake's errors share no root
            raise damaged_log(self.root, _first(exc)) from None

    @staticmethod
    def _shown(table: Any) -> Shown:
        paths = pa.table(table.get_add_actions(flatten=False)).column("path").to_pylist()
        published = table.transaction_version(APP_ID)
        return Shown(
            int(table.version()),
            int(published or 0),
            frozenset(unquote(p) for p in paths),
            _fields(table.schema().to_json()),
        )

    def schema(self) -> Any:
        """The log's newest schema, as deltalake has it (None without a log)."""
        return None if self.shown.version is None else self._loaded().schema()

    def foreign(self) -> Commit | None:
        """The newest commit, when another writer than the publisher made it."""
        if self.newest is not None and self.newest.lineage_version is None and not self.newest.reset:
            return self.newest
        return None

    def commit(self, step: Step, delta_schema: Any, now_ms: int) -> int:
        """Write ``step`` as the next version of the log read, at ``now_ms``
        (ZooKeeper's time); its version. MirrorConflict when another commit
        took that version first."""
        from deltalake.transaction import (
            CommitProperties,
            PostCommitHookProperties,
            Transaction,
            create_table_with_add_actions,
        )

        props = CommitProperties(
            custom_metadata={**step.metadata(now_ms), **described(step, self.shown.files)},
            max_commit_retries=0,
            app_transactions=[Transaction(APP_ID, step.version)],
        )
        hooks = PostCommitHookProperties(create_checkpoint=True, cleanup_expired_logs=False)
        adds = self._adds(step, [field.name for field in delta_schema.fields])
        try:
            if self.shown.version is None:
                expected = 0
                create_table_with_add_actions(
                    self.uri,
                    delta_schema,
                    adds,
                    mode="error",
                    configuration=LOG_SETTINGS,
                    storage_options=self.options,
                    commit_properties=props,
                    post_commithook_properties=hooks,
                )
            else:
                expected = self._write(step, self.shown.version + 1, delta_schema, adds, props, hooks, now_ms)
        except Exception as exc:  # noqa: BLE001  deltalake's errors share no root
            raise _write_failed(exc, self.root, ("CommitFailedError", "TableAlreadyExistsError")) from None
        self.shown = after(self.shown, step, expected)
        self._written = expected  # loaded when next wanted: a sync's last commit needs no reload
        commit_id = step.record.commit_id if step.record is not None else None
        self.newest = Commit(expected, step.version, now_ms, "WRITE", commit_id=commit_id)
        self._all = None
        return expected

    def _write(
        self,
        step: Step,
        expected: int,
        delta_schema: Any,
        adds: list[Any],
        props: Any,
        hooks: Any,
        now_ms: int,
    ) -> int:
        """``step`` committed on the log read as version ``expected`` (the one
        after, when a commit adding its new columns comes first); its version."""
        from deltalake.transaction import RemoveAction

        table = self._loaded()
        if step.columns is Columns.ADDED:
            self._add_columns(step, delta_schema, now_ms, hooks)
            expected += 1
        overwrite = overwrites(step, self.shown.files)
        removes = [RemoveAction(loc, True, now_ms, None) for loc in step.removes]
        table.create_write_transaction(
            adds if overwrite else [*adds, *removes],
            mode="overwrite" if overwrite else "append",
            schema=delta_schema,
            commit_properties=props,
            post_commithook_properties=hooks,
        )
        return expected

    def _adds(self, step: Step, columns: list[str]) -> list[Any]:
        """The add actions of ``step``'s files, with their sizes as stored and
        their statistics as their footers state them (:mod:`.stats`), for a
        table of ``columns``."""
        from deltalake.transaction import AddAction

        sizes = self._sizes(step)
        stats = files_stats(self.store, [seg.location for seg in step.adds], columns)
        return [
            AddAction(
                seg.location,
                sizes[seg.location],
                {},
                seg.created_ms,
                True,
                stats.get(seg.location),  # type: ignore[arg-type]  # None: none, engines read the file
            )
            for seg in step.adds
        ]

    def _add_columns(self, step: Step, delta_schema: Any, now_ms: int, hooks: Any) -> None:
        """A commit adding the new columns alone: it shows the files published
        before, with the new columns null."""
        from deltalake.transaction import CommitProperties

        table = self._loaded()
        new = [f for f in delta_schema.fields if f.name not in _names(table.schema())]
        metadata = {
            **step.metadata(now_ms),
            "segment_lineage.version": str(self.shown.lineage_version),
            "segment_lineage.commit": "",
            "segment_lineage.kind": "columns",
        }
        table.alter.add_columns(
            new,
            commit_properties=CommitProperties(custom_metadata=metadata, max_commit_retries=0),
            post_commithook_properties=hooks,
        )

    @property
    def written_since(self) -> bool:
        """Whether this log wrote a version it has not loaded yet."""
        return self._written is not None

    def prefetch(self) -> None:
        """Load the version this log wrote last now, so that the next commit
        finds it loaded (a publisher keeping the log runs this in the
        background between its publishes). A failure leaves it to that commit."""
        with self._loading, contextlib.suppress(MirrorError):
            self._load_now()

    def _loaded(self) -> Any:
        """The table as of the version read, or the one this log wrote last:
        exactly that one (a later one, another publisher's, is not what
        ``shown`` says, and the next commit must conflict with it), loaded
        only when wanted after a commit (a reload of a big log costs about as
        much as the commit), or by :meth:`prefetch` (then waited for)."""
        with self._loading:
            return self._load_now()

    def _load_now(self) -> Any:
        from deltalake import DeltaTable

        version, self._written = self._written, None
        if version is None:
            return self._table
        try:
            if self._table is None:
                self._table = DeltaTable(self.uri, version=version, storage_options=self.options)
            else:
                self._table.load_as_version(version)
        except Exception as exc:  # noqa: BLE001  deltalake's errors share no root
            self._written = version
            raise MirrorError(f"reading version {version} of the Delta log failed: {_first(exc)}") from None
        return self._table

    def reset(self, delta_schema: Any, fields: tuple[str, ...], now_ms: int) -> int:
        """One commit that shows no file, with ``delta_schema`` (the table's
        columns): what a repair writes first over a log whose columns another
        writer changed while files of ours stay (one Delta commit may not
        remove and add one path). Its version; the next commit publishes the
        table's files."""
        from deltalake.transaction import CommitProperties, PostCommitHookProperties

        if self.shown.version is None:
            raise MirrorError(f"no Delta log under {self.root!r} to reset")
        props = CommitProperties(
            custom_metadata={"segment_lineage.kind": "reset", "segment_lineage.published_ms": str(now_ms)},
            max_commit_retries=0,
        )
        hooks = PostCommitHookProperties(create_checkpoint=True, cleanup_expired_logs=False)
        expected = self.shown.version + 1
        try:
            self._loaded().create_write_transaction(
                [],
                mode="overwrite",
                schema=delta_schema,
                commit_properties=props,
                post_commithook_properties=hooks,
            )
        except Exception as exc:  # noqa: BLE001  deltalake's errors share no root
            raise _write_failed(exc, self.root, ("CommitFailedError",)) from None
        self.shown = Shown(expected, self.shown.lineage_version, frozenset(), fields)
        self._written, self.base = expected, None
        self.newest = Commit(expected, None, now_ms, RESET_OPERATION, reset=True)
        self._all = None
        return expected

    def check_files(self, step: Step) -> None:
        """MirrorError when a file ``step`` adds is missing (nothing written)."""
        self._sizes(step)

    def _sizes(self, step: Step) -> dict[str, int]:
        """Each added file's own size, as deep storage has it: engines read a
        Parquet footer at the offset the size gives, and a size registered by
        hand (``segment add --no-check``) is only the caller's word."""
        found = self.store.file_sizes([seg.location for seg in step.adds]) if step.adds else {}
        missing = [loc for loc, size in found.items() if size is None]
        if missing:
            raise MirrorError(
                f"segment file {missing[0]!r} of version {step.version} is missing: "
                "the mirror references only files that exist"
            )
        return {loc: int(size) for loc, size in found.items() if size is not None}

    def history(self, limit: int | None = None) -> list[Commit]:
        """The log's commits up to the version read, newest first (the whole
        history is read once: ownership checks, the version map and the
        retention window share it). Each commit's number is its file's name:
        a commit another publisher lands meanwhile shifts no number (a loaded
        table's own history counts down from the version it loaded, whatever
        the files it then lists)."""
        if self.shown.version is None:
            return []
        if limit is None and self._all is not None:
            return list(self._all)
        try:
            found = self._commits(self.shown.version, limit)
        except ValueError as exc:  # a commit file that does not parse
            raise damaged_log(self.root, _first(exc)) from None
        except LineageError as exc:
            raise MirrorError(
                f"reading the Delta log's history under {self.root!r} failed: {_first(exc)}"
            ) from None
        if limit is None:
            self._all = found
        return list(found)

    def _commits(self, upto: int, limit: int | None) -> list[Commit]:
        """The log's commits up to version ``upto``, newest first, at most ``limit``."""
        found: list[Commit] = []
        for version in self.files.commit_versions():
            if version > upto:
                continue  # landed after the read: not part of the log as read
            if limit is not None and len(found) >= limit:
                break
            commit = self.files.commit_at(version)
            if commit is not None:  # cleaned up meanwhile: gone for every reader too
                found.append(commit)
        return found

    def referenced_since(self, horizon_ms: int) -> frozenset[str]:
        """Every file a version of the log an engine may still read references:
        those of the newest version committed at or before ``horizon_ms`` (the
        oldest, when none was), and every file a later commit adds. Read from
        the log's own commits."""
        from deltalake import DeltaTable

        if self.shown.version is None:
            return frozenset()
        start = self.window_start(horizon_ms)
        try:
            then = DeltaTable(self.uri, version=start, storage_options=self.options)
            paths = pa.table(then.get_add_actions(flatten=False)).column("path").to_pylist()
        except Exception as exc:  # noqa: BLE001  deltalake's errors share no root
            raise MirrorError(f"reading version {start} of the Delta log failed: {_first(exc)}") from None
        found = {unquote(p) for p in paths}
        for version in range(start + 1, self.shown.version + 1):
            found.update(self.files.added(version))
        return frozenset(found)

    def files_at(self, version: int) -> frozenset[str] | None:
        """The files Delta version ``version`` shows; None when it cannot be
        loaded (its commits cleaned from the log, or unreadable)."""
        from deltalake import DeltaTable

        try:
            then = DeltaTable(self.uri, version=version, storage_options=self.options)
            paths = pa.table(then.get_add_actions(flatten=False)).column("path").to_pylist()
        except Exception:  # noqa: BLE001  deltalake's errors share no root
            return None
        return frozenset(unquote(p) for p in paths)

    def window_start(self, horizon_ms: int) -> int:
        """The version current at ``horizon_ms`` (:func:`log_files.window_start`)."""
        return window_start(self.history(), horizon_ms)

    def clean(self, horizon_ms: int) -> int:
        """Delete the log's commits and checkpoints older than its newest
        checkpoint at or before the version current at ``horizon_ms`` (how
        many files): every version from there on still loads, and versions
        before the window are not ones engines may still read. Delta's own
        log cleanup is off; this is ours."""
        if self.shown.version is None:
            return 0
        return self.files.clean_before(self.window_start(horizon_ms))

    def remove(self) -> bool:
        """Delete the whole log; False when there was none."""
        gone = self.files.remove()
        self._table, self.shown, self.newest, self._all = None, Shown(None, 0, frozenset(), ()), None, None
        self._written, self.base = None, None
        return gone


def _write_failed(exc: Exception, root: str, conflicts: tuple[str, ...]) -> MirrorError:
    """MirrorConflict for a write another commit beat (an error named in
    ``conflicts``, or one saying the version exists), else MirrorError."""
    text = _first(exc)
    if type(exc).__name__ in conflicts or "exists" in text:
        return MirrorConflict(f"another commit reached the Delta log first: {text}")
    return MirrorError(f"writing the Delta log under {root!r} failed: {text}")


def _names(schema: Any) -> set[str]:
    return {field.name for field in schema.fields}
