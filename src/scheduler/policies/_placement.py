"""Placing a new application in a leaf queue: YuniKorn's placement rules and submit ACLs.

Plain functions over a partition's queue tree. Dynamic queues that a rule creates are
returned to the caller, whose job it is to give each its actor.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

# The names YuniKorn's configuration and ACLs accept (configs.QueueNameRegExp,
# security.userNameRegExp/groupRegExp) and the characters that make a filter entry a
# regular expression (configs.SpecialRegExp): one definition, in the configuration parser.
from scheduler.config._parser import (
    GROUP_NAME_RE,
    QUEUE_NAME_RE,
    SPECIAL_RE,
    USER_NAME_RE,
    ChildTemplate,
)
from scheduler.objects._queue import Queue, QueueStatus
from scheduler.objects._resources import Res, fits_under_max

if TYPE_CHECKING:
    from scheduler.config._parser import Filter, PlacementRule, QueueConfig
    from scheduler.objects._application import Application
    from scheduler.objects._partition import PartitionState

__all__ = [
    "acl_allows",
    "child_template",
    "filter_allows",
    "gang_problem",
    "place",
    "qualify",
    "show",
]


def place(p: PartitionState, app: Application, created: list[Queue]) -> tuple[Queue | None, str]:
    """The leaf queue ``app`` goes to, or None and the reason; new dynamic queues are
    appended to ``created``. Nothing is created for an application that is rejected.

    YuniKorn's ``AppPlacementManager.PlaceApplication`` (placement/placement.go) then
    ``PartitionContext.AddApplication``/``createQueue`` (partition.go): each rule in turn
    names a queue or not; a named queue that is not a leaf, or that the user may not submit
    to (for a queue still to be made: its nearest existing ancestor), passes the turn to the
    next rule. ``app.queue_name`` becomes the placed queue, or ``""`` when no rule placed it.
    """
    rules = p.config.placement_rules
    if not rules:
        # No placement rules (YuniKorn's placement manager not initialised): the named
        # queue must exist, be a leaf and let the user submit.
        path = qualify(app.queue_name)
        queue = p.queues.get(path)
        if queue is None:
            return None, f"queue {path} does not exist in partition {p.name}"
        if not queue.leaf:
            return None, f"queue {path} is not a leaf queue"
        if not acl_allows(queue, app.user, app.groups):
            return None, f"user {app.user!r} may not submit to queue {path}"
        return _active(queue)
    app_id = app.application_id
    placed = ""
    for rule in rules:
        try:
            path = _run_rule(p, rule, app)
        except _RuleFailed as failure:
            app.queue_name = ""
            return None, f"failed to place application {app_id}: {failure}"
        if not path:
            continue
        queue = p.queues.get(path)
        if queue is not None and not queue.leaf:
            p.log.debug("placement rule {} named parent queue {} for {}", rule.name, path, app_id)
            continue
        if not acl_allows(queue or _nearest(p, path), app.user, app.groups):
            p.log.debug("submit access to {} denied for {} ({})", path, app_id, rule.name)
            continue
        placed = path
        break
    if not placed:
        app.queue_name = ""
        return None, (
            f"failed to place application {app_id}: application rejected: no placement rule matched"
        )
    app.queue_name = placed
    queue = p.queues.get(placed)
    if queue is None:
        queue = _create_dynamic(p, placed, created)
        if queue is None:
            return None, f"failed to create rule based queue {placed} for application {app_id}"
    return _active(queue)


def _active(queue: Queue) -> tuple[Queue | None, str]:
    if queue.status is not QueueStatus.ACTIVE:
        return None, f"queue {queue.path} is {queue.status} and takes no applications"
    return queue, ""


class _RuleFailed(Exception):
    """A rule that cannot run (its parent rule named a leaf queue): placement stops."""


def _run_rule(p: PartitionState, rule: PlacementRule, app: Application) -> str:
    """The full queue path ``rule`` names for ``app``, or ``""``: the rules of YuniKorn's
    placement/{provided,user,fixed,tag}_rule.go ``placeApplication``."""
    name = rule.name
    if name == "provided":
        value = app.queue_name
    elif name == "tag":
        value = app.tags.get(rule.value, "")
    elif name == "user":
        value = app.user
    elif name == "fixed":
        value = rule.value
    else:
        return ""
    if not value or not filter_allows(rule.filter, app.user, app.groups):
        return ""
    if name == "fixed":
        qualified = value.startswith("root")  # fixed_rule.go: a plain prefix test
    else:
        qualified = name != "user" and value.startswith("root.")
    if qualified:
        path = value
    else:
        parent = "root"
        if rule.parent is not None:
            parent = _run_rule(p, rule.parent, app)
            if not parent:
                return ""
            parent = qualify(parent)
            above = p.queues.get(parent)
            if above is not None and above.leaf:
                raise _RuleFailed(f"parent rule returned a leaf queue: {parent}")
        leaf = value if name == "fixed" else value.replace(".", "_dot_")
        path = f"{parent}.{leaf}"
    if not rule.create and path not in p.queues:
        return ""
    return path


def _nearest(p: PartitionState, path: str) -> Queue:
    """The deepest queue on ``path`` that exists (root at least)."""
    while path not in p.queues and "." in path:
        path = path.rsplit(".", 1)[0]
    return p.queues.get(path) or p.root


def _create_dynamic(p: PartitionState, path: str, created: list[Queue]) -> Queue | None:
    """YuniKorn's ``PartitionContext.createQueue`` + ``NewDynamicQueue``: the missing
    queues of ``path`` below its nearest existing one, which must be a parent; each name
    must be a valid queue name. A new leaf takes the child template of the nearest queue
    above it that has one. Nothing is made unless all of it can be."""
    parts = path.split(".")
    if parts[0] != "root" or len(parts) < 2:
        return None
    parent = _nearest(p, path)
    missing = parts[len(parent.path.split(".")) :]
    if parent.leaf or not all(QUEUE_NAME_RE.fullmatch(part) for part in missing):
        return None
    for i, part in enumerate(missing, start=1):
        leaf = i == len(missing)
        child = Queue(part, parent, leaf=leaf, dynamic=True)
        template = child_template(p, parent) if leaf else None
        if template is None:
            child.configure(max_resources={}, guaranteed={}, properties={})
        else:
            child.configure(
                max_resources=template.max_resources,
                guaranteed=template.guaranteed,
                properties=template.properties,
                max_applications=template.max_applications,
            )
        p.queues[child.path] = child
        created.append(child)
        parent = child
    return parent


def child_template(p: PartitionState, parent: Queue) -> ChildTemplate | None:
    """The ``childtemplate`` of ``parent`` or, failing that, of the nearest configured
    queue above it that has one. An empty template is none: YuniKorn's
    ``template.FromConf`` makes no template of it, and the queue inherits its parent's."""
    for q in parent.chain:
        conf = _queue_config(p.config.queue, q.path)
        template = conf.child_template if conf is not None else None
        if template is not None and template != ChildTemplate():
            return template
    return None


