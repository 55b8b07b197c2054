"""A candidacy that owns every table it stands for (for daemon tests where
the elections are not under test)."""

from __future__ import annotations

from collections.abc import Collection, Sequence


class OwnsAll:
    connected = True

    def __init__(self) -> None:
        self._tables: list[str] = []

    def check(self, tables: Sequence[str], *, keep: Collection[str] = ()) -> dict[str, str]:
        self._tables = list(tables)
        return {t: "term-1" for t in tables}

    def holds(self, table: str, term: str) -> bool:
        return True

    def owners(self) -> dict[str, str | None]:
        return dict.fromkeys(self._tables, "test:1")

    def resign(self) -> None:
        return None
