"""Allow-lists for every name that reaches ZooKeeper or a file system.

Names are checked before any call leaves the process, so a bad name can never
become a ZooKeeper path, a file path or a broken record. The allow-list is
ASCII only: that rules out look-alike Unicode forms, unpaired surrogates,
control characters and normalisation twins in one stroke. Case-only twins are
refused where names must be unique (tables, segments of one table).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Sequence
from urllib.parse import urlsplit

from segment_lineage.lineage.core.errors import InvalidInputError, InvalidNameError

MAX_TABLE_NAME = 128
MAX_SEGMENT_NAME = 200
MAX_LOCATION = 1024

# A leading letter or digit, then letters, digits, '_', '-', '.'. No '/', no
# ',' (Pinot joins segment lists with commas), no '%', no '\\', no spaces.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")
_PART = re.compile(r"[A-Za-z0-9_.\-=]+")
# Fast paths for decoding many records: a match is a name or location the
# checks below accept (a test holds them to it); anything else takes the
# checks, which say what is wrong.
_GOOD_NAME = re.compile(r"(?!.*\.\.)[A-Za-z0-9][A-Za-z0-9_.\-]*(?<!\.)")
_GOOD_PART = r"[A-Za-z0-9_=](?:[A-Za-z0-9_.\-=]{0,253}[A-Za-z0-9_\-=])?"
_NOT_MIRROR_LOG = r"(?!_delta_log(?:/|\n|$))"  # MIRROR_LOG_DIR, below, is no location's first part
_GOOD_LOCATION = re.compile(rf"{_NOT_MIRROR_LOG}{_GOOD_PART}(?:/{_GOOD_PART})*")
# Control characters but tab, DEL, and unpaired surrogates (not encodable in UTF-8).
_NOT_TEXT = re.compile("[\x00-\x08\x0a-\x1f\x7f\ud800-\udfff]")
# The same, for many at once: one per line.
_GOOD_NAME_LINES = re.compile(r"(?:(?!.*\.\.)[A-Za-z0-9][A-Za-z0-9_.\-]*(?<!\.)\n)*")
_GOOD_LOCATION_LINES = re.compile(rf"(?:{_NOT_MIRROR_LOG}{_GOOD_PART}(?:/{_GOOD_PART})*\n)*")


def _check(kind: str, name: object, limit: int) -> str:
    if isinstance(name, str) and len(name) <= limit and _GOOD_NAME.fullmatch(name):
        return name
    if not isinstance(name, str):
        raise InvalidNameError(kind, name, "must be a string")
    if len(name) > limit:
        raise InvalidNameError(kind, name[:40] + "...", f"longer than {limit} characters")
    problem = _name_problem(name)
    if problem is not None:
        raise InvalidNameError(kind, name, problem)
    return name


def _name_problem(name: str) -> str | None:
    """What is wrong with a name of allowed length, the first problem found; None: nothing."""
    if not name:
        return "must not be empty"
    if name != name.strip():
        return "has leading or trailing white space"
    if not name.isascii():
        return "only ASCII letters, digits, '_', '-' and '.' are allowed"
    if _NAME.fullmatch(name) is None:
        return _bad_characters(name)
    if ".." in name:
        return "must not contain '..'"
    if name.endswith("."):
        return "must not end with '.'"
    return None


def _bad_characters(name: str) -> str:
    """Why an ASCII name fails the allow-list: the characters it may not hold, or its first one."""
    bad = sorted({c for c in name if not (c.isalnum() or c in "_.-")})
    if not bad:
        return "must start with a letter or a digit"
    shown = ", ".join(repr(c) for c in bad)
    return f"character(s) {shown} not allowed"


def check_table_name(name: object) -> str:
    """Return ``name`` if it is a valid table name, else raise InvalidNameError."""
    return _check("table", name, MAX_TABLE_NAME)


def check_role(name: object) -> str:
    """Return ``name`` if it is a valid election role (``retention``, or a
    table's own: ``retention.<table>``), else raise InvalidNameError."""
    return _check("election role", name, MAX_TABLE_NAME + 32)


def check_segment_name(name: object) -> str:
    """Return ``name`` if it is a valid segment name, else raise InvalidNameError."""
    return _check("segment", name, MAX_SEGMENT_NAME)


def _all_lines(pattern: re.Pattern[str], texts: Sequence[object], limit: int) -> bool:
    if not texts:
        return True
    try:
        joined = "\n".join(texts)  # type: ignore[arg-type]  # TypeError: not all strings
    except TypeError:
        return False
    # As many lines as texts: no text holds a line break of its own.
    return (
        joined.count("\n") == len(texts) - 1
        and max(map(len, texts)) <= limit  # type: ignore[arg-type]
        and pattern.fullmatch(joined + "\n") is not None
    )


def good_segment_names(names: Sequence[object]) -> bool:
    """Whether :func:`check_segment_name` accepts every one of ``names``, in
    one regular expression over all of them (for decoding many records).
    False says only: check them one by one, to learn which and why."""
    return _all_lines(_GOOD_NAME_LINES, names, MAX_SEGMENT_NAME)


def good_locations(locations: Sequence[object]) -> bool:
    """:func:`good_segment_names` for :func:`check_location`."""
    return _all_lines(_GOOD_LOCATION_LINES, locations, MAX_LOCATION)


def check_segment_names(names: Iterable[object], what: str = "segments") -> tuple[str, ...]:
    """Validate a list of segment names: each valid, no duplicates, no case twins."""
    out: list[str] = []
    seen: dict[str, str] = {}
    for raw in names:
        name = check_segment_name(raw)
        key = name.casefold()
        if key in seen:
            other = seen[key]
            problem = "is listed twice" if other == name else f"differs only in case from {other!r}"
            raise InvalidInputError(f"segment {name!r} in {what} {problem}")
        seen[key] = name
        out.append(name)
    return tuple(out)


def check_entry_id(entry_id: object) -> str:
    """Entry ids are canonical lower-case UUIDs."""
    if not isinstance(entry_id, str):
        raise InvalidNameError("entry id", entry_id, "must be a string")
    try:
        parsed = uuid.UUID(entry_id)
    except ValueError:
        raise InvalidNameError("entry id", entry_id, "is not a UUID") from None
    if str(parsed) != entry_id:
        raise InvalidNameError("entry id", entry_id, "must be a lower-case UUID with dashes")
    return entry_id


MIRROR_LOG_DIR = "_delta_log"  # the Delta mirror's log under a table's root: never a segment's


def check_location(location: object) -> str:
    """A segment location: a relative path inside the table's root.

    Locations are stored relative to the root so that no record can point
    outside it: no scheme, no leading '/', no '..' or '.' part, no empty part,
    no backslash, no '%' escapes; and not inside the mirror's log directory.
    """
    if isinstance(location, str) and len(location) <= MAX_LOCATION and _GOOD_LOCATION.fullmatch(location):
        return location
    if not isinstance(location, str) or not location:
        raise InvalidInputError(f"invalid segment location {location!r}: must be a non-empty string")
    if len(location) > MAX_LOCATION:
        raise InvalidInputError(f"invalid segment location: longer than {MAX_LOCATION} characters")
    _check_inside_root(location)
    for part in location.split("/"):
        _check_location_part(location, part)
    return location


def _check_inside_root(location: str) -> None:
    """A location is relative to the table's root, and outside the mirror's log directory."""
    if "://" in location or location.startswith("/"):
        raise InvalidInputError(f"invalid segment location {location!r}: must be relative to the table root")
    if location.split("/", 1)[0] == MIRROR_LOG_DIR:
        raise InvalidInputError(
            f"invalid segment location {location!r}: {MIRROR_LOG_DIR}/ holds the table's Delta mirror"
        )


def _check_location_part(location: str, part: str) -> None:
    """One '/'-separated part of a location: allowed characters, a name, not a step up or aside."""
    if part in ("", ".", ".."):
        raise InvalidInputError(f"invalid segment location {location!r}: empty, '.' or '..' path part")
    if _PART.fullmatch(part) is None or part[0] in ".-" or part.endswith(".") or len(part) > 255:
        raise InvalidInputError(
            f"invalid segment location {location!r}: part {part[:40]!r} has characters "
            "outside ASCII letters, digits, '_', '-', '.', '=', starts with '.' or '-', ends with "
            "'.', or is longer than 255 characters"
        )


def check_text(what: str, value: str | None, limit: int = 1000) -> str | None:
    """Free text (reasons, job ids, actors): printable, no control characters,
    at most ``limit`` bytes in UTF-8, the form it is stored in (so what is
    accepted here always fits the records that carry it)."""
    if value is None:
        return None
    if _NOT_TEXT.search(value) is not None:
        raise InvalidInputError(f"{what} contains control characters or unpaired surrogates")
    size = len(value.encode("utf-8"))
    if size > limit:
        raise InvalidInputError(f"{what} is {size} bytes in UTF-8; at most {limit} are allowed")
    return value


MAX_SET_ID_BYTES = 64
MIN_SET_PREFIX = 4  # hexadecimal digits a set id's prefix needs, as an entry id's


def check_set_id(set_id: str) -> str:
    """A push set's id a user named (to roll back or publish): not blank,
    printable, at most MAX_SET_ID_BYTES (the most a record carries), or
    InvalidInputError, which never echoes it."""
    where = "'lineage history TABLE' shows each version's set"
    if not set_id.strip():
        raise InvalidInputError("the set id is empty", remedy=where)
    try:
        check_text("set id", set_id, MAX_SET_ID_BYTES)
    except InvalidInputError as exc:
        exc.remedy = exc.remedy or f"a set's id is the one push-set printed; {where}"
        raise
    return set_id


def resolve_set_id(text: str, known: Iterable[str]) -> str | None:
    """The set id ``text`` names among ``known``: itself, or the one id it
    starts (at least MIN_SET_PREFIX hexadecimal digits, as entry ids take
    prefixes); None when it names none. InvalidInputError when it starts
    several (it names them: give more digits)."""
    ids = set(known)
    if text in ids:
        return text
    raw = text.lower()
    if any(c not in "0123456789abcdef-" for c in raw):
        return None
    found = sorted(i for i in ids if i.startswith(raw))
    if found and len(raw) < MIN_SET_PREFIX:
        raise InvalidInputError(
            f"set prefix {raw!r} is too short: give at least {MIN_SET_PREFIX} of the set id's first "
            "hexadecimal digits, or the whole id"
        )
    if len(found) > 1:
        raise InvalidInputError(
            f"set prefix {raw!r} matches {len(found)} sets ({', '.join(found[:5])}): give more digits"
        )
    return found[0] if found else None


def check_root_has_no_secret(root: str) -> None:
    """A deep-store root is stored in ZooKeeper and printed: it must carry no
    credential (``s3://key:secret@bucket``, ``?secret_key=...``). The message
    does not repeat the root, as it holds the secret."""
    parsed = urlsplit(root)
    if not parsed.scheme or len(parsed.scheme) == 1:
        return
    if "@" in parsed.netloc or parsed.query or parsed.fragment:
        raise InvalidInputError(
            f"invalid deep-store root {parsed.scheme}://...: user info, query or fragment found; "
            "give credentials through the environment (AWS_*, GOOGLE_APPLICATION_CREDENTIALS), not the URI"
        )


def push_tag(entry_id: str) -> str:
    """The short form of a push's entry id that its directory and segment names carry."""
    return entry_id[:8]


def push_dir(stamp: str, entry_id: str) -> str:
    """The directory, under a table's root, of every file one push writes."""
    return f"push_{stamp}_{push_tag(entry_id)}"


def push_dir_owner(top: str) -> str | None:
    """The :func:`push_tag` a :func:`push_dir` name carries; None for other names."""
    if not top.startswith("push_"):
        return None
    return top.rpartition("_")[2]
