"""What every stored format shares: compact UTF-8 JSON, an envelope naming
the format and its version, and field readers that fail closed with
:class:`CorruptRecordError`, naming the node.

The underscored helpers are the codec package's own, used by its format modules.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar

from segment_lineage.lineage.core.errors import CorruptRecordError, LineageError

FORMAT_VERSION = 1

T = TypeVar("T")


def dumps(obj: object) -> bytes:
    """Compact JSON in UTF-8: text costs its UTF-8 size (an escaped astral
    character would cost 12 bytes). Records written as ASCII escapes decode the same."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False, sort_keys=False).encode("utf-8")


class _Bad(Exception):
    """Internal: a field failed to decode. Turned into CorruptRecordError."""


@contextmanager
def _decoding(where: str) -> Iterator[None]:
    try:
        yield
    except _Bad as exc:
        raise CorruptRecordError(where, str(exc)) from None
    except CorruptRecordError:
        raise
    except LineageError as exc:  # a validator inside a record constructor
        raise CorruptRecordError(where, exc.message) from None
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise CorruptRecordError(where, f"{type(exc).__name__}: {exc}") from None
    except RecursionError:
        raise CorruptRecordError(where, "nested too deeply") from None


def _get(d: Mapping[str, Any], key: str, kind: type[T] | tuple[type, ...]) -> T:
    if key not in d:
        raise _Bad(f"missing field {key!r}")
    value = d[key]
    if isinstance(value, bool) and kind is int:
        raise _Bad(f"field {key!r} must be {getattr(kind, '__name__', kind)}")
    if not isinstance(value, kind):
        raise _Bad(f"field {key!r} must be {getattr(kind, '__name__', kind)}, found {type(value).__name__}")
    return value  # type: ignore[return-value]


def _opt(d: Mapping[str, Any], key: str, kind: type[T]) -> T | None:
    value = d.get(key)
    if value is None:
        return None
    return _get(d, key, kind)


def _str_list(d: Mapping[str, Any], key: str) -> list[str]:
    values = _get(d, key, list)
    if not all(isinstance(v, str) for v in values):
        raise _Bad(f"field {key!r} must be a list of strings")
    return values


def _enum(enum: Callable[[str], T], value: object, what: str) -> T:
    try:
        return enum(value)  # type: ignore[arg-type]
    except ValueError:
        raise _Bad(f"unknown {what} {value!r}") from None


# Said with a record this build cannot read in a way a newer build writes.
NEWER = "if a newer segment-lineage wrote it, upgrade this client (every client before the writers)"


def parse(raw: bytes, fmt: str, where: str, versions: tuple[int, ...] = (FORMAT_VERSION,)) -> dict[str, Any]:
    """Parse raw bytes and check the format name and version (one of ``versions``)."""
    try:
        doc = json.loads(raw.decode("utf-8"))
    except ValueError as exc:  # not UTF-8, not JSON, or a number past Python's digit limit
        raise CorruptRecordError(where, f"not valid JSON ({exc})") from None
    except RecursionError:
        # Any record of ours is a few levels deep; a deeper one is not ours,
        # and must fail closed like any other bad record, not crash the caller.
        raise CorruptRecordError(where, "not valid JSON (nested too deeply to parse)") from None
    if not isinstance(doc, dict):
        raise CorruptRecordError(where, "not a JSON object")
    if doc.get("format") != fmt:
        raise CorruptRecordError(where, f"expected format {fmt!r}, found {doc.get('format')!r}")
    version = doc.get("v")
    if type(version) is not int or version not in versions:
        known = " and ".join(map(str, versions))
        plural = "s" if len(versions) > 1 else ""
        newer = type(version) is int and version > max(versions)
        raise CorruptRecordError(
            where,
            f"unknown format version {version!r} (this build reads version{plural} {known})",
            remedy=NEWER if newer else None,
        )
    return doc


def _envelope(fmt: str, **body: object) -> dict[str, object]:
    return {"format": fmt, "v": FORMAT_VERSION, **body}


def _envelope_at(fmt: str, version: int, body: Mapping[str, object]) -> dict[str, object]:
    """:func:`_envelope` of a format at a later version."""
    return {"format": fmt, "v": version, **body}
