"""Resource arithmetic on plain ``dict[str, int]`` maps.

Resources inside the core are sparse maps from resource name to an integer quantity
(bytes, milli-vcores, counts). A missing name is zero, except in a queue *max*, where a
missing name means "no limit" (YuniKorn's ``FitInMaxUndef``). These helpers sit on the
scheduling hot path, so they are plain functions over dicts with no allocation where none
is needed.
"""

from __future__ import annotations

from collections.abc import Mapping

from scheduler import si

__all__ = [
    "Res",
    "add_into",
    "add_scaled_into",
    "fits",
    "fits_under_max",
    "shares",
    "sub",
    "sub_into",
    "to_si",
    "to_si_shared",
]

Res = dict[str, int]
Size = tuple[tuple[str, int], ...]  # a resource as a hashable value (``Ask.size``)


def to_si(res: Mapping[str, int]) -> si.Resource:
    return si.Resource(resources={name: si.Quantity(value=v) for name, v in res.items()})


_SI_BY_SIZE: dict[Size, si.Resource] = {}
_SHARED_SI_MAX = 4096  # distinct sizes kept; past it the cache starts over


def to_si_shared(size: Size) -> si.Resource:
    """The SI resource of ``size``, one object per distinct size (the allocations the core
    sends share it: messages from the core are read-only). Nothing per ask or allocation
    stays behind for the garbage collector to walk."""
    res = _SI_BY_SIZE.get(size)
    if res is None:
        if len(_SI_BY_SIZE) >= _SHARED_SI_MAX:
            _SI_BY_SIZE.clear()
        res = _SI_BY_SIZE[size] = to_si(dict(size))
    return res


def add_into(target: Res, delta: Mapping[str, int]) -> None:
    for name, v in delta.items():
        target[name] = target.get(name, 0) + v


def add_scaled_into(target: Res, delta: Mapping[str, int], factor: int) -> None:
    for name, v in delta.items():
        target[name] = target.get(name, 0) + v * factor


def sub_into(target: Res, delta: Mapping[str, int]) -> None:
    for name, v in delta.items():
        left = target.get(name, 0) - v
        if left:
            target[name] = left
        else:
            target.pop(name, None)


def sub(a: Mapping[str, int], b: Mapping[str, int]) -> Res:
    out = dict(a)
    sub_into(out, b)
    return out


def fits(ask: Mapping[str, int], available: Mapping[str, int]) -> bool:
    """Every quantity of ``ask`` is available (a name missing from ``available`` is zero)."""
    for name, v in ask.items():
        if v > available.get(name, 0):
            return False
    return True


def fits_under_max(
    ask: Mapping[str, int], used: Mapping[str, int], limit: Mapping[str, int]
) -> bool:
    """``used + ask`` stays within ``limit``; names missing from ``limit`` are unlimited."""
    for name, v in ask.items():
        cap = limit.get(name)
        if cap is not None and used.get(name, 0) + v > cap:
            return False
    return True


def shares(used: Mapping[str, int], base: Mapping[str, int] | None) -> list[float]:
    """Usage shares of ``used`` against ``base``, largest first (YuniKorn's usage ratio).

    A resource with no entry in ``base`` counts its raw quantity as the share, which sorts a
    queue without a guarantee behind one that is still inside its guarantee.
    """
    if len(used) == 2 and base:  # the usual case (queue order, on every allocation): no sort
        (name_a, used_a), (name_b, used_b) = used.items()
        base_a = base.get(name_a, 0)
        base_b = base.get(name_b, 0)
        share_a = used_a / base_a if base_a > 0 else float(used_a)
        share_b = used_b / base_b if base_b > 0 else float(used_b)
        return [share_a, share_b] if share_a >= share_b else [share_b, share_a]
    out = []
    for name, v in used.items():
        total = base.get(name, 0) if base else 0
        out.append(v / total if total > 0 else float(v))
    out.sort(reverse=True)
    return out
