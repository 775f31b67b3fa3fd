"""The RM proxy: checks each SI request and turns it into typed events for partitions.

A request that is malformed as a whole (wrong type, missing or unknown ``rm_id``) raises
``SchedulerError`` before anything is routed. An item that is bad on its own (an ask with a
negative resource, a node without an id) is rejected through the RM's callback with the
spec's rejection message and a reason; the rest of the request goes on. Nothing reaches a
partition half-checked.

Every resource the RM sends (ask, node capacity and occupied, existing allocation,
placeholder ask) goes through ``_resource``: each quantity an int from 0 to int64's max
(``_quantity.quantity_problem`` words the reason). Asks have a hot path, ``_plain_ask``:
it checks and builds a well-formed ask in one pass and leaves any other to ``_ask``,
which checks it step by step, so a bad ask gets the same reason either way. A
placeholder, ask or recovered allocation, must name its task group, as YuniKorn's
``NewAllocationAskFromSI`` and ``NewAllocationFromSI`` require.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NoReturn

from loguru import logger

from actors import ActorRef
from scheduler import si
from scheduler._errors import SchedulerError
from scheduler.config._quantity import INT64_MAX, quantity_problem
from scheduler.core._events import (
    AllocationReleased,
    AllocationSpec,
    AllocationsReleased,
    ApplicationsAdded,
    ApplicationsRemoved,
    AppSpec,
    AskSpec,
    AsksReleased,
    AsksUpdated,
    NodesUpdated,
    NodeUpdate,
    Outbound,
)
from scheduler.objects._gang_tags import GangTagError, has_gang_tags, parse_gang
from scheduler.objects._priority import MAX_PRIORITY, MIN_PRIORITY
from scheduler.objects._resources import Size

__all__ = ["DEFAULT_PARTITION", "RMProxy", "RMRecord", "check_rm_id"]

DEFAULT_PARTITION = "default"
GANG_STYLES = {"": "Soft", "soft": "Soft", "hard": "Hard"}


class _Bad(Exception):
    """An item to reject with ``reason``."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


# What checking an item can raise: our own verdict, or the item's shape being wrong (a
# None where a list belongs, say). Either way that item is rejected with a reason.
_MALFORMED = (_Bad, TypeError, AttributeError)


def _reason(error: Exception) -> str:
    if isinstance(error, _Bad):
        return error.reason
    return f"malformed: {error}"


class RMRecord:
    """What the proxy knows of one registered RM: its callback actor, its partitions'
    actors, and per partition the actors of its applications (the partition publishes
    them; until it has, what is meant for an application goes through the partition)."""

    def __init__(self, rm_id: str, callback: ActorRef) -> None:
        self.rm_id = rm_id
        self.callback = callback
        self.partitions: dict[str, ActorRef] = {}
        self.apps: dict[str, dict[str, ActorRef]] = {}

    def add_partition(self, name: str, ref: ActorRef, directory: dict[str, ActorRef]) -> None:
        self.partitions[name] = ref
        self.apps[name] = directory

    def remove_partition(self, name: str) -> None:
        self.partitions.pop(name, None)
        self.apps.pop(name, None)

    def app(self, partition: str, app_id: str) -> ActorRef:
        """Where a message for application ``app_id`` goes: its actor, or the partition."""
        ref = self.apps[partition].get(app_id)
        if ref is not None and ref.alive:
            return ref
        return self.partitions[partition]


def check_rm_id(rm_id: object) -> str:
    if not isinstance(rm_id, str) or not rm_id:
        raise SchedulerError("rm_id must be a non-empty string")
    return rm_id


def _fail(request: object, expected: type) -> NoReturn:
    raise SchedulerError(f"expected si.{expected.__name__}, got {type(request).__name__}")


_Resource = si.Resource
_Quantity = si.Quantity


def _resource(res: object, what: str, key: str = "") -> dict[str, int]:
    """A checked resource map; zero entries dropped. Every SI resource the RM sends comes
    through here. ``what`` names it, with ``{}`` for ``key``: the message is only formatted
    when something is wrong (this is the hot path).
    """
    if res is None:
        return {}
    if type(res) is not _Resource:
        what = what.replace("{}", key, 1)  # not format(): ids are the RM's text, braces too
        raise _Bad(f"{what} must be an si.Resource, got {type(res).__name__}")
    out: dict[str, int] = {}
    for name, q in res.resources.items():
        if type(q) is _Quantity and type(name) is str:
            value = q.value
            if type(value) is int and 0 <= value <= INT64_MAX:
                if value:
                    out[name] = value
                continue
        raise _Bad(_bad_entry(what.replace("{}", key, 1), name, q))
    return out


