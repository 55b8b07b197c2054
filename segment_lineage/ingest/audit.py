"""Write-audit-publish: checks a push's data must pass before its entry ends.

A push's IN_PROGRESS entry is a staged snapshot no reader sees. With an
:class:`Audit`, the push looks at it after writing and ends the entry only
if every check passes; otherwise the entry is reverted (the files queued for
retention, as after any failed push) and :class:`AuditFailedError` names
each failing check with its figures. The checks:

- ``min_rows``: the push wrote at least that many rows;
- ``max_change_pct``: the table's visible rows after the push differ from
  those before by at most that percentage (a table without rows before has
  nothing to compare with: passed, and said so);
- ``not_null``: those columns hold no null in the rows written (counted from
  the files' footers, read where a footer does not say);
- ``sql``: a DuckDB query over the views ``staged`` (the rows written) and
  ``current`` (the rows the push replaces) returns one row of one true value;
- ``checks``: Python callables given an :class:`AuditView`, each returning True.

The row figures (``min_rows``, ``max_change_pct``) are judged again inside the
commit that ends the entry, on the version it applies to, so rows another push
made visible meanwhile count; the data checks read files nobody else changes
(the push's own, and the ones its entry replaces, which stay while it runs).
What passed, with its figures, goes in the version's history record.

The pure half (the checks, their figures, the words) is here with the edge
that reads files; :mod:`segment_lineage.ingest.push` calls both.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq

from segment_lineage.ingest.audit_sql import RESULT_SHOWN, check_query, check_text, first_line, run_query
from segment_lineage.ingest.errors import PushError, PushInputError, StorageError
from segment_lineage.lineage.core.errors import RefusedError
from segment_lineage.lineage.core.model import Segment, TableState
from segment_lineage.lineage.core.schema import Schema
from segment_lineage.lineage.core.visibility import visible_segments
from segment_lineage.lineage.storage.arrow_types import arrow_schema
from segment_lineage.lineage.storage.deep import DeepStore

SQL_SHOWN = 160  # characters of a query the history record keeps


class AuditFailedError(PushError, RefusedError):
    """A push's data failed its audit: its entry was reverted, nothing shown."""


@dataclass(frozen=True)
class AuditView:
    """What a Python check looks at: the rows written (``staged``), the rows
    the push replaces (``current``), and the table's visible rows before and
    after the push."""

    table: str
    staged: pads.Dataset
    current: pads.Dataset
    staged_rows: int
    rows_before: int
    rows_after: int


Check = Callable[[AuditView], bool]


def _percentage(pct: object) -> float:
    """A maximum change: a finite percentage >= 0 (-0 is 0)."""
    if isinstance(pct, bool) or not isinstance(pct, int | float) or not 0 <= pct < math.inf:
        raise PushInputError(f"the audit's maximum change must be a percentage >= 0, not {pct!r}")
    return abs(float(pct))


def _check_columns(names: Sequence[str]) -> None:
    for name in names:
        if not isinstance(name, str) or not name:
            raise PushInputError(f"the audit's not-null columns must be named, not {name!r}")
        if not name.isprintable() or len(name.encode("utf-8", "surrogatepass")) > 255:
            raise PushInputError(f"invalid not-null column {name!r}: printable, at most 255 bytes")
    if len(set(names)) != len(names):
        raise PushInputError("the audit names a not-null column twice")


