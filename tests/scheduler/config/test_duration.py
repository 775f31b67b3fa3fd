"""Go durations as YuniKorn writes them in queue properties: ``time.ParseDuration`` and
``Duration.String`` (Go's ``src/time/format.go`` and ``time.go``)."""

from __future__ import annotations

import pytest

from scheduler.config._duration import format_duration, parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30s", 30.0),
        ("1m30s", 90.0),
        ("500ms", 0.5),
        ("1h", 3600.0),
        ("1.5h", 5400.0),
        (".5s", 0.5),
        ("5.s", 5.0),
        ("+5s", 5.0),
        ("-1.5h", -5400.0),
        ("0", 0.0),
        ("-0", 0.0),
        ("300us", 0.0003),
        ("300µs", 0.0003),  # U+00B5
        ("300μs", 0.0003),  # U+03BC
        ("1h2m3s4ms5us6ns", 3723.004005006),
        ("9223372036854775807ns", 9223372036.854775807),
    ],
)
def test_go_durations_parse(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds, abs=1e-9)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "invalid duration ''"),
        ("-", "invalid duration '-'"),
        (".s", "invalid duration '.s'"),
        (" 30s", "invalid duration ' 30s'"),  # Go trims nothing
        ("30", "missing unit in duration '30'"),
        ("0s0", "missing unit in duration '0s0'"),
        ("30s ", "unknown unit 's ' in duration '30s '"),
        ("10 minutes", "unknown unit ' minutes' in duration '10 minutes'"),
        ("1e3s", "unknown unit 'e' in duration '1e3s'"),
        ("1d", "unknown unit 'd' in duration '1d'"),
        ("9223372036854775808ns", "invalid duration"),  # past int64 nanoseconds
        ("2562048h", "invalid duration"),
        ("1" * 5000 + "s", "invalid duration"),
    ],
)
def test_what_go_refuses_is_refused_saying_why(text: str, why: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_duration(text)
    assert str(info.value).startswith(why)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (30.0, "30s"),
        (90.0, "1m30s"),
        (3600.0, "1h0m0s"),
        (5400.0, "1h30m0s"),
        (120.5, "2m0.5s"),
        (1.5, "1.5s"),
        (0.5, "500ms"),
        (0.0015, "1.5ms"),
        (0.0001, "100µs"),
        (1e-9, "1ns"),
        (0.0, "0s"),
        (-30.0, "-30s"),
    ],
)
def test_durations_are_written_as_go_writes_them(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text
    assert parse_duration(text) == pytest.approx(seconds, abs=1e-9)
