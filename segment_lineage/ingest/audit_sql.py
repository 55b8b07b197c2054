"""An audit's query: one DuckDB SELECT over the views ``staged`` and
``current``, which must answer one true value.

DuckDB runs it with no access outside those views: no files read or written,
no database attached, no extension installed (a check looks, it never acts,
and ``--dry-run`` writes nothing). Before anything is written the query is
bound (not run) on empty views of the push's columns, so a query that can
never answer one true or false value (two statements, a COPY, a syntax error,
an unknown column, a count instead of a comparison) is refused up front.
SIGINT or SIGTERM while it runs stops it at once and ends as the signal
would have without it (the push's interrupt, or the default action). A query
still running after SQL_TIMEOUT_S is stopped and fails the audit: a push
holds its table's owner claim while it audits, so a runaway query (a cross
join, say) must not hold it for ever.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any

import pyarrow as pa

from segment_lineage.ingest.errors import PushInputError
from segment_lineage.ingest.interrupts import signals_handled

SQL_LIMIT = 65_536  # characters of an audit query
SQL_TIMEOUT_S = 600.0  # seconds an audit query may run before it is stopped (and fails)
RESULT_SHOWN = 80  # characters of a failing answer the message shows
WITHOUT_ACCESS = {  # the views are all a check sees
    "enable_external_access": False,
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
}


def duckdb_module() -> Any:
    try:
        import duckdb
    except ImportError:
        raise PushInputError("--audit-sql runs DuckDB, which is not installed: pip install duckdb") from None
    return duckdb


def check_text(sql: str) -> None:
    if not isinstance(sql, str) or not sql.strip():
        raise PushInputError("the audit query is empty")
    if len(sql) > SQL_LIMIT:
        raise PushInputError(f"the audit query is {len(sql)} characters; at most {SQL_LIMIT} are allowed")
    if any((ord(c) < 32 and c not in "\t\n\r") or 0xD800 <= ord(c) <= 0xDFFF for c in sql):
        raise PushInputError("the audit query contains control characters or unpaired surrogates")


def check_query(sql: str, columns: pa.Schema | None, current: pa.Schema | None) -> None:
    """PushInputError unless ``sql`` is one SELECT that binds on empty views
    of ``columns`` (``staged``) and ``current`` and answers one boolean
    column. Nothing is run. ``columns`` None: only the statement is checked."""
    duckdb = duckdb_module()
    con = duckdb.connect(config=WITHOUT_ACCESS)
    try:
        _check_statement(duckdb, con, sql)
        if columns is not None:
            _check_answer(con, sql, columns, current)
    except (
        duckdb.ParserException,
        duckdb.BinderException,
        duckdb.CatalogException,
        duckdb.PermissionException,  # a file, a database, an extension: outside the views
    ) as exc:
        raise PushInputError(f"the audit query cannot run: {first_line(exc)}") from None
    except duckdb.Error:
        pass  # what only data could raise: judged on the data
    finally:
        con.close()


def _check_statement(duckdb: Any, con: Any, sql: str) -> None:
    """PushInputError unless ``sql`` is one SELECT."""
    statements = con.extract_statements(sql)
    if len(statements) != 1:
        raise PushInputError(
            f"the audit query holds {len(statements)} statements: give one SELECT answering true or false"
        )
    kind = statements[0].type
    if kind != duckdb.StatementType.SELECT:
        raise PushInputError(f"the audit query is a {kind.name}, not a SELECT: a check only looks")


def _check_answer(con: Any, sql: str, columns: pa.Schema, current: pa.Schema | None) -> None:
    """PushInputError unless ``sql``, bound (not run) on empty views, answers
    one boolean column."""
    con.register("staged", columns.empty_table())
    con.register("current", (current or columns).empty_table())
    types = [str(t) for t in con.sql(sql).types]  # bound, not run
    if types != ["BOOLEAN"]:
        example = "e.g. SELECT count(*) > 0 FROM staged"
        raise PushInputError(
            f"the audit query answers {len(types)} column(s) of {', '.join(types) or 'nothing'}: it must "
            f"answer one true or false value ({example})"
        )


def run_query(sql: str, staged: Any, current: Any) -> tuple[bool, str]:
    """Run ``sql`` over the views: whether it answered one true value, and
    the figures (the answer, or why not)."""
    duckdb = duckdb_module()
    con = duckdb.connect(config=WITHOUT_ACCESS)
    stopped: list[int] = []
    late = threading.Event()  # set when the query ran past SQL_TIMEOUT_S and was stopped

    def too_long() -> None:
        late.set()
        con.interrupt()

    timer = threading.Timer(SQL_TIMEOUT_S, too_long)
    timer.daemon = True
    try:
        con.register("staged", staged)
        con.register("current", current)
        with _stoppable(con, stopped):
            timer.start()
            cursor = con.execute(sql)
            rows = cursor.fetchmany(2)
            width = len(cursor.description or ())
    except (duckdb.Error, RuntimeError) as exc:  # DuckDB says "Query interrupted" as a RuntimeError
        if stopped:
            signal.raise_signal(stopped[0])  # as the signal would have ended it
        if late.is_set():
            return False, f"the query ran past its limit of {SQL_TIMEOUT_S:g} s and was stopped"
        return False, f"the query failed: {first_line(exc)}"
    finally:
        timer.cancel()
        con.close()
    if stopped:
        signal.raise_signal(stopped[0])
    return _verdict(rows, width)


def _verdict(rows: list[Any], width: int) -> tuple[bool, str]:
    """Whether a query's first rows (at most two) of ``width`` columns are one
    true value, and the figures: the answer, or what it was instead."""
    if len(rows) == 1 and width == 1 and rows[0][0] is True:
        return True, "true"
    answer = "no rows" if not rows else repr(rows[0] if width > 1 else rows[0][0])
    if len(rows) > 1:
        answer = "more than one row"
    elif width > 1:
        answer = f"{width} columns"
    return False, f"returned {answer[:RESULT_SHOWN]}, not one true value"


@contextlib.contextmanager
def _stoppable(con: Any, stopped: list[int]) -> Iterator[None]:
    """SIGINT and SIGTERM interrupt the query at once (DuckDB would look for
    Python's signal only between chunks, and turn it into its own error):
    the signal is noted in ``stopped`` for the caller to raise again."""

    def stop(signum: int, frame: FrameType | None) -> None:
        stopped.append(signum)
        con.interrupt()

    with signals_handled(stop):
        yield


def first_line(exc: BaseException) -> str:
    """An error's first line, at most 300 characters, control characters
    shown as escapes (data can carry them into DuckDB's messages)."""
    text = str(exc).strip()
    line = (text.splitlines()[0] if text else type(exc).__name__)[:300]
    return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in line)