@dataclass(frozen=True)
class Audit:
    """The checks a push's data must pass (the module's docstring says each)."""

    min_rows: int | None = None
    max_change_pct: float | None = None
    not_null: tuple[str, ...] = ()
    sql: str | None = None
    checks: tuple[Check, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        if self.min_rows is not None and (type(self.min_rows) is not int or self.min_rows < 0):
            raise PushInputError(f"the audit's minimum rows must be a whole number >= 0, not {self.min_rows}")
        if self.max_change_pct is not None:
            object.__setattr__(self, "max_change_pct", _percentage(self.max_change_pct))
        _check_columns(self.not_null)
        if self.sql is not None:
            check_text(self.sql)
        for check in self.checks:
            if not callable(check):
                raise PushInputError(f"an audit check must be callable, not {check!r}")

    def __bool__(self) -> bool:
        return bool(
            self.min_rows is not None or self.max_change_pct is not None or self.not_null or self.sql
            or self.checks
        )  # fmt: skip

    def to_text(self) -> str | None:
        """The checks a staged push's publish runs again, as text (its Python
        ``checks`` cannot be kept: a publish is given its own). None: none."""
        kept = {
            "min_rows": self.min_rows,
            "max_change_pct": self.max_change_pct,
            "not_null": list(self.not_null),
            "sql": self.sql,
        }
        kept = {k: v for k, v in kept.items() if v not in (None, [])}
        return json.dumps(kept, ensure_ascii=False, sort_keys=True) if kept else None

    @staticmethod
    def from_text(text: str | None, checks: Sequence[Check] = ()) -> Audit:
        """The audit :meth:`to_text` kept, with ``checks`` besides."""
        kept = {} if text is None else json.loads(text)
        if not isinstance(kept, dict) or set(kept) - {"min_rows", "max_change_pct", "not_null", "sql"}:
            raise PushInputError(f"a staged push's audit is not one this version reads: {text!r:.120}")
        not_null = tuple(kept.get("not_null", ()))
        return Audit(
            kept.get("min_rows"), kept.get("max_change_pct"), not_null, kept.get("sql"), tuple(checks)
        )

    def check_before(self, written: Schema | None, recorded: Schema | None) -> None:
        """Refuse what cannot pass whatever the data (PushInputError, before
        anything is written): a not-null column the push does not write, a
        query that can never answer one true or false value, or DuckDB
        missing (:mod:`segment_lineage.ingest.audit_sql`). ``written``: the
        columns the push writes (None: the caller vouches; checked once
        written); ``recorded``: the table's."""
        columns = None if written is None else arrow_schema(written)
        current = None if recorded is None else arrow_schema(recorded)
        if columns is not None:
            missing = [n for n in self.not_null if n not in columns.names]
            if missing:
                raise PushInputError(
                    f"--audit-not-null names column(s) the push does not write: {', '.join(missing)} "
                    f"(it writes {', '.join(columns.names) or 'none'})"
                )
        if self.sql is not None:
            check_query(self.sql, columns, current)


@dataclass(frozen=True)
class Verdict:
    """One check's outcome: its name, whether it passed, and its figures."""

    check: str
    passed: bool
    figures: str

    def text(self) -> str:
        return f"{self.check} ({self.figures})"


@dataclass(frozen=True)
class Figures:
    """A push's rows beside the table's, on one version."""

    staged: int
    before: int
    replaced: int

    @property
    def after(self) -> int:
        return self.before - self.replaced + self.staged

    @staticmethod
    def of(state: TableState, entry_id: str, staged: int) -> Figures:
        """The figures on ``state``, on which ``entry_id`` runs: the rows
        readers see, and those of its ``from`` among them."""
        visible = visible_segments(state)
        entry = state.entries.get(entry_id)
        hides = frozenset(() if entry is None else entry.segments_from)
        return Figures(
            staged=staged,
            before=sum(s.rows for s in visible),
            replaced=sum(s.rows for s in visible if s.name in hides),
        )


def judge_rows(audit: Audit, figures: Figures) -> list[Verdict]:
    """The row checks on ``figures`` (pure)."""
    out = []
    if audit.min_rows is not None:
        out.append(Verdict(f"min-rows {audit.min_rows}", figures.staged >= audit.min_rows,
                           f"{figures.staged} rows written"))  # fmt: skip
    if audit.max_change_pct is not None:
        limit = f"max-change {audit.max_change_pct:g}%"
        if figures.before == 0:
            out.append(Verdict(limit, True, f"no rows before, {figures.after} after: nothing to compare"))
        else:
            change = 100.0 * (figures.after - figures.before) / figures.before
            within = abs(change) <= audit.max_change_pct
            out.append(
                Verdict(limit, within, f"{_percent(change)}: {figures.before} -> {figures.after} rows")
            )
    return out


def _percent(change: float) -> str:
    """A change in percent, to one decimal, or to two significant digits
    where one decimal would show a change as none."""
    text = f"{change:+.1f}%"
    return f"{change:+.2g}%" if change and text in ("+0.0%", "-0.0%") else text


def record_text(verdicts: Sequence[Verdict]) -> str:
    """What the history record says of a passed audit."""
    return "passed: " + "; ".join(v.text() for v in verdicts)


REVERTED = "the push was reverted and readers never saw its rows; fix the data (or the check) and push again"


def failed(table: str, verdicts: Sequence[Verdict], remedy: str = REVERTED) -> AuditFailedError | None:
    """The error naming every failing check of ``verdicts`` (None: all passed)."""
    bad = [v for v in verdicts if not v.passed]
    if not bad:
        return None
    return AuditFailedError(
        f"push to {table!r} failed its audit: " + "; ".join(v.text() for v in bad), remedy=remedy
    )


# ---- the edge: reading the staged files --------------------------------------


class Judgement:
    """An audit judged on a push's written files, and what its last commit
    calls (with the version it applies to): the row checks judged again
    there (AuditFailedError refuses the commit), then the words the history
    record keeps (also ``recorded``, once the commit judged them)."""

    def __init__(
        self, audit: Audit, table: str, entry_id: str, rows: int, data: Sequence[Verdict], remedy: str
    ) -> None:
        self.audit, self.table, self.entry_id, self.rows, self.data = audit, table, entry_id, rows, list(data)
        self.remedy = remedy
        self.recorded: str | None = None

    def __call__(self, state: TableState) -> str:
        verdicts = judge_rows(self.audit, Figures.of(state, self.entry_id, self.rows)) + self.data
        error = failed(self.table, verdicts, self.remedy)
        if error is not None:
            raise error
        self.recorded = record_text(verdicts)
        return self.recorded


def judge_push(
    state: TableState,
    audit: Audit,
    table: str,
    entry_id: str,
    segments: Sequence[Segment],
    remedy: str = REVERTED,
) -> tuple[Judgement, str]:
    """Run ``audit`` on the files of ``entry_id`` (``segments``) on the
    table's ``state`` (read now): AuditFailedError naming every failing check
    (and ``remedy``), else its last commit's part, and what passed in words
    (on this state)."""
    rows = sum(s.rows for s in segments)
    figures = Figures.of(state, entry_id, rows)
    data = judge_data(audit, table, state, entry_id, segments, figures)
    verdicts = judge_rows(audit, figures) + data
    error = failed(table, verdicts, remedy)
    if error is not None:
        raise error
    return Judgement(audit, table, entry_id, rows, data, remedy), record_text(verdicts)


def judge_data(
    audit: Audit,
    table: str,
    state: TableState,
    entry_id: str,
    segments: Sequence[Segment],
    figures: Figures,
) -> list[Verdict]:
    """The data checks on the files a push wrote (``segments``) beside those
    its entry replaces on ``state`` (whose row ``figures`` a Python check is given)."""
    if not (audit.not_null or audit.sql or audit.checks):
        return []
    deep = DeepStore.for_root(state.config.root)
    fs = deep.filesystem()
    paths = [deep.path(s.location) for s in segments]
    try:
        staged = pads.dataset(paths, format="parquet", filesystem=fs)
        current = _current(state, entry_id, deep, staged.schema)
        out = [_not_null(name, paths, fs, staged.schema) for name in audit.not_null]
    except (OSError, pa.ArrowException) as exc:
        raise StorageError(
            f"the audit of push {entry_id} to table {table!r} cannot read its files: {first_line(exc)}"
        ) from None
    if audit.sql is not None:
        out.append(_query(audit.sql, staged, current))
    if audit.checks:
        view = AuditView(table, staged, current, figures.staged, figures.before, figures.after)
        out += [_call(check, view) for check in audit.checks]
    return out


def _current(state: TableState, entry_id: str, deep: DeepStore, staged: pa.Schema) -> pads.Dataset:
    """The rows ``entry_id`` replaces, in the table's recorded columns
    (files written before a column was added read it as null)."""
    entry = state.entries.get(entry_id)
    hides = [] if entry is None else [state.segments[n] for n in entry.segments_from if n in state.segments]
    schema = staged if state.config.schema is None else arrow_schema(state.config.schema)
    if not hides:
        return pads.dataset(schema.empty_table())
    paths = [deep.path(s.location) for s in hides]
    return pads.dataset(paths, format="parquet", filesystem=deep.filesystem(), schema=schema)


def _not_null(name: str, paths: Sequence[str], fs: Any, schema: pa.Schema) -> Verdict:
    check = f"not-null {name}"
    if name not in schema.names:
        return Verdict(check, False, "no such column in the rows written")
    nulls = sum(_nulls(path, name, fs) for path in paths)
    return Verdict(check, nulls == 0, f"{nulls} null(s)")


def _nulls(path: str, name: str, fs: Any) -> int:
    """Nulls of top-level column ``name`` in one file: from its footer where
    every row group states them, else by reading the column."""
    with fs.open_input_file(path) as source:
        parquet = pq.ParquetFile(source)
        meta = parquet.metadata
        leaf = [i for i in range(meta.num_columns) if meta.schema.column(i).path == name]
        counted = 0
        for g in range(meta.num_row_groups):
            stats = meta.row_group(g).column(leaf[0]).statistics if len(leaf) == 1 else None
            if stats is None or not stats.has_null_count:
                return int(parquet.read(columns=[name]).column(name).null_count)
            counted += stats.null_count
        return counted


def _query(sql: str, staged: pads.Dataset, current: pads.Dataset) -> Verdict:
    passed, figures = run_query(sql, staged, current)
    return Verdict(f"sql {_shown(sql)}", passed, figures)


def _call(check: Check, view: AuditView) -> Verdict:
    name = f"check {getattr(check, '__name__', None) or type(check).__name__}"
    try:
        answer = check(view)
    except Exception as exc:  # noqa: BLE001 -- a caller's check: whatever it raised fails it, named
        return Verdict(name, False, f"raised {type(exc).__name__}: {first_line(exc)}")
    if answer is True:
        return Verdict(name, True, "true")
    return Verdict(name, False, f"returned {repr(answer)[:RESULT_SHOWN]}, not True")


def _shown(sql: str) -> str:
    """The query on one line, cut to what a history record keeps."""
    text = " ".join(sql.split())
    return repr(text if len(text) <= SQL_SHOWN else text[: SQL_SHOWN - 3] + "...")