def _queue_config(root: QueueConfig, path: str) -> QueueConfig | None:
    conf: QueueConfig | None = root
    for part in path.split(".")[1:]:
        assert conf is not None
        conf = next((c for c in conf.queues if c.name == part), None)
        if conf is None:
            return None
    return conf


def qualify(path: str) -> str:
    """A queue name as a full path under ``root``."""
    path = path.strip()
    if path == "root" or path.startswith("root."):
        return path
    return f"root.{path}" if path else "root"


def filter_allows(f: Filter, user: str, groups: list[str]) -> bool:
    """YuniKorn's ``Filter.allowUser`` (placement/filter.go): with no users and no groups
    the filter's type decides; else a user (then any group) it lists or matches gives
    ``allow``, one it does not give the opposite. A single entry with a regular
    expression character is an (unanchored) expression; otherwise entries are names."""
    allow = f.type != "deny"
    if not f.users and not f.groups:
        return allow
    if _filter_matches(f.users, user, USER_NAME_RE):
        return allow
    if any(_filter_matches(f.groups, group, GROUP_NAME_RE) for group in groups):
        return allow
    return not allow


def _filter_matches(entries: tuple[str, ...], name: str, valid: re.Pattern[str]) -> bool:
    if len(entries) == 1 and SPECIAL_RE.search(entries[0]):
        try:
            return re.search(entries[0], name) is not None
        except re.error:
            return False
    return name in entries and valid.fullmatch(name) is not None


def acl_allows(queue: Queue, user: str, groups: list[str]) -> bool:
    """YuniKorn's ``Queue.CheckSubmitAccess`` (objects/queue.go): the submit or the admin
    ACL of the queue or of any queue above it lets the user in."""
    return any(
        _acl_allows(acl, user, groups) for q in queue.chain for acl in (q.submit_acl, q.admin_acl)
    )


def _acl_allows(acl: str, user: str, groups: list[str]) -> bool:
    """YuniKorn's ``ACL.CheckAccess`` (common/security/acl.go): ``*``, or comma-separated
    users, a space, comma-separated groups; ``*`` as the whole user or group list allows
    everyone."""
    if not acl:
        return False
    if acl.strip() == "*":
        return True
    fields = acl.split(" ")
    if len(fields) > 2:
        return False  # YuniKorn refuses such an ACL: nobody gets in
    users = fields[0].split(",")
    group_list = fields[1].split(",") if len(fields) == 2 else []
    if users == ["*"] or group_list == ["*"]:
        return True
    if user and user in users and USER_NAME_RE.fullmatch(user):
        return True
    return any(g in group_list and GROUP_NAME_RE.fullmatch(g) for g in groups if g)


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
