"""Placing a new application in a leaf queue: YuniKorn's placement rules and submit ACLs.

Plain functions over a partition's queue tree. Dynamic queues that a rule creates are
returned to the caller, whose job it is to give each its actor.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scheduler._queue import Queue, QueueStatus
from scheduler._resources import Res, fits_under_max

if TYPE_CHECKING:
    from scheduler._application import Application
    from scheduler._config import PlacementRule
    from scheduler._partition import Partition

__all__ = ["gang_problem", "place", "qualify", "show"]


def place(p: Partition, app: Application, created: list[Queue]) -> tuple[Queue | None, str]:
    """The leaf queue ``app`` goes to, or None and the reason; new dynamic queues are
    appended to ``created``."""
    rules = p.config.placement_rules
    if not rules:
        return _place_in(p, app, qualify(app.queue_name), False, created)
    for rule in rules:
        path, create = _apply_rule(rule, app)
        if path is None:
            continue
        if path == "":
            return None, "application rejected by placement rule"
        return _place_in(p, app, path, create, created)
    return None, f"no placement rule placed application {app.application_id}"


def _apply_rule(rule: PlacementRule, app: Application) -> tuple[str | None, bool]:
    name = rule.name.lower()
    if name == "reject":
        return "", False
    if name == "provided":
        leaf = app.queue_name
    elif name == "user":
        leaf = app.user
    elif name == "fixed":
        leaf = rule.value
    elif name == "tag":
        leaf = app.tags.get(rule.value, "")
    elif name == "primarygroup":
        leaf = app.groups[0] if app.groups else ""
    else:
        return None, False
    if not leaf:
        return None, False
    if leaf.startswith("root.") or leaf == "root":
        return leaf, rule.create
    if rule.parent is not None:
        parent, _ = _apply_rule(rule.parent, app)
        if not parent:
            return None, False
        return f"{qualify(parent)}.{leaf}", rule.create
    return f"root.{leaf}", rule.create


def _place_in(
    p: Partition, app: Application, path: str, create: bool, created: list[Queue]
) -> tuple[Queue | None, str]:
    queue = p.queues.get(path)
    if queue is None and create:
        queue = _create_dynamic(p, path, created)
    if queue is None:
        return None, f"queue {path} does not exist in partition {p.name}"
    if not queue.leaf:
        return None, f"queue {path} is not a leaf queue"
    if queue.status is not QueueStatus.ACTIVE:
        return None, f"queue {path} is {queue.status} and takes no applications"
    if not acl_allows(queue, app.user, app.groups):
        return None, f"user {app.user!r} may not submit to queue {path}"
    return queue, ""


def _create_dynamic(p: Partition, path: str, created: list[Queue]) -> Queue | None:
    parts = path.split(".")
    if parts[0] != "root" or len(parts) < 2 or not all(parts):
        return None
    parent = p.root
    for i, part in enumerate(parts[1:], start=1):
        child = parent.children.get(part)
        if child is None:
            if parent.leaf:
                return None
            child = Queue(part, parent, leaf=i == len(parts) - 1, dynamic=True)
            child.configure(max_resources={}, guaranteed={}, properties={})
            p.queues[child.path] = child
            created.append(child)
        parent = child
    return parent


def qualify(path: str) -> str:
    """A queue name as a full path under ``root``."""
    path = path.strip()
    if path == "root" or path.startswith("root."):
        return path
    return f"root.{path}" if path else "root"


def acl_allows(queue: Queue, user: str, groups: list[str]) -> bool:
    """YuniKorn's submit ACL: ``*``, or ``users groups`` lists, checked up the chain."""
    for q in queue.chain:
        acl = q.submit_acl
        if not acl:
            continue
        if acl.strip() == "*":
            return True
        users, _, group_list = acl.partition(" ")
        if user and user in {u.strip() for u in users.split(",")}:
            return True
        if groups and set(groups) & {g.strip() for g in group_list.split(",") if g.strip()}:
            return True
    return False


def gang_problem(app: Application, queue: Queue) -> str:
    """Why a gang application can never run in ``queue`` (empty if it can)."""
    ask = app.placeholder_ask
    if not ask:
        return ""
    if queue.sort_policy == "fair":
        return f"queue {queue.path} sorts applications fair; a gang application needs a fifo queue"
    for q in queue.max_set_chain:  # not root's max: YuniKorn's GetMaxQueueSet
        if not fits_under_max(ask, {}, q.max_resources):
            return (
                f"placeholder ask {show(ask)} is larger than the max {show(q.max_resources)} "
                f"of queue {q.path}"
            )
    return ""


def show(res: Res) -> str:
    """A resource as the messages show it: ``{memory: 10, vcore: 1}``."""
    return "{" + ", ".join(f"{name}: {v}" for name, v in sorted(res.items())) + "}"
