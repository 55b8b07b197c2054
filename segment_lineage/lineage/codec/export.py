"""Export a table's lineage as Pinot's ZNRecord JSON, for Pinot operators."""

from __future__ import annotations

from typing import Any

from segment_lineage.lineage.core.model import TableState


def to_pinot_znrecord(state: TableState) -> dict[str, Any]:
    """Pinot's SEGMENT_LINEAGE record: ``listFields[entryId] = [from, to, state, ts]``.

    Segment lists are joined with ``,`` (our names never contain one) and the
    timestamp is epoch milliseconds of the last state change, as in Pinot.
    """
    return {
        "id": state.config.name,
        "simpleFields": {},
        "mapFields": {},
        "listFields": {
            entry.entry_id: [
                ",".join(entry.segments_from),
                ",".join(entry.segments_to),
                entry.state.value,
                str(entry.timestamp_ms),
            ]
            for entry in state.entries.values()
        },
    }
