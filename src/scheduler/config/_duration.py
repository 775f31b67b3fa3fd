"""Go durations: how YuniKorn writes a delay in a queue property (``preemption.delay``) and
Koordinator a gang's waiting time. :func:`parse_duration` reads one as Go's
``time.ParseDuration`` does; :func:`format_duration` writes one as Go's ``Duration.String``
(what YuniKorn's REST shows)."""

from __future__ import annotations

import re
from typing import Final

__all__ = ["format_duration", "parse_duration"]

_NS: Final = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,  # U+00B5 MICRO SIGN
    "μs": 1_000,  # U+03BC GREEK SMALL LETTER MU
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}
# One number and its unit; Go takes everything up to the next digit or dot as the unit.
_PART: Final = re.compile(r"(?P<whole>[0-9]*)(?:\.(?P<fraction>[0-9]*))?(?P<unit>[^0-9.]*)")
_MAX_NS: Final = 1 << 63  # Go's int64 nanoseconds; -2^63 is the lowest


def parse_duration(text: str) -> float:
    """A Go duration in seconds: an optional sign, then numbers each with its unit (``ns``,
    ``us`` or ``µs``, ``ms``, ``s``, ``m``, ``h``), as in ``30s``, ``1m30s``, ``1.5h``,
    ``500ms``; ``0`` alone needs no unit. Nothing else, not even a space.

    Raises:
        ValueError: Not a Go duration; the message says why, as Go's does.
    """
    rest = text
    negative = rest[:1] == "-"
    if rest[:1] in ("-", "+"):
        rest = rest[1:]
    if rest == "0":
        return 0.0
    if not rest:
        raise ValueError(f"invalid duration {text!r}")
    total = 0
    pos = 0
    while pos < len(rest):
        part = _PART.match(rest, pos)
        assert part is not None  # every group may be empty
        whole, fraction, unit = part["whole"], part["fraction"] or "", part["unit"]
        if not whole and not fraction:
            raise ValueError(f"invalid duration {text!r}")
        if not unit:
            raise ValueError(f"missing unit in duration {text!r}")
        scale = _NS.get(unit)
        if scale is None:
            raise ValueError(f"unknown unit {unit!r} in duration {text!r}")
        if len(whole.lstrip("0")) > 19:  # more than int64 nanoseconds can hold
            raise ValueError(f"invalid duration {text!r}")
        total += int(whole or 0) * scale
        digits = fraction[:18]  # Go stops reading digits there too
        if digits:
            total += int(digits) * scale // 10 ** len(digits)
        if total > _MAX_NS - (0 if negative else 1):
            raise ValueError(f"invalid duration {text!r}")
        pos = part.end()
    return -total / 1e9 if negative else total / 1e9


def format_duration(seconds: float) -> str:
    """``seconds`` as Go's ``Duration.String`` writes it: ``30s``, ``1m30s``, ``1h0m0s``,
    ``1.5s``, ``500ms``, ``0s``."""
    ns = round(seconds * 1e9)
    if ns == 0:
        return "0s"
    sign = "-" if ns < 0 else ""
    ns = abs(ns)
    if ns < 1_000:
        return f"{sign}{ns}ns"
    if ns < 1_000_000:
        return f"{sign}{_decimal(ns, 3)}µs"
    if ns < 1_000_000_000:
        return f"{sign}{_decimal(ns, 6)}ms"
    hours, ns = divmod(ns, _NS["h"])
    minutes, ns = divmod(ns, _NS["m"])
    text = f"{_decimal(ns, 9)}s"
    if hours:
        return f"{sign}{hours}h{minutes}m{text}"
    if minutes:
        return f"{sign}{minutes}m{text}"
    return sign + text


def _decimal(value: int, digits: int) -> str:
    """``value`` / 10**digits without trailing zeros (``1500, 3`` is ``1.5``)."""
    whole, part = divmod(value, 10**digits)
    fraction = f"{part:0{digits}d}".rstrip("0")
    return f"{whole}.{fraction}" if fraction else str(whole)
