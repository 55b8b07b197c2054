"""Store-wide records: the registry of table roots, the claim marker under a
root, and two bare UTF-8 text records (a table-name guard and the store id).
"""

from __future__ import annotations

from collections.abc import Mapping

from segment_lineage.lineage.codec.envelope import (
    _Bad,
    _decoding,
    _envelope,
    _get,
    dumps,
    parse,
)
from segment_lineage.lineage.core.names import (
    check_table_name,
)

ROOTS = "segment-lineage.roots"
CLAIM = "segment-lineage.root-claim"


def encode_roots(roots: Mapping[str, str]) -> bytes:
    """The registry of table roots: table name -> canonical root."""
    return dumps(_envelope(ROOTS, roots=dict(sorted(roots.items()))))


def encode_claim(store_id: str, table: str) -> bytes:
    """The marker under a table's root: which store and table the root is claimed by."""
    return dumps(_envelope(CLAIM, store=store_id, table=table))


def decode_claim(raw: bytes, where: str) -> tuple[str, str]:
    """(store id, table) of a root's marker."""
    doc = parse(raw, CLAIM, where)
    with _decoding(where):
        return _get(doc, "store", str), _get(doc, "table", str)


def decode_roots(raw: bytes, where: str) -> dict[str, str]:
    doc = parse(raw, ROOTS, where)
    with _decoding(where):
        roots = _get(doc, "roots", dict)
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in roots.items()):
            raise _Bad("roots must map table names to roots")
        return dict(roots)


# ---- bare text records --------------------------------------------------------


def encode_guard(table: str) -> bytes:
    """A table-name guard (``names/<casefolded name>``): the table's name as spelled."""
    return table.encode("utf-8")


def decode_guard(raw: bytes, where: str, casefolded: str) -> str:
    """The table a name guard stands for. The guard's node is named after the
    casefolded table name, so a record naming another table is corrupt too."""
    with _decoding(where):
        try:
            table = check_table_name(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise _Bad(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
        if table.casefold() != casefolded:
            raise _Bad(f"names table {table!r}, which is not a spelling of {casefolded!r}")
        return table


def decode_store_id(raw: bytes, where: str) -> str:
    """The store id (a uuid's hex digits when this project made it)."""
    with _decoding(where):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _Bad(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
        if not text or len(text) > 200 or not text.isprintable():
            raise _Bad(f"not a store id: {text[:80]!r}")
        return text