def _bad_entry(what: str, name: object, q: object) -> str:
    if type(name) is not str:
        return f"{what}: resource name {name!r} is not a string"
    if type(q) is not _Quantity:
        return f"{what}: {name!r} must be an si.Quantity, got {type(q).__name__}"
    return f"{what}: quantity of {name!r}: {quantity_problem(q.value)}"


def _text(value: object, what: str, *, required: bool = True) -> str:
    if type(value) is not str:
        raise _Bad(f"{what} must be a string, got {type(value).__name__}")
    if required and not value:
        raise _Bad(f"{what} is missing")
    return value


def _str_map(value: object, what: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(
        type(k) is str and type(v) is str for k, v in value.items()
    ):
        raise _Bad(f"{what} must map strings to strings")
    return value


def _int(value: object, what: str) -> int:
    if type(value) is not int:
        raise _Bad(f"{what} must be an integer, got {type(value).__name__}")
    return value


class RMProxy:
    """Validates and routes; holds the registry of RMs and their partitions."""

    def __init__(self) -> None:
        self.rms: dict[str, RMRecord] = {}
        self._sizes: _Sizes = {}  # asks of the same resource share it (``_plain_ask``)
        # New nodes refused here, before any partition: for an unknown partition (YuniKorn
        # counts these as failed nodes, ``ClusterContext.addNode``) or malformed.
        self.failed_nodes = 0

    def rm(self, request: Any, expected: type) -> RMRecord:
        if type(request) is not expected:
            _fail(request, expected)
        rm_id = check_rm_id(getattr(request, "rm_id", None))
        record = self.rms.get(rm_id)
        if record is None:
            raise SchedulerError(f"resource manager {rm_id!r} is not registered")
        return record

    def _partition(self, rm: RMRecord, name: object) -> tuple[str, ActorRef]:
        if type(name) is not str:
            raise _Bad(f"partition name must be a string, got {type(name).__name__}")
        name = name or DEFAULT_PARTITION
        ref = rm.partitions.get(name)
        if ref is None:
            raise _Bad(f"partition {name!r} does not exist")
        return name, ref

    def _partition_name(self, rm: RMRecord, raw: object, known: dict[str, str]) -> str:
        """``_partition``'s checked name, each raw name of a request checked once."""
        if not isinstance(raw, str):
            return self._partition(rm, raw)[0]  # raises: a name must be a string
        name = known.get(raw)
        if name is None:
            name = known[raw] = self._partition(rm, raw)[0]
        return name

    def _reject(self, rm: RMRecord, kind: str, payload: object) -> None:
        rm.callback.tell(Outbound(kind=kind, payload=payload))

    # ------------------------------------------------------------------------ nodes
    def update_node(self, request: si.NodeRequest) -> None:
        rm = self.rm(request, si.NodeRequest)
        if not isinstance(request.nodes, list):
            raise SchedulerError("NodeRequest.nodes must be a list")
        routed: dict[str, list[NodeUpdate]] = {}
        rejected: list[si.RejectedNode] = []
        for info in request.nodes:
            if type(info) is not si.NodeInfo:
                raise SchedulerError(f"NodeRequest.nodes holds a {type(info).__name__}")
            try:
                partition = (
                    info.attributes.get(si.NODE_PARTITION, "")
                    if isinstance(info.attributes, dict)
                    else ""
                )
                name, _ = self._partition(rm, partition)
                update = self._node(info)
                routed.setdefault(name, []).append(update)
            except _MALFORMED as bad:
                node_id = info.node_id if type(info.node_id) is str else ""
                rejected.append(si.RejectedNode(node_id=node_id, reason=_reason(bad)))
                if info.action == si.ActionFromRM.CREATE:
                    self.failed_nodes += 1
        if rejected:
            self._reject(rm, "node", si.NodeResponse(rejected=rejected))
        for name, updates in routed.items():
            rm.partitions[name].tell(NodesUpdated(nodes=tuple(updates)))

    def _node(self, info: si.NodeInfo) -> NodeUpdate:
        node_id = _text(info.node_id, "node id")
        try:
            action = si.ActionFromRM(info.action)
        except ValueError:
            raise _Bad(f"node {node_id}: unknown action {info.action!r}") from None
        if action == si.ActionFromRM.UNKNOWN_ACTION_FROM_RM:
            raise _Bad(f"node {node_id}: action is not set")
        capacity = occupied = None
        if info.schedulable_resource is not None or action == si.ActionFromRM.CREATE:
            capacity = _resource(info.schedulable_resource, f"node {node_id} capacity")
        if info.occupied_resource is not None:
            occupied = _resource(info.occupied_resource, f"node {node_id} occupied")
        attributes = _str_map(info.attributes, f"node {node_id} attributes")
        existing = tuple(self._existing(a, node_id) for a in info.existing_allocations)
        return NodeUpdate(
            node_id=node_id,
            action=action,
            capacity=capacity,
            occupied=occupied,
            attributes=attributes if (attributes or capacity is not None) else None,
            existing=existing,
        )

    def _existing(self, alloc: object, node_id: str) -> AllocationSpec:
        if type(alloc) is not si.Allocation:
            raise _Bad(f"node {node_id}: existing allocation is a {type(alloc).__name__}")
        uuid = _text(alloc.uuid, f"node {node_id}: existing allocation uuid")
        if alloc.node_id and alloc.node_id != node_id:
            raise _Bad(f"node {node_id}: existing allocation {uuid} names node {alloc.node_id}")
        group = _text(alloc.task_group_name, f"allocation {uuid} task group", required=False)
        placeholder = bool(alloc.placeholder)
        if placeholder and not group:
            raise _Bad(
                f"node {node_id}: existing allocation {uuid} is a placeholder without a task group"
            )
        return AllocationSpec(
            uuid=uuid,
            allocation_key=_text(alloc.allocation_key, f"allocation {uuid} key", required=False)
            or uuid,
            application_id=_text(alloc.application_id, f"allocation {uuid} application id"),
            node_id=node_id,
            resource=_resource(alloc.resource_per_alloc, f"allocation {uuid} resource"),
            priority=_int(alloc.priority, f"allocation {uuid} priority"),
            tags=_str_map(alloc.allocation_tags, f"allocation {uuid} tags"),
            task_group_name=group,
            placeholder=placeholder,
        )

    # ----------------------------------------------------------------- applications
    def update_application(self, request: si.ApplicationRequest) -> None:
        rm = self.rm(request, si.ApplicationRequest)
        if not isinstance(request.new, list) or not isinstance(request.remove, list):
            raise SchedulerError("ApplicationRequest.new and .remove must be lists")
        added: dict[str, list[AppSpec]] = {}
        removed: dict[str, list[str]] = {}
        rejected: list[si.RejectedApplication] = []
        for app in request.new:
            if type(app) is not si.AddApplicationRequest:
                raise SchedulerError(f"ApplicationRequest.new holds a {type(app).__name__}")
            try:
                name, _ = self._partition(rm, app.partition_name)
                spec = self._app(app)
                added.setdefault(name, []).append(spec)
            except _MALFORMED as bad:
                app_id = app.application_id if type(app.application_id) is str else ""
                rejected.append(si.RejectedApplication(application_id=app_id, reason=_reason(bad)))
        for rem in request.remove:
            if type(rem) is not si.RemoveApplicationRequest:
                raise SchedulerError(f"ApplicationRequest.remove holds a {type(rem).__name__}")
            try:
                name, _ = self._partition(rm, rem.partition_name)
                app_id = _text(rem.application_id, "application id")
                removed.setdefault(name, []).append(app_id)
            except _MALFORMED as bad:
                logger.bind(rm_id=rm.rm_id).warning("application removal ignored: {}", _reason(bad))
        if rejected:
            self._reject(rm, "application", si.ApplicationResponse(rejected=rejected))
        for name, specs in added.items():
            directory = rm.apps[name]
            for spec in specs:
                # What comes for this id from now on goes through the partition, in order
                # behind the add, until the partition publishes the actor it settles on.
                directory.pop(spec.application_id, None)
            rm.partitions[name].tell(ApplicationsAdded(apps=tuple(specs)))
        for name, ids in removed.items():
            rm.partitions[name].tell(ApplicationsRemoved(application_ids=tuple(ids)))

    def _app(self, app: si.AddApplicationRequest) -> AppSpec:
        app_id = _text(app.application_id, "application id")
        ugi = app.ugi
        user, groups = "", tuple[str, ...]()
        if ugi is not None:
            if type(ugi) is not si.UserGroupInformation:
                raise _Bad(f"application {app_id}: ugi must be an si.UserGroupInformation")
            user = _text(ugi.user, f"application {app_id} user", required=False)
            groups = tuple(_text(g, f"application {app_id} group") for g in ugi.groups)
        style = GANG_STYLES.get(
            _text(app.gang_scheduling_style, "gang style", required=False).lower()
        )
        if style is None:
            raise _Bad(
                f"application {app_id}: gang scheduling style "
                f"{app.gang_scheduling_style!r} is neither Hard nor Soft"
            )
        return AppSpec(
            application_id=app_id,
            queue_name=_text(app.queue_name, f"application {app_id} queue", required=False),
            user=user,
            groups=groups,
            tags=_str_map(app.tags, f"application {app_id} tags"),
            placeholder_ask=_resource(app.placeholder_ask, f"application {app_id} placeholder ask"),
            gang_scheduling_style=style,
            execution_timeout_ms=_int(
                app.execution_timeout_milliseconds, f"application {app_id} execution timeout"
            ),
        )

    # ------------------------------------------------------------------ allocations
    def update_allocation(self, request: si.AllocationRequest) -> None:
        rm = self.rm(request, si.AllocationRequest)
        asks = request.asks
        if not isinstance(asks, list):
            raise SchedulerError("AllocationRequest.asks must be a list")
        releases = request.releases
        if releases is not None and type(releases) is not si.AllocationReleasesRequest:
            _fail(releases, si.AllocationReleasesRequest)
        # Everything is checked before anything is sent; then asks go first, then ask
        # releases, then allocation releases (YuniKorn's order).
        routed: dict[str, dict[str, list[Any]]] = {}
        rejected = self._asks(rm, asks, routed)
        later: list[tuple[ActorRef, Any]] = []
        if releases is not None:
            ask_releases = releases.allocation_asks_to_release
            allocation_releases = releases.allocations_to_release
            if not isinstance(ask_releases, list) or not isinstance(allocation_releases, list):
                raise SchedulerError("AllocationReleasesRequest fields must be lists")
            later = self._ask_releases(rm, ask_releases) + self._releases(rm, allocation_releases)
        if rejected:
            self._reject(rm, "allocation", si.AllocationResponse(rejected=rejected))
        for name, per_app in routed.items():
            for app_id, specs in per_app.items():
                rm.app(name, app_id).tell(AsksUpdated(application_id=app_id, asks=tuple(specs)))
        for ref, msg in later:
            ref.tell(msg)

    def _asks(
        self, rm: RMRecord, asks: list[Any], routed: dict[str, dict[str, list[Any]]]
    ) -> list[si.RejectedAllocationAsk]:
        rejected: list[si.RejectedAllocationAsk] = []
        AskType = si.AllocationAsk
        # ``routed``'s entry of each raw partition name of this request already checked
        by_raw: dict[str, dict[str, list[Any]]] = {}
        sizes = self._sizes
        for ask in asks:
            if type(ask) is not AskType:
                raise SchedulerError(f"AllocationRequest.asks holds a {type(ask).__name__}")
            spec = _plain_ask(ask, sizes)
            raw = ask.partition_name
            per_app = by_raw.get(raw) if type(raw) is str else None
            if spec is None or per_app is None:
                try:
                    if spec is None:
                        spec = self._ask(ask)
                    if per_app is None:
                        name = self._partition(rm, raw)[0]
                        per_app = routed.get(name)
                        if per_app is None:
                            per_app = routed[name] = {}
                        by_raw[raw] = per_app
                except _MALFORMED as bad:
                    rejected.append(_rejected_ask(ask, bad))
                    continue
            specs = per_app.get(spec.application_id)
            if specs is None:
                per_app[spec.application_id] = [spec]
            else:
                specs.append(spec)
        return rejected

    def _ask(self, ask: si.AllocationAsk) -> AskSpec:
        key = ask.allocation_key
        app_id = ask.application_id
        if type(key) is not str or not key:
            raise _Bad("allocation key is missing")
        if type(app_id) is not str or not app_id:
            raise _Bad(f"ask {key}: application id is missing")
        resource = _resource(ask.resource_ask, "ask {} resource", key)
        if not resource:
            raise _Bad(f"ask {key}: resource ask is empty or zero")
        count = ask.max_allocations
        if type(count) is not int or count < 0:
            raise _Bad(f"ask {key}: max allocations must be a non-negative integer, got {count!r}")
        tags = ask.tags
        if tags and not isinstance(tags, dict):
            raise _Bad(f"ask {key}: tags must map strings to strings")
        timeout = ask.execution_timeout_milliseconds
        if type(timeout) is not int:
            raise _Bad(f"ask {key}: execution timeout must be an integer, got {timeout!r}")
        priority = ask.priority
        if type(priority) is not int or not MIN_PRIORITY <= priority <= MAX_PRIORITY:
            raise _Bad(f"ask {key}: priority must be a 32-bit integer, got {priority!r}")
        group = ask.task_group_name
        if type(group) is not str:
            raise _Bad(f"ask {key}: task group name must be a string")
        placeholder = bool(ask.placeholder)
        if placeholder and not group:
            raise _Bad(f"ask {key}: a placeholder ask must name its task group")
        policy = ask.preemption_policy
        if policy is None:  # as YuniKorn reads it (common.IsAllowPreemptSelf / Other)
            preempt_self, preempt_other = True, False
        elif type(policy) is si.PreemptionPolicy:
            preempt_self = bool(policy.allow_preempt_self)
            preempt_other = bool(policy.allow_preempt_other)
        else:
            raise _Bad(f"ask {key}: preemption policy must be a PreemptionPolicy")
        gang = None
        if tags and has_gang_tags(tags):
            try:
                gang = parse_gang(tags)
            except GangTagError as exc:
                raise _Bad(f"ask {key}: {exc}") from None
        return AskSpec(
            allocation_key=key,
            application_id=app_id,
            resource=resource,
            max_allocations=count or 1,
            priority=priority,
            tags=tags,
            task_group_name=group,
            placeholder=placeholder,
            originator=bool(ask.originator),
            execution_timeout_ms=timeout,
            required_node=tags.get(si.DOMAIN_YUNIKORN + si.KEY_REQUIRED_NODE, "") if tags else "",
            gang=gang,
            allow_preempt_self=preempt_self,
            allow_preempt_other=preempt_other,
        )

    def _ask_releases(self, rm: RMRecord, items: Iterable[Any]) -> list[tuple[ActorRef, Any]]:
        out: list[tuple[ActorRef, Any]] = []
        grouped: dict[tuple[str, str], list[str]] = {}
        everything: set[tuple[str, str]] = set()  # no key: release every ask of the app
        info: dict[tuple[str, str], tuple[si.TerminationType, str]] = {}
        for rel in items:
            if type(rel) is not si.AllocationAskRelease:
                raise SchedulerError(f"allocation_asks_to_release holds a {type(rel).__name__}")
            try:
                name, _ = self._partition(rm, rel.partition_name)
                app_id = _text(rel.application_id, "ask release application id")
                key = _text(rel.allocation_key, "ask release key", required=False)
            except _MALFORMED as bad:
                logger.bind(rm_id=rm.rm_id).warning("ask release ignored: {}", _reason(bad))
                continue
            target = (name, app_id)
            keys = grouped.setdefault(target, [])
            if target in everything:
                continue  # every ask of the application goes already
            if not key:
                everything.add(target)
                keys.clear()
            else:
                keys.append(key)
            info[target] = (_termination(rel.termination_type), rel.message)
        for (name, app_id), keys in grouped.items():
            termination, message = info[(name, app_id)]
            out.append(
                (
                    rm.app(name, app_id),
                    AsksReleased(
                        application_id=app_id,
                        allocation_keys=tuple(keys),
                        termination=termination,
                        message=message,
                    ),
                )
            )
        return out

    def _releases(self, rm: RMRecord, items: Iterable[Any]) -> list[tuple[ActorRef, Any]]:
        grouped: dict[tuple[str, str], list[AllocationReleased]] = {}
        known: dict[str, str] = {}  # partition names of this request already checked
        for rel in items:
            if type(rel) is not si.AllocationRelease:
                raise SchedulerError(f"allocations_to_release holds a {type(rel).__name__}")
            try:
                name = self._partition_name(rm, rel.partition_name, known)
                app_id = rel.application_id
                if type(app_id) is not str or not app_id:
                    app_id = _text(app_id, "release application id")
                uuid = rel.uuid
                if type(uuid) is not str:
                    uuid = _text(uuid, "release uuid", required=False)
            except _MALFORMED as bad:
                logger.bind(rm_id=rm.rm_id).warning("allocation release ignored: {}", _reason(bad))
                continue
            grouped.setdefault((name, app_id), []).append(
                AllocationReleased(
                    uuid=uuid,
                    termination=_termination(rel.termination_type),
                    message=rel.message if type(rel.message) is str else "",
                    allocation_key=rel.allocation_key if type(rel.allocation_key) is str else "",
                )
            )
        return [
            (rm.app(name, app_id), AllocationsReleased(application_id=app_id, releases=tuple(rels)))
            for (name, app_id), rels in grouped.items()
        ]


_REQUIRED_NODE = si.DOMAIN_YUNIKORN + si.KEY_REQUIRED_NODE
# A resource's names and quantities, flat, to its map (zero entries dropped) and size.
_Sizes = dict[tuple[str | int, ...], tuple[dict[str, int], Size]]
_SIZES_MAX = 4096  # distinct resources kept; past it the cache starts over


def _share(sizes: _Sizes, key: tuple[str | int, ...]) -> tuple[dict[str, int], Size]:
    if len(sizes) >= _SIZES_MAX:
        sizes.clear()
    resource: dict[str, int] = {}
    for at in range(0, len(key), 2):
        name, value = key[at], key[at + 1]
        if value:
            resource[str(name)] = int(value)
    shared = sizes[key] = (resource, tuple(resource.items()))
    return shared


def _plain_ask(ask: si.AllocationAsk, sizes: _Sizes) -> AskSpec | None:
    """The ask, built in one pass, when all of it is well-formed and it is no gang member
    (the hot path: what a sound RM sends). ``None`` for anything else: ``RMProxy._ask``
    then checks it step by step, and names what is wrong. Raises nothing.

    Asks of the same resource share its map and size (``sizes``): an ask's resource is
    read-only, as an allocation's is."""
    if ask.preemption_policy is not None:
        return None  # read by ``RMProxy._ask``
    key = ask.allocation_key
    app_id = ask.application_id
    res = ask.resource_ask
    count = ask.max_allocations
    priority = ask.priority
    timeout = ask.execution_timeout_milliseconds
    group = ask.task_group_name
    placeholder = ask.placeholder
    originator = ask.originator
    if not (
        type(key) is str
        and key
        and type(app_id) is str
        and app_id
        and type(res) is _Resource
        and type(res.resources) is dict
        and type(count) is int
        and count >= 0
        and type(priority) is int
        and MIN_PRIORITY <= priority <= MAX_PRIORITY
        and type(timeout) is int
        and type(group) is str
        and type(placeholder) is bool
        and type(originator) is bool
        and (group or not placeholder)
    ):
        return None
    flat: list[str | int] = []
    for name, q in res.resources.items():
        if type(q) is not _Quantity or type(name) is not str:
            return None
        value = q.value
        if type(value) is not int or not 0 <= value <= INT64_MAX:
            return None
        flat.append(name)
        flat.append(value)
    entries = tuple(flat)
    shared = sizes.get(entries)
    if shared is None:
        shared = _share(sizes, entries)
    resource, size = shared
    if not resource:
        return None
    tags = ask.tags
    if tags:
        if type(tags) is not dict or has_gang_tags(tags):
            return None
        required = tags.get(_REQUIRED_NODE, "")
    elif type(tags) is dict and not (count > 1 or priority or group or originator or timeout):
        # the usual ask: every other field at its default (a placeholder has a group)
        return AskSpec(
            allocation_key=key,
            application_id=app_id,
            resource=resource,
            pending=1,
            size=size,
        )
    else:
        required = ""
    count = count or 1
    return AskSpec(
        allocation_key=key,
        application_id=app_id,
        resource=resource,
        max_allocations=count,
        priority=priority,
        tags=tags,
        task_group_name=group,
        placeholder=placeholder,
        originator=originator,
        execution_timeout_ms=timeout,
        required_node=required,
        pending=count,
        size=size,
    )


def _rejected_ask(ask: si.AllocationAsk, bad: Exception) -> si.RejectedAllocationAsk:
    key, app_id = ask.allocation_key, ask.application_id
    return si.RejectedAllocationAsk(
        allocation_key=key if type(key) is str else "",
        application_id=app_id if type(app_id) is str else "",
        reason=_reason(bad),
    )


# Enum calls are slow; a release per replacement confirmation comes through here.
_TERMINATIONS: dict[object, si.TerminationType] = {t.value: t for t in si.TerminationType}


def _termination(value: object) -> si.TerminationType:
    """The termination type an RM sent; unknown or unset means ``STOPPED_BY_RM``."""
    try:
        termination = _TERMINATIONS.get(value)
    except TypeError:  # unhashable
        termination = None
    if termination is None or termination is si.TerminationType.UNKNOWN_TERMINATION_TYPE:
        return si.TerminationType.STOPPED_BY_RM
    return termination
