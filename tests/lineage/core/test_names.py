"""Bad names, periods and locations are refused before any outside call."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from segment_lineage.lineage.core import names
from segment_lineage.lineage.core.errors import InvalidInputError, InvalidNameError, InvalidPeriodError
from segment_lineage.lineage.core.names import (
    check_entry_id,
    check_location,
    check_segment_name,
    check_segment_names,
    check_table_name,
    check_text,
)
from segment_lineage.lineage.core.periods import format_period, parse_period

BAD_NAMES = [
    "",
    "/",
    "a/b",
    ".",
    "..",
    "a..b",
    "nul\x00byte",
    "ctrl\x07char",
    "tab\tname",
    "surrogate\ud800",
    "caf\u00e9",  # precomposed é
    "cafe\u0301",  # e + combining accent
    " leading",
    "trailing ",
    "x" * 300,
    "a%2Fb",
    "back\\slash",
    "/abs/path",
    "comma,name",
    "-leading-dash",
    "ends.",
    "zero\u200bwidth",
    "\uff41fullwidth",
]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_bad_table_and_segment_names_are_refused(name: str) -> None:
    with pytest.raises(InvalidNameError) as exc:
        check_table_name(name)
    assert "invalid table name" in str(exc.value)
    with pytest.raises(InvalidNameError):
        check_segment_names([name])


@pytest.mark.parametrize("name", ["events", "events_2026-11-22", "T1", "a.b", "0day"])
def test_good_names_pass(name: str) -> None:
    assert check_table_name(name) == name


def test_non_string_names_are_refused() -> None:
    with pytest.raises(InvalidNameError, match="must be a string"):
        check_table_name(42)


def test_duplicates_and_case_twins_in_one_list_are_refused() -> None:
    with pytest.raises(InvalidInputError, match="listed twice"):
        check_segment_names(["a", "a"])
    with pytest.raises(InvalidInputError, match="differs only in case"):
        check_segment_names(["seg", "SEG"])


@pytest.mark.parametrize(
    "location",
    [
        "",
        "/etc/passwd",
        "../x",
        "a/../../b",
        "a//b",
        "./a",
        "s3://bucket/key",
        "a\\b",
        "a/%2e%2e/b",
        ".hidden",
    ],
)
def test_bad_locations_are_refused(location: str) -> None:
    with pytest.raises(InvalidInputError):
        check_location(location)


def test_good_locations_pass() -> None:
    assert check_location("date=2026-11-22/part-0001.parquet") == "date=2026-11-22/part-0001.parquet"


def test_entry_ids_must_be_canonical_uuids() -> None:
    good = "0b9c6f8e-3a43-4b89-9d0e-2f6a4c1e7d55"
    assert check_entry_id(good) == good
    for bad in ["x", good.upper(), good.replace("-", ""), "../" + good]:
        with pytest.raises(InvalidNameError):
            check_entry_id(bad)


def test_text_fields_refuse_control_characters() -> None:
    assert check_text("reason", "fine reason") == "fine reason"
    with pytest.raises(InvalidInputError, match="control"):
        check_text("reason", "bad\nnewline")


def test_text_fields_refuse_exactly_control_characters_but_tab_del_and_unpaired_surrogates() -> None:
    """The code points around each refused range, alone and inside long
    text: refused exactly when a control character other than tab, DEL, or
    a surrogate."""
    points = [*range(0x200), *range(0xD700, 0xE100), *range(0x10000, 0x10040), 0x10FFFF]
    for point in points:
        char = chr(point)
        bad = (point < 32 and char != "\t") or point == 127 or 0xD800 <= point <= 0xDFFF
        for text in (char, "é" * 300 + char + "x" * 300):
            if bad:
                with pytest.raises(InvalidInputError, match="control characters or unpaired"):
                    check_text("reason", text, limit=10_000)
            else:
                assert check_text("reason", text, limit=10_000) == text


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("0s", 0),
        ("90s", 90_000),
        ("30m", 1_800_000),
        ("12h", 43_200_000),
        ("7d", 604_800_000),
        ("1d12h", 129_600_000),
    ],
)
def test_periods_parse(text: str, ms: int) -> None:
    assert parse_period(text) == ms
    assert parse_period(format_period(ms)) == ms


@pytest.mark.parametrize("text", ["", "5", "1w", "-1d", "1.5h", "d", "1 d", " 1d", "1h1d", "99999d", "1D2"])
def test_bad_periods_are_refused(text: str) -> None:
    with pytest.raises(InvalidPeriodError, match="invalid period"):
        parse_period(text)


def verdict(check: Callable[[str], str], value: str) -> bool:
    try:
        check(value)
    except InvalidInputError:
        return False
    return True


NEVER = re.compile(r"(?!)")
TRICKY = "aZ09_.-=/ %\\:\u00e9\n"


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=TRICKY, max_size=12) | st.text(max_size=6))
def test_the_fast_paths_accept_exactly_what_the_full_checks_accept(value: str) -> None:
    fast = (verdict(check_segment_name, value), verdict(check_location, value))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(names, "_GOOD_NAME", NEVER)
        patch.setattr(names, "_GOOD_LOCATION", NEVER)
        slow = (verdict(check_segment_name, value), verdict(check_location, value))
    assert fast == slow


def test_the_fast_paths_keep_the_length_limits() -> None:
    assert not verdict(check_segment_name, "a" * 201)
    assert not verdict(check_location, "a" * 256)
    assert verdict(check_location, "a" * 255)
    assert not verdict(check_location, "/".join(["a" * 200] * 6))


@settings(max_examples=400, deadline=None)
@given(st.lists(st.text(alphabet=TRICKY, max_size=8) | st.text(max_size=4) | st.integers(), max_size=5))
def test_the_checks_of_many_at_once_accept_exactly_a_list_each_accepted(values: list[object]) -> None:
    each = (
        all(verdict(check_segment_name, v) for v in values),  # type: ignore[arg-type]
        all(verdict(check_location, v) for v in values),  # type: ignore[arg-type]
    )
    assert (names.good_segment_names(values), names.good_locations(values)) == each


def test_the_checks_of_many_at_once_keep_the_length_limits_and_line_breaks() -> None:
    assert names.good_segment_names(["a" * 200, "b"]) and not names.good_segment_names(["a" * 201, "b"])
    assert not names.good_locations(["a", "/".join(["a" * 200] * 6)])
    assert not names.good_segment_names(["a\nb"]) and not names.good_locations(["a\nb", "c"])
    assert not names.good_segment_names(["a", "b.", "c"]) and not names.good_segment_names(["a..b"])
    assert names.good_segment_names([]) and names.good_locations([])


def test_a_set_id_is_named_whole_or_by_the_first_digits_of_one_set() -> None:
    from segment_lineage.lineage.core.names import MIN_SET_PREFIX, resolve_set_id

    known = ["0a1b2c3d-0000-4000-8000-000000000001", "0a1b9999-0000-4000-8000-000000000002", "plain-text-id"]
    assert resolve_set_id(known[0], known) == known[0]
    assert resolve_set_id("plain-text-id", known) == "plain-text-id"  # any id given whole
    assert resolve_set_id("0A1B2C3D", known) == known[0]  # as pasted, in capitals too
    assert resolve_set_id("0a1b2c3d-0000", known) == known[0]
    with pytest.raises(InvalidInputError, match="too short: give at least 4"):  # names one, but too short
        resolve_set_id("0a1b"[: MIN_SET_PREFIX - 1], known)
    assert resolve_set_id("fff", known) is None  # short, and starting none: not found
    assert resolve_set_id("ffff", known) is None
    assert resolve_set_id("plain", known) is None  # only hexadecimal digits are a prefix
    with pytest.raises(InvalidInputError, match=r"matches 2 sets .*give more digits"):
        resolve_set_id("0a1b", known)
    assert resolve_set_id("0a1b2", []) is None
