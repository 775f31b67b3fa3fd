"""How the report, its plots and the live view write virtual time: one home for both the
PNGs (no matplotlib needed to import it) and the Markdown and HTML."""

from __future__ import annotations

from dataclasses import dataclass

from scheduler.config._duration import format_duration

__all__ = ["TimeUnit", "counted", "short_duration", "time_unit"]


@dataclass(frozen=True)
class TimeUnit:
    """The unit of a time axis: how many seconds it is and its name for a label."""

    seconds: float
    label: str  # "minutes"


def time_unit(span: float) -> TimeUnit:
    """Seconds up to 3 minutes, minutes up to 3 hours, hours beyond: an axis over ``span``
    seconds reads in small whole numbers."""
    if span <= 180:
        return TimeUnit(1.0, "seconds")
    if span <= 3 * 3600:
        return TimeUnit(60.0, "minutes")
    return TimeUnit(3600.0, "hours")


def short_duration(seconds: float) -> str:
    """A duration for a reader, as Go writes one (the project's ``format_duration``), with
    whole milliseconds below a second (a run on the wall clock, ``--connect``, waits that
    little), tenths of a second below a minute and whole seconds above: ``2ms``,
    ``42.5s``, ``3m12s``, ``1h0m0s``."""
    if seconds < 1:
        return format_duration(round(seconds, 3))
    return format_duration(round(seconds, 1) if seconds < 60 else round(seconds))


def counted(count: int, word: str, plural: str = "") -> str:
    """``count`` and ``word``, in the plural unless it is one: ``1 node``, ``3 nodes``,
    ``1,200 pods`` (``plural`` for a word that does not take an ``s``)."""
    return f"{count:,} {word if count == 1 else plural or word + 's'}"
