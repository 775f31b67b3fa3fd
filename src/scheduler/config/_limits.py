"""User and group ``limits`` of a configuration (YuniKorn 1.3+'s ``checkLimits``,
``checkLimitResource``, ``checkLimitMaxApplications``; a partition's limits as YuniKorn
1.5 reads them), and the resource maths the configuration checks share.

Called by ``scheduler.config._parser``'s parser; ``where`` names the partition (and queue) in the
messages, as the parser's own checks do.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import msgspec
from yaml.nodes import Node

from scheduler._errors import ConfigError
from scheduler.config._model import GROUP_NAME_RE, USER_NAME_RE, Limit, QueueConfig
from scheduler.config._reader import fail, fmt, join, mapping, resources, seq, str_list, text, uint

__all__ = [
    "check_limit_hierarchy",
    "fits_under_max",
    "is_zero",
    "min_permissive",
    "parse_limits",
    "partition_limits",
]

_LIMIT_KEYS: Final = frozenset({"limit", "users", "groups", "maxresources", "maxapplications"})


def parse_limits(node: Node | None, path: str, where: str, queue: QueueConfig) -> tuple[Limit, ...]:
    """YuniKorn's ``checkLimits``/``checkLimit`` for the ``limits`` list of ``queue`` (the
    root for a partition's list): names, duplicates, the wildcard last, values."""
    limits: list[Limit] = []
    seen: dict[str, set[str]] = {"user": set(), "group": set()}
    for index, item in enumerate(seq(node, path)):
        item_path = f"{path}[{index}]"
        m = mapping(item, item_path, _LIMIT_KEYS)
        limit = Limit(
            limit=text(m.get("limit"), join(item_path, "limit")),
            users=str_list(m.get("users"), join(item_path, "users")),
            groups=str_list(m.get("groups"), join(item_path, "groups")),
            max_resources=resources(m.get("maxresources"), join(item_path, "maxresources"), where),
            max_applications=uint(m.get("maxapplications"), join(item_path, "maxapplications")),
        )
        problem = _limit_problem(limit, seen, queue)
        if problem:
            raise fail(item_path, item, f"{where}: {problem}")
        limits.append(limit)
    return tuple(limits)


def partition_limits(
    root: QueueConfig, limits: tuple[Limit, ...], path: str, node: Node, where: str
) -> QueueConfig:
    """YuniKorn 1.5's rule: a partition's ``limits`` are the root queue's. Both may be set
    only when they are the same."""
    if not limits:
        return root
    if root.limits and root.limits != limits:
        raise fail(
            path,
            node,
            f"{where}: partition limits and root queue limits both exist and differ; "
            "set them in one place",
        )
    return msgspec.structs.replace(root, limits=limits)


def check_limit_hierarchy(
    queue: QueueConfig, path: str, carried: dict[tuple[str, str], Limit], where: str
) -> None:
    """YuniKorn's ``checkLimitResource`` and ``checkLimitMaxApplications``: a user's or
    group's limit on a queue stays within its limit on every queue above (matched by name,
    ``*`` included)."""
    here = dict(carried)
    for limit in queue.limits:
        for kind, names in (("user", limit.users), ("group", limit.groups)):
            for name in names:
                above = carried.get((kind, name))
                if above is None:
                    here[(kind, name)] = limit
                else:
                    _check_under(limit, above, f"{kind} {name!r}", f"{where}, queue {path!r}")
                    here[(kind, name)] = _tighter(limit, above)
    for child in queue.queues:
        check_limit_hierarchy(child, f"{path}.{child.name}", here, where)


def _check_under(limit: Limit, above: Limit, who: str, where: str) -> None:
    if not fits_under_max(above.max_resources, limit.max_resources):
        raise ConfigError(
            f"{where}: {who} max resources {fmt(limit.max_resources)} are larger than "
            f"the {fmt(above.max_resources)} of a queue above"
        )
    cap = above.max_applications
    if cap and (limit.max_applications == 0 or limit.max_applications > cap):
        shown = limit.max_applications or "unset (unlimited)"
        raise ConfigError(
            f"{where}: {who} maxapplications {shown} must be set and not larger than "
            f"the {cap} of a queue above"
        )


# ============================================================================ resource maths
def fits_under_max(max_res: Mapping[str, int], res: Mapping[str, int]) -> bool:
    """YuniKorn's ``FitInMaxUndef``: a type missing from ``max_res`` is unlimited."""
    return all(value <= max_res[key] for key, value in res.items() if key in max_res)


def min_permissive(left: Mapping[str, int], right: Mapping[str, int]) -> dict[str, int]:
    """YuniKorn's ``ComponentWiseMinPermissive``: per type the lower value, a type set on one
    side only keeps that side's value."""
    out = dict(left)
    for key, value in right.items():
        out[key] = min(out[key], value) if key in out else value
    return out


def is_zero(res: Mapping[str, int]) -> bool:
    return not any(res.values())


def _limit_problem(limit: Limit, seen: dict[str, set[str]], queue: QueueConfig) -> str:
    """What YuniKorn's ``checkLimit`` finds wrong with one entry of a ``limits`` list
    (``seen``: the user and group names of the entries before it), or ``""``."""
    if not limit.users and not limit.groups:
        return f"limit {limit.limit!r} has empty user and group lists"
    for kind, names, pattern in (
        ("user", limit.users, USER_NAME_RE),
        ("group", limit.groups, GROUP_NAME_RE),
    ):
        earlier = seen[kind]
        for name in names:
            if name != "*" and not pattern.fullmatch(name):
                return f"invalid limit {kind} name {name!r}"
            if name in earlier:
                return f"duplicate limit {kind} name {name!r}"
            if "*" in earlier:
                return (
                    f"{kind} {name!r} is set after the wildcard {kind} limit; "
                    "the wildcard must come last"
                )
            earlier.add(name)
    if seen["group"] == {"*"}:
        return (
            "a wildcard group limit needs a limit for at least one named group "
            "(alone it would only repeat the queue's own limit)"
        )
    if limit.max_resources and is_zero(limit.max_resources):
        return f"limit {limit.limit!r}: every resource in maxresources is zero"
    if limit.max_applications == 0 and not limit.max_resources:
        return f"limit {limit.limit!r} sets neither maxapplications nor a non-zero maxresources"
    if queue.max_applications and limit.max_applications > queue.max_applications:
        return (
            f"limit {limit.limit!r}: maxapplications {limit.max_applications} is larger than "
            f"the queue's maxapplications {queue.max_applications}"
        )
    if not fits_under_max(queue.max_resources, limit.max_resources):
        return (
            f"limit {limit.limit!r}: maxresources {fmt(limit.max_resources)} are larger than "
            f"the queue's max {fmt(queue.max_resources)}"
        )
    return ""


def _tighter(limit: Limit, above: Limit) -> Limit:
    """The limit in force below: per resource the lower max, and the lower maxapplications."""
    apps = [n for n in (limit.max_applications, above.max_applications) if n]
    return Limit(
        max_resources=min_permissive(limit.max_resources, above.max_resources),
        max_applications=min(apps) if apps else 0,
    )
