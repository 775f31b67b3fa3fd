"""YuniKorn resource quantities as written in ``queues.yaml``.

Follows ``pkg/common/resources/quantity.go`` (``ParseQuantity``/``ParseVCore``) and
``NewResourceFromConf`` in ``pkg/common/resources/resources.go`` of yunikorn-core:

* a quantity is ``[+-]digits`` followed by an optional suffix; all whitespace is removed
  first (``"10 Gi"`` is ``10Gi``);
* decimal suffixes ``k M G T P E`` (powers of 1000) and binary suffixes
  ``Ki Mi Gi Ti Pi Ei`` (powers of 1024); suffixes are case-sensitive (``K`` and ``m`` are
  not quantity suffixes, decimals such as ``0.5G`` are not quantities);
* ``vcore`` is parsed in milli-vcores: ``1`` is 1000, ``250m`` is 250, ``2k`` is 2_000_000;
  only ``vcore`` accepts the ``m`` suffix;
* the result must fit in a signed 64-bit integer;
* negative values are never accepted in a resource configuration (YuniKorn's
  ``NewResourceFromConf`` rejects them after parsing).

:func:`quantity_problem` is the one check of a quantity's value, for the configuration
parsed here and for every SI resource the RM proxy takes: an int (not a bool), not
negative, within int64 (YuniKorn's ``resources.Quantity`` and the SI's ``Quantity.value``
are int64).

``memory`` has no special unit: ``150M`` is 150_000_000 bytes (YuniKorn >= 1.0).

:func:`format_quantity` and :func:`format_resources` are how every output shows a quantity
(``scheduler demo``'s tables, ``check-config``'s messages; the status page's ``qty`` follows
the same rules): bytes (``memory``, ``ephemeral-storage``) in binary units, a whole number
of the largest unit it reaches (``8Gi``, ``512Mi``) or else one decimal (``1.5Gi``; ``2G``
shows as ``1.9Gi``), below 1Ki as a plain number; ``vcore`` as cores (``4``) or, when not
whole, millicores (``500m``), as ``queues.yaml`` writes them; any other resource as a count
(``1,000``). ``memory`` and ``vcore`` come first, the others in name order.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Final

from scheduler._errors import SchedulerError

__all__ = [
    "BYTE_RESOURCES",
    "INT64_MAX",
    "MEMORY",
    "VCORE",
    "QuantityError",
    "format_quantity",
    "format_resources",
    "parse_quantity",
    "parse_resource_conf",
    "parse_vcore",
    "quantity_problem",
]

VCORE = "vcore"
MEMORY = "memory"

INT64_MAX: Final = (1 << 63) - 1

_MULTIPLIERS: dict[str, int] = {
    "": 1,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
    "Ki": 1 << 10,
    "Mi": 1 << 20,
    "Gi": 1 << 30,
    "Ti": 1 << 40,
    "Pi": 1 << 50,
    "Ei": 1 << 60,
}

#: Resources counted in bytes, shown in binary units.
BYTE_RESOURCES: Final = frozenset({MEMORY, "ephemeral-storage"})
_BINARY_UNITS: Final = ("Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
_FIRST: Final = (MEMORY, VCORE)

_LEGAL = re.compile(r"([+-]?)([0-9]+)([A-Za-z]*)")
_WHITESPACE = re.compile(r"\s+")


class QuantityError(SchedulerError):
    """A resource quantity that YuniKorn would not accept."""


def quantity_problem(value: object) -> str:
    """Why ``value`` is not a valid resource quantity, or ``""`` when it is one."""
    if type(value) is not int:
        return f"{value!r} is not an integer"
    if value < 0:
        return f"{value} is negative"
    if value > INT64_MAX:
        return f"{value} overflows a 64-bit integer"
    return ""


def _parse(text: str, *, milli: bool) -> int:
    if not isinstance(text, str):
        raise QuantityError(f"invalid quantity {text!r}: expected a string")
    compact = _WHITESPACE.sub("", text)
    match = _LEGAL.fullmatch(compact)
    if match is None:
        raise QuantityError(
            f"invalid quantity {text!r}: expected an integer with an optional suffix "
            "(k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei" + (", m" if milli else "") + ")"
        )
    sign, digits, suffix = match.groups()
    number = int(digits)
    if milli and suffix == "m":
        value = number
    else:
        scale = _MULTIPLIERS.get(suffix)
        if scale is None:
            raise QuantityError(f"invalid quantity {text!r}: unknown suffix {suffix!r}")
        value = number * scale * (1000 if milli else 1)
    problem = quantity_problem(-value if sign == "-" else value)
    if problem:
        raise QuantityError(f"invalid quantity {text!r}: {problem}")
    return value


def parse_quantity(text: str) -> int:
    """Parse a YuniKorn quantity (``"150M"`` -> 150_000_000, ``"10Gi"`` -> 10_737_418_240)."""
    return _parse(text, milli=False)


def parse_vcore(text: str) -> int:
    """Parse a vcore quantity into milli-vcores (``"1"`` -> 1000, ``"250m"`` -> 250)."""
    return _parse(text, milli=True)


def parse_resource_conf(mapping: Mapping[str, object]) -> dict[str, int]:
    """Parse a ``resources`` map (``{"memory": "10Gi", "vcore": 2}``) into integer quantities.

    ``vcore`` goes through :func:`parse_vcore`, every other name through
    :func:`parse_quantity`. Values may be strings or (non-bool) ints, as YAML gives them;
    floats, bools, ``None``, negatives and anything else raise :class:`QuantityError`
    naming the resource and the value. Zero values are kept (a zero max is meaningful).
    """
    out: dict[str, int] = {}
    for name, raw in mapping.items():
        if not isinstance(name, str) or not name:
            raise QuantityError(f"invalid resource name {name!r}: expected a non-empty string")
        if isinstance(raw, bool) or not isinstance(raw, str | int):
            raise QuantityError(
                f"invalid value {raw!r} for resource {name!r}: expected an integer quantity "
                "such as 10, '512Mi' or '500m' (vcore only)"
            )
        text = str(raw)
        try:
            out[name] = parse_vcore(text) if name == VCORE else parse_quantity(text)
        except QuantityError as exc:
            raise QuantityError(f"resource {name!r}: {exc}") from None
    return out


def format_quantity(name: str, value: int) -> str:
    """``value`` of resource ``name`` for a reader: ``8Gi``, ``1.5Gi``, ``4``, ``500m``."""
    if name in BYTE_RESOURCES:
        return _binary(value)
    if name == VCORE:
        return str(value // 1000) if value % 1000 == 0 else f"{value}m"
    return f"{value:,}"


def format_resources(resources: Mapping[str, int], *, sep: str = ": ") -> str:
    """``memory: 8Gi, vcore: 4``: each quantity by :func:`format_quantity`, memory and vcore
    first; ``sep`` goes between a name and its quantity."""
    names = sorted(resources, key=lambda n: (_FIRST.index(n) if n in _FIRST else 2, n))
    return ", ".join(f"{n}{sep}{format_quantity(n, resources[n])}" for n in names)


def _binary(value: int) -> str:
    size, sign = abs(value), "-" if value < 0 else ""
    if size < 1024:
        return str(value)
    unit, scale = 0, 1024
    while size >= scale * 1024 and unit < len(_BINARY_UNITS) - 1:
        unit, scale = unit + 1, scale * 1024
    if size % scale == 0:
        return f"{sign}{size // scale}{_BINARY_UNITS[unit]}"
    # Rounded half up in tenths, with the same float operations as the page's qty().
    tenths = math.floor(size / scale * 10 + 0.5)
    if tenths >= 10240 and unit < len(_BINARY_UNITS) - 1:  # 1023.96Mi is 1.0Gi
        unit, scale = unit + 1, scale * 1024
        tenths = math.floor(size / scale * 10 + 0.5)
    return f"{sign}{tenths // 10}.{tenths % 10}{_BINARY_UNITS[unit]}"
