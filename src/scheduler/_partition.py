"""A partition: its queues, nodes and applications, and scheduling by proposal and commit.

Everything here is plain synchronous code owned by the partition's actors, which share one
turn: a handler runs to completion before the next message, and the scheduling pass runs
when every mailbox of the partition is drained (STYLE 3, 4). Outcomes for the RM are
appended to ``outbox`` in the order they happen; timers are asked of ``timers``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Protocol

import msgspec
from loguru import logger

from scheduler import si
from scheduler._application import AppEvent, Application, AppState, Replacement, TaskGroup
from scheduler._config import queue_paths
from scheduler._errors import SchedulerError
from scheduler._events import (
    AllocationReleased,
    AllocationSpec,
    AppSpec,
    AppTimer,
    Event,
    GangTimer,
    NodeUpdate,
    QueueTimer,
    ReservationDue,
)
from scheduler._objects import Allocation, Ask, Node, NodeIndex, Reservation, new_uuid
from scheduler._queue import Queue, QueueStatus
from scheduler._resources import Res, add_into, fits, fits_under_max, sub_into

if TYPE_CHECKING:
    from scheduler._config import PartitionConfig, PlacementRule, QueueConfig

__all__ = ["Outbox", "Partition", "Proposal", "Timeouts", "TimerPort"]

AppTransitionHook = Callable[[Application, AppState], None]


class Timeouts:
    """YuniKorn's defaults, in seconds; a test may shorten them."""

    starting = 5 * 60.0  # Starting -> Running with a single allocation
    completing = 30.0  # Completing -> Completed
    terminated = 3 * 24 * 3600.0  # Completed / Failed / Rejected -> Expired
    dynamic_queue = 10.0  # an empty dynamic queue is removed
    reservation_delay = 2.0  # an ask that found no room may reserve a node after this
    placeholder = 15 * 60.0  # gang placeholders, when the application does not say
    handshake = 60.0  # how long a placeholder release may wait for the RM's confirmation


class TimerPort(Protocol):
    """Where the partition asks for timers; ``to`` is ``app:<id>``, ``queue:<path>``."""

    def set(self, key: str, delay: float, message: Event, to: str) -> None: ...

    def cancel(self, key: str) -> None: ...


# Which response an outbox entry belongs to.
_RESPONSE_OF = {
    "new": "allocation",
    "released": "allocation",
    "released_asks": "allocation",
    "rejected": "allocation",
    "app_accepted": "application",
    "app_rejected": "application",
    "app_updated": "application",
    "node_accepted": "node",
    "node_rejected": "node",
}


class Outbox:
    """Outcomes for the RM in the order they happened, merged into responses on flush.

    Events (``si.EventRecord``) are a stream of their own: they are kept apart and go out
    as one list after the responses of the same flush, so they never split a run of
    allocations into many responses.
    """

    __slots__ = ("entries", "events")

    def __init__(self) -> None:
        self.entries: list[tuple[str, object]] = []
        self.events: list[si.EventRecord] = []

    def add(self, field: str, item: object) -> None:
        """A response field (``new``, ``app_updated``, ...); events go to ``events``."""
        self.entries.append((field, item))

    def __len__(self) -> int:
        return len(self.entries) + len(self.events)

    def flush(self) -> list[tuple[str, object]]:
        """Consecutive entries of one response kind become one response (kind, payload);
        the events follow as one ``("event", [...])``."""
        out: list[tuple[str, object]] = []
        current_kind = ""
        fields: dict[str, list[object]] = {}
        for field, item in self.entries:
            kind = _RESPONSE_OF[field]
            if kind != current_kind:
                if fields:
                    out.append((current_kind, _build(current_kind, fields)))
                current_kind, fields = kind, {}
            fields.setdefault(field, []).append(item)
        if fields:
            out.append((current_kind, _build(current_kind, fields)))
        self.entries = []
        if self.events:
            out.append(("event", self.events))
            self.events = []
        return out


def _build(kind: str, f: dict[str, list[object]]) -> object:
    if kind == "allocation":
        return si.AllocationResponse(
            new=f.get("new", []),  # type: ignore[arg-type]
            released=f.get("released", []),  # type: ignore[arg-type]
            released_asks=f.get("released_asks", []),  # type: ignore[arg-type]
            rejected=f.get("rejected", []),  # type: ignore[arg-type]
        )
    if kind == "application":
        return si.ApplicationResponse(
            rejected=f.get("app_rejected", []),  # type: ignore[arg-type]
            accepted=f.get("app_accepted", []),  # type: ignore[arg-type]
            updated=f.get("app_updated", []),  # type: ignore[arg-type]
        )
    return si.NodeResponse(
        rejected=f.get("node_rejected", []),  # type: ignore[arg-type]
        accepted=f.get("node_accepted", []),  # type: ignore[arg-type]
    )


class Proposal(msgspec.Struct, gc=False):
    """A read-only scheduling decision: allocate one of ``ask`` on ``node``."""

    application: Application
    ask: Ask
    node: Node
    reserve: bool = False  # reserve the node for the ask instead of allocating
    replace: Allocation | None = None  # the placeholder the (real) ask takes the place of

    def __repr__(self) -> str:
        what = "reserve" if self.reserve else "replace" if self.replace else "allocate"
        return f"<Proposal {what} {self.ask!r} on {self.node.node_id}>"


_SCHEDULABLE_STATES = frozenset(
    {AppState.ACCEPTED, AppState.STARTING, AppState.RUNNING, AppState.COMPLETING}
)
_COMPLETABLE_STATES = frozenset({AppState.ACCEPTED, AppState.STARTING, AppState.RUNNING})
# What YuniKorn counts as a running application (``maxapplications``).
_RUNNING_STATES = frozenset({AppState.STARTING, AppState.RUNNING})


class Partition:
    """The state of one partition; see the module docstring for who may call what."""

    def __init__(
        self,
        config: PartitionConfig,
        *,
        rm_id: str,
        clock: Callable[[], float],
        timers: TimerPort,
        timeouts: Timeouts | None = None,
    ) -> None:
        self.name = config.name
        self.rm_id = rm_id
        self.clock = clock
        self.timers = timers
        self.timeouts = timeouts or Timeouts()
        self.outbox = Outbox()
        self.config = config
        self.root = Queue("root", leaf=False)
        self.queues: dict[str, Queue] = {"root": self.root}
        self.nodes: dict[str, Node] = {}
        self.index = NodeIndex(
            config.node_sort_policy.type or "fair", config.node_sort_policy.resource_weights
        )
        self.applications: dict[str, Application] = {}
        self.terminated: dict[str, Application] = {}
        self.schedule_pending = False
        self.total_allocations = 0
        # With an RM that checks predicates: the one proposal waiting for the RM's answer,
        # and the nodes the RM refused per ask (forgotten when anything else changes).
        self.use_predicates = False
        self.awaiting: Proposal | None = None
        self.refused: dict[int, set[str]] = {}
        # Reserved nodes by node id (creation order), and the earliest time a young ask that
        # found no room may reserve (a pass sets it; a timer wakes the partition then).
        self.reservations: dict[str, Reservation] = {}
        self._reserve_due: float | None = None
        self._no_reserve: set[tuple[tuple[str, int], ...]] = set()  # sizes no node can hold
        self._seq = 0
        # Hooks the actor layer sets to follow queues and applications coming and going.
        self.on_queue_added: Callable[[Queue], None] = lambda q: None
        self.on_queue_removed: Callable[[Queue], None] = lambda q: None
        self.on_app_removed: Callable[[Application], None] = lambda a: None
        self.log = logger.bind(partition=self.name)
        self.apply_config(config)

    # ==================================================================== configuration
    def check_config(self, config: PartitionConfig) -> None:
        """Raise ``SchedulerError`` if ``config`` cannot replace the live one."""
        paths = queue_paths(config)
        for path, queue in self.queues.items():
            new = paths.get(path)
            if new is not None and queue.leaf and queue.applications and not new.is_leaf:
                raise SchedulerError(
                    f"partition {self.name}: queue {path} has applications and cannot "
                    "become a parent queue"
                )
        policy = config.node_sort_policy.type or "fair"
        if policy not in NodeIndex.POLICIES:
            raise SchedulerError(f"partition {self.name}: unknown node sort policy {policy!r}")

    def apply_config(self, config: PartitionConfig) -> None:
        self.config = config
        self._configure_queue(self.root, config.queue)
        paths = queue_paths(config)
        for path, queue in list(self.queues.items()):
            if path not in paths and not queue.dynamic and queue is not self.root:
                queue.status = QueueStatus.DRAINING
                self._remove_queue_if_empty(queue)
        weights = config.node_sort_policy.resource_weights or None
        policy = config.node_sort_policy.type or "fair"
        if policy != self.index.policy or (weights and weights != self.index.weights):
            index = NodeIndex(policy, weights)
            for node in self.nodes.values():
                if node.schedulable and node.reserved is None:
                    index.add(node)
            self.index = index
        self._wake()

    def _configure_queue(self, queue: Queue, conf: QueueConfig) -> None:
        queue.dynamic = False
        queue.status = QueueStatus.ACTIVE
        queue.configure(
            max_resources=conf.max_resources,
            guaranteed=conf.guaranteed,
            properties=conf.properties,
            submit_acl=conf.submit_acl,
            admin_acl=conf.admin_acl,
            max_applications=conf.max_applications,
        )
        for child_conf in conf.queues:
            child = queue.children.get(child_conf.name)
            if child is None:
                child = Queue(child_conf.name, queue, leaf=child_conf.is_leaf)
                self.queues[child.path] = child
                self.on_queue_added(child)
            child.leaf = child_conf.is_leaf
            self._configure_queue(child, child_conf)

    # ============================================================================ nodes
    def update_nodes(self, updates: Iterable[NodeUpdate]) -> None:
        for update in updates:
            action = update.action
            if action == si.ActionFromRM.CREATE:
                self._add_node(update)
            elif update.node_id not in self.nodes:
                self.log.warning("node update for unknown node {}", update.node_id)
                self._event(
                    si.EventRecordType.NODE,
                    update.node_id,
                    "NodeNotFound",
                    f"{action.name} for unknown node {update.node_id}",
                )
            elif action == si.ActionFromRM.UPDATE:
                self._update_node(self.nodes[update.node_id], update)
            elif action == si.ActionFromRM.DRAIN_NODE:
                self._set_schedulable(self.nodes[update.node_id], False)
            elif action == si.ActionFromRM.DRAIN_TO_SCHEDULABLE:
                self._set_schedulable(self.nodes[update.node_id], True)
            elif action == si.ActionFromRM.DECOMISSION:
                self._remove_node(self.nodes[update.node_id])

    def _add_node(self, update: NodeUpdate) -> None:
        node_id = update.node_id
        if node_id in self.nodes:
            self._reject_node(node_id, f"node {node_id} already exists in partition {self.name}")
            return
        node = Node(
            node_id, dict(update.capacity or {}), dict(update.occupied or {}), update.attributes
        )
        problem = self._check_existing(update.existing, node)
        if problem:
            self._reject_node(node_id, problem)
            return
        self.nodes[node_id] = node
        self.index.add(node)
        for spec in update.existing:
            self._recover_allocation(spec, node)
        self.index.update(node)
        self.outbox.add("node_accepted", si.AcceptedNode(node_id=node_id))
        self._event(
            si.EventRecordType.NODE,
            node_id,
            "NodeAdded",
            f"node {node_id} added to partition {self.name}",
        )
        self._wake()

    def _reject_node(self, node_id: str, reason: str) -> None:
        self.log.info("node {} rejected: {}", node_id, reason)
        self.outbox.add("node_rejected", si.RejectedNode(node_id=node_id, reason=reason))

    def _check_existing(self, existing: tuple[AllocationSpec, ...], node: Node) -> str:
        seen: set[str] = set()
        for spec in existing:
            app = self.applications.get(spec.application_id)
            if app is None or app.queue is None:
                return (
                    f"existing allocation {spec.uuid} names application "
                    f"{spec.application_id}, which is not in partition {self.name}"
                )
            if spec.uuid in seen or spec.uuid in app.allocations:
                return f"existing allocation {spec.uuid} is already allocated"
            seen.add(spec.uuid)
        return ""

    def _recover_allocation(self, spec: AllocationSpec, node: Node) -> None:
        app = self.applications[spec.application_id]
        alloc = Allocation(
            uuid=spec.uuid,
            allocation_key=spec.allocation_key,
            application_id=spec.application_id,
            partition=self.name,
            node_id=node.node_id,
            resource=dict(spec.resource),
            priority=spec.priority,
            tags=spec.tags,
            task_group_name=spec.task_group_name,
            placeholder=spec.placeholder,
            request_time=self.clock(),
            allocation_time=self.clock(),
        )
        node.add_allocation(alloc)
        app.add_allocation(alloc)
        assert app.queue is not None
        app.queue.add_allocated(alloc.resource)
        if app.state is AppState.NEW:
            self.transition(app, AppEvent.RUN)
        if alloc.placeholder:
            # It has no ask to count it.
            app.task_group(alloc.task_group_name, alloc.resource).count += 1
            self._placeholder_placed(app, alloc)
        else:
            self.transition(app, AppEvent.RUN)

    def _update_node(self, node: Node, update: NodeUpdate) -> None:
        if update.capacity is not None:
            node.capacity = dict(update.capacity)
        if update.occupied is not None:
            node.occupied = dict(update.occupied)
        if update.attributes is not None:
            node.attributes = dict(update.attributes)
        node.refresh_available()
        self.index.refresh(node)
        self._wake()

    def _set_schedulable(self, node: Node, schedulable: bool) -> None:
        node.schedulable = schedulable
        if schedulable:
            if node.reserved is None:
                self.index.add(node)
            self._wake()
        else:
            if node.reserved is not None:
                self._unreserve(node.reserved)
            self.index.discard(node)

    def _remove_node(self, node: Node) -> None:
        if node.reserved is not None:
            self._unreserve(node.reserved)
        self.index.discard(node)
        del self.nodes[node.node_id]
        for alloc in list(node.allocations.values()):
            node.remove_allocation(alloc.uuid)
            app = self.applications.get(alloc.application_id)
            if app is not None:
                self._drop_allocation(app, alloc)
            self._report_release(alloc, si.TerminationType.STOPPED_BY_RM, "node removed")
            if app is not None:
                self._maybe_complete(app)
            self._wake()  # the queues have quota back
        self._event(
            si.EventRecordType.NODE,
            node.node_id,
            "NodeRemoved",
            f"node {node.node_id} removed from partition {self.name}",
        )

    # ===================================================================== applications
    def add_application(self, spec: AppSpec) -> Application | None:
        """Place and accept an application; ``None`` (and a rejection) when it cannot be."""
        app_id = spec.application_id
        if app_id in self.applications:
            self.outbox.add(
                "app_rejected",
                si.RejectedApplication(
                    application_id=app_id, reason=f"application {app_id} already exists"
                ),
            )
            return None
        self._seq += 1
        now = self.clock()
        app = Application(
            application_id=app_id,
            partition=self.name,
            queue_name=spec.queue_name,
            user=spec.user,
            groups=list(spec.groups),
            tags=spec.tags,
            submit_time=now,
            submit_seq=self._seq,
            placeholder_ask=spec.placeholder_ask,
            gang_scheduling_style=spec.gang_scheduling_style,
            execution_timeout_ms=spec.execution_timeout_ms,
        )
        queue, reason = self._place(app)
        if queue is not None:
            reason = _gang_problem(app, queue)
            if reason:
                self._queue_emptied(queue)  # a dynamic queue made for it goes again
                queue = None
        if queue is None:
            self.terminated.pop(app_id, None)
            self.terminated[app_id] = app
            app.rejected_message = reason
            self.outbox.add(
                "app_rejected", si.RejectedApplication(application_id=app_id, reason=reason)
            )
            self.transition(app, AppEvent.REJECT, reason)
            return None
        self.terminated.pop(app_id, None)
        queue.add_application(app)
        self.applications[app_id] = app
        self.timers.cancel(f"queue:{queue.path}")
        self.outbox.add("app_accepted", si.AcceptedApplication(application_id=app_id))
        self._event(
            si.EventRecordType.APP,
            app_id,
            "ApplicationAdded",
            f"application {app_id} added to queue {queue.path}",
            group=queue.path,
        )
        return app

    def remove_application(self, app_id: str) -> None:
        app = self.applications.get(app_id)
        if app is None:
            self.log.warning("remove of unknown application {}", app_id)
            return
        for key in list(app.asks):
            self._remove_ask(app, key)
        for alloc in list(app.allocations.values()):
            self._release(app, alloc, si.TerminationType.STOPPED_BY_RM, "application removed")
        while app.state not in (AppState.COMPLETED, AppState.FAILED, AppState.REJECTED):
            event = AppEvent.FAIL if app.state is AppState.FAILING else AppEvent.COMPLETE
            if app.state is AppState.RESUMING:
                self.transition(app, AppEvent.RUN)
                continue
            self.transition(app, event, "application removed by the RM")

    def _place(self, app: Application) -> tuple[Queue | None, str]:
        rules = self.config.placement_rules
        if not rules:
            return self._place_in(app, _qualify(app.queue_name), create=False)
        for rule in rules:
            path, create = self._apply_rule(rule, app)
            if path is None:
                continue
            if path == "":
                return None, "application rejected by placement rule"
            return self._place_in(app, path, create)
        return None, f"no placement rule placed application {app.application_id}"

    def _apply_rule(self, rule: PlacementRule, app: Application) -> tuple[str | None, bool]:
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
            parent, _ = self._apply_rule(rule.parent, app)
            if not parent:
                return None, False
            return f"{_qualify(parent)}.{leaf}", rule.create
        return f"root.{leaf}", rule.create

    def _place_in(self, app: Application, path: str, create: bool) -> tuple[Queue | None, str]:
        queue = self.queues.get(path)
        if queue is None and create:
            queue = self._create_dynamic(path)
        if queue is None:
            return None, f"queue {path} does not exist in partition {self.name}"
        if not queue.leaf:
            return None, f"queue {path} is not a leaf queue"
        if queue.status is not QueueStatus.ACTIVE:
            return None, f"queue {path} is {queue.status} and takes no applications"
        if not _acl_allows(queue, app.user, app.groups):
            return None, f"user {app.user!r} may not submit to queue {path}"
        return queue, ""

    def _create_dynamic(self, path: str) -> Queue | None:
        parts = path.split(".")
        if parts[0] != "root" or len(parts) < 2 or not all(parts):
            return None
        parent = self.root
        for i, part in enumerate(parts[1:], start=1):
            child = parent.children.get(part)
            if child is None:
                if parent.leaf:
                    return None
                child = Queue(part, parent, leaf=i == len(parts) - 1, dynamic=True)
                child.configure(max_resources={}, guaranteed={}, properties={})
                self.queues[child.path] = child
                self.on_queue_added(child)
            parent = child
        return parent

    def _remove_queue_if_empty(self, queue: Queue) -> None:
        while (
            queue is not self.root
            and queue.is_empty()
            and not queue.pending
            and (queue.dynamic or queue.status is QueueStatus.DRAINING)
        ):
            parent = queue.parent
            assert parent is not None
            del parent.children[queue.name]
            parent.pending_children.pop(queue.name, None)
            del self.queues[queue.path]
            self.timers.cancel(f"queue:{queue.path}")
            self.on_queue_removed(queue)
            queue = parent

    def on_queue_timer(self, msg: QueueTimer) -> None:
        queue = self.queues.get(msg.path)
        if queue is not None:
            self._remove_queue_if_empty(queue)

    # ============================================================================= asks
    def update_asks(self, app: Application, asks: Iterable[Ask]) -> None:
        """Add or replace asks; the partition owns the ``Ask`` values from now on."""
        if app.terminated or app.queue is None or app.state is AppState.FAILING:
            for ask in asks:
                self._reject_ask(ask, f"application {app.application_id} is {app.state}")
            return
        added = False
        delta: Res = {}
        now = self.clock()
        seq = self._seq
        for ask in asks:
            if app.reservations:
                old = app.asks.get(ask.allocation_key)
                if old is not None:
                    self._unreserve_ask(app, old)
            seq += 1
            ask.seq = seq
            ask.created = now
            ask.pending = ask.max_allocations
            app.add_ask(ask, delta)
            added = True
        self._seq = seq
        if delta:
            app.apply_pending(delta)
            app.queue.add_pending(delta)
        if app.reservations and app.placeholders_wanted:
            # Real asks of a task group wait for the placeholders: they hold no node meanwhile.
            for reservation in list(app.reservations.values()):
                held = reservation.ask
                if held.task_group_name in app.task_groups and not (
                    held.placeholder or held.no_replace
                ):
                    self._unreserve(reservation)
        if added:
            if app.state in (AppState.NEW, AppState.COMPLETING):
                self.transition(app, AppEvent.RUN)
            self._wake()

    def _reject_ask(self, spec: Ask, reason: str) -> None:
        self.outbox.add(
            "rejected",
            si.RejectedAllocationAsk(
                allocation_key=spec.allocation_key,
                application_id=spec.application_id,
                reason=reason,
            ),
        )

    def release_asks(self, app: Application, keys: Iterable[str], message: str = "") -> None:
        keys = list(keys) or list(app.asks)
        for key in keys:
            self._remove_ask(app, key)
        self._maybe_complete(app)

    def _remove_ask(self, app: Application, key: str) -> None:
        ask = app.asks.get(key)
        if ask is not None and app.reservations:
            self._unreserve_ask(app, ask)
        placing = app.placeholders_wanted
        delta = app.remove_ask(key)
        if delta and app.queue is not None:
            app.queue.add_pending(delta)
        if placing and not app.placeholders_wanted:
            self._wake()  # real asks that waited for the placeholders may go now
            if app.gang_held:
                self._gang_release_hold(app)  # nothing left to place: the hold goes

    # ====================================================================== allocations
    def release_allocations(self, app: Application, releases: Iterable[AllocationReleased]) -> None:
        for rel in releases:
            if not rel.uuid:
                for each in list(app.allocations.values()):
                    self._release(app, each, rel.termination, rel.message)
                continue
            alloc = app.allocations.get(rel.uuid)
            if alloc is None:
                self.log.warning(
                    "release of unknown allocation {} of {}", rel.uuid, app.application_id
                )
                continue
            self._release(app, alloc, rel.termination, rel.message)
        self._maybe_complete(app)

    def _release(
        self, app: Application, alloc: Allocation, termination: si.TerminationType, message: str
    ) -> None:
        """Take an allocation away and confirm the release to the RM."""
        if (
            termination is si.TerminationType.PLACEHOLDER_REPLACED
            and alloc.release_pending is termination
            and alloc.uuid in app.replacing
        ):
            self._complete_replacement(app, app.replacing[alloc.uuid])
            return
        node = self.nodes.get(alloc.node_id)
        if node is not None:
            node.remove_allocation(alloc.uuid)
            self.index.update(node)
        self._drop_allocation(app, alloc)
        if alloc.release_pending != termination:  # not the RM confirming our own release
            self._report_release(alloc, termination, message)
        self._wake()

    def _report_release(
        self, alloc: Allocation, termination: si.TerminationType, message: str
    ) -> None:
        self.outbox.add(
            "released",
            si.AllocationRelease(
                partition_name=self.name,
                application_id=alloc.application_id,
                uuid=alloc.uuid,
                termination_type=termination,
                message=message,
                allocation_key=alloc.allocation_key,
            ),
        )

    def _drop_allocation(self, app: Application, alloc: Allocation) -> None:
        if app.remove_allocation(alloc.uuid) is None:
            return
        if app.queue is not None:
            app.queue.remove_allocated(alloc.resource)
        if alloc.placeholder:
            self._placeholder_dropped(app, alloc)

    def _maybe_complete(self, app: Application) -> None:
        if app.is_idle and app.state in _COMPLETABLE_STATES:
            self.transition(app, AppEvent.COMPLETE)
        elif app.state is AppState.FAILING and not app.allocations:
            self.transition(app, AppEvent.FAIL, "all placeholders released")

    # ======================================================================= scheduling
    def _wake(self) -> None:
        """Something changed that may make an allocation possible."""
        self.schedule_pending = True
        if self.refused:
            self.refused = {}

    def propose_checked(self) -> Proposal | None:
        """The next proposal for the RM's predicates; ``None`` while one is out."""
        if self.awaiting is not None:
            return None
        self.schedule_pending = False
        skip: set[int] = set()
        proposal = self.propose(skip)
        while proposal is not None and proposal.replace is not None:
            # A replacement needs no predicates: the RM has its say in the handshake.
            if not self._start_replacement(proposal):
                skip.add(id(proposal.ask))
            proposal = self.propose(skip)
        self.awaiting = proposal
        return proposal

    def on_predicates_checked(self, allowed: bool) -> Allocation | None:
        """The RM's answer for the proposal ``awaiting``: commit it, or try another node."""
        proposal, self.awaiting = self.awaiting, None
        self.schedule_pending = True
        if proposal is None:
            return None
        if allowed:
            alloc = self.commit(proposal)
            if alloc is not None:
                self.total_allocations += 1
            return alloc
        self.refused.setdefault(id(proposal.ask), set()).add(proposal.node.node_id)
        return None

    def schedule(self, limit: int = 10_000) -> int:
        """Allocate until nothing more fits or ``limit`` allocations were made this pass.

        Each allocation is a read-only proposal followed by a commit that re-checks it. An
        ask that found no room is not tried again in the same pass (nothing frees up
        during a pass), nor is any other ask of the same size without a node constraint.
        """
        self.schedule_pending = False
        self._no_reserve = set()
        made = 0
        skip: set[int] = set()
        no_node: set[tuple[tuple[str, int], ...]] = set()
        while made < limit:
            proposal = self.propose(skip, no_node)
            if proposal is None:
                break
            if proposal.reserve:
                self.commit_reservation(proposal)
                skip.add(id(proposal.ask))
            elif self.commit(proposal) is not None:
                made += 1
            else:
                skip.add(id(proposal.ask))
        else:
            self.schedule_pending = True  # more may fit: continue after the mailboxes drain
        self.total_allocations += made
        self._arm_reservation_timer()
        return made

    def propose(
        self,
        skip: set[int] | None = None,
        no_node: set[tuple[tuple[str, int], ...]] | None = None,
    ) -> Proposal | None:
        """The next allocation to make, computed without changing anything.

        ``skip`` (ask ids) and ``no_node`` (ask sizes no node has room for) carry what a
        pass already learned; they are filled in as asks fail.
        """
        if not self.root.pending:
            return None
        skip = set() if skip is None else skip
        if self.reservations:
            proposal = self._propose_reserved(skip)
            if proposal is not None:
                return proposal
        if not self.index and not self._free_placeholders():
            return None  # no free node; a replacement needs none, though
        return self._propose_in(self.root, skip, set() if no_node is None else no_node)

    def _free_placeholders(self) -> bool:
        return any(
            group.free
            for app in self.applications.values()
            if app.task_groups
            for group in app.task_groups.values()
        )

    def _propose_in(
        self, queue: Queue, skip: set[int], no_node: set[tuple[tuple[str, int], ...]]
    ) -> Proposal | None:
        for child in queue.sorted_children():
            if child.leaf:
                proposal = self._propose_in_leaf(child, skip, no_node)
            else:
                proposal = self._propose_in(child, skip, no_node)
            if proposal is not None:
                return proposal
        return None

    def _propose_in_leaf(
        self, queue: Queue, skip: set[int], no_node: set[tuple[tuple[str, int], ...]]
    ) -> Proposal | None:
        limited = bool(queue.limited_chain)
        app_limited = bool(queue.app_limited_chain)
        for app in queue.sorted_applications():
            if app.state not in _SCHEDULABLE_STATES:
                continue
            if app_limited and app.state is AppState.ACCEPTED and not queue.can_run_another_app():
                continue  # maxapplications: it waits until a running application finishes
            if (
                limited
                and app.placeholder_ask
                and not app.gang_started
                and not self._gang_fits(queue, app)
            ):
                continue  # a gang starts only when its whole placeholder total fits
            for ask in app.pending_asks.in_order():
                if skip and id(ask) in skip:
                    continue
                if ask.task_group_name and app.task_groups and not ask.placeholder:
                    step = self._gang_step(app, ask)
                    if step is True:
                        skip.add(id(ask))  # real asks wait until the gang is placed
                        continue
                    if isinstance(step, Proposal):
                        return step
                res = ask.resource
                if limited and not queue.headroom_fits(res):
                    skip.add(id(ask))
                    continue
                if ask.required_node:
                    node = self._required_node(ask)
                    if node is not None:
                        return Proposal(app, ask, node)
                    skip.add(id(ask))
                    continue
                refused = self.refused.get(id(ask)) if self.refused else None
                if refused:
                    node = self.index.first_fit(res, refused)
                    if node is not None:
                        return Proposal(app, ask, node)
                    skip.add(id(ask))
                    continue
                size = ask.size
                if not (no_node and size in no_node):
                    node = self.index.first_fit(res)
                    if node is not None:
                        return Proposal(app, ask, node)
                    no_node.add(size)
                node = self._node_to_reserve(app, ask)
                if node is not None:
                    return Proposal(app, ask, node, reserve=True)
                skip.add(id(ask))
        return None

    def _required_node(self, ask: Ask) -> Node | None:
        node = self.nodes.get(ask.required_node)
        if (
            node is not None
            and node.schedulable
            and (node.reserved is None or node.reserved.ask is ask)
            and fits(ask.resource, node.available)
        ):
            return node
        return None

    # ====================================================================== reservations
    def _propose_reserved(self, skip: set[int]) -> Proposal | None:
        """An allocation for a reserved ask: on its node if it fits now, or on any other."""
        for reservation in self.reservations.values():
            ask = reservation.ask
            if id(ask) in skip:
                continue
            app = self.applications.get(reservation.application_id)
            queue = app.queue if app is not None else None
            if app is None or queue is None or app.state not in _SCHEDULABLE_STATES:
                continue
            if ask.task_group_name and app.task_groups and not ask.placeholder:
                step = self._gang_step(app, ask)
                if step is True:
                    continue
                if isinstance(step, Proposal):
                    return step
            res = ask.resource
            if queue.limited_chain and not queue.headroom_fits(res):
                continue
            if fits(res, reservation.node.available):
                return Proposal(app, ask, reservation.node)
            other = self.index.first_fit(res)
            if other is not None:
                return Proposal(app, ask, other)
            skip.add(id(ask))
        return None

    def _node_to_reserve(self, app: Application, ask: Ask) -> Node | None:
        """The free node that comes closest to fitting ``ask``, if the ask may reserve one.

        An ask may reserve once it has waited ``reservation_delay`` and has fewer
        reservations than pending allocations; the node must be able to hold it at all
        (its capacity fits). Closest: the smallest sum of missing fractions (YuniKorn's
        fit-in score). A younger ask leaves a wake-up time for the pass's timer.
        """
        if self.use_predicates or ask.required_node:
            return None
        due = ask.created + self.timeouts.reservation_delay
        if self.clock() < due:
            if self._reserve_due is None or due < self._reserve_due:
                self._reserve_due = due
            return None
        if ask.size in self._no_reserve or len(app.reservations_of(ask)) >= ask.pending:
            return None
        best: Node | None = None
        best_score = 0.0
        items = ask.size
        for node in self.index.nodes():
            capacity = node.capacity
            available = node.available
            score = 0.0
            for name, v in items:
                if v > capacity.get(name, 0):
                    break
                free = available.get(name, 0)
                if free < v:
                    score += (v - free) / v
            else:
                if best is None or score < best_score:
                    best, best_score = node, score
        if best is None:
            self._no_reserve.add(items)
        return best

    def commit_reservation(self, proposal: Proposal) -> Reservation | None:
        """Re-check and reserve ``proposal.node`` for its ask, or drop the proposal."""
        app, ask, node = proposal.application, proposal.ask, proposal.node
        if (
            node.reserved is not None
            or not node.schedulable
            or self.nodes.get(node.node_id) is not node
            or app.asks.get(ask.allocation_key) is not ask
            or self.applications.get(app.application_id) is not app
            or len(app.reservations_of(ask)) >= ask.pending
        ):
            return None
        reservation = Reservation(app.application_id, ask, node, self.clock())
        node.reserved = reservation
        app.reservations[node.node_id] = reservation
        self.reservations[node.node_id] = reservation
        self.index.discard(node)
        self._event(
            si.EventRecordType.REQUEST,
            ask.allocation_key,
            "AskReserved",
            f"node {node.node_id} reserved for ask {ask.allocation_key}",
            group=app.application_id,
        )
        return reservation

    def _unreserve(self, reservation: Reservation) -> None:
        node = reservation.node
        node.reserved = None
        self.reservations.pop(node.node_id, None)
        app = self.applications.get(reservation.application_id)
        if app is not None:
            app.reservations.pop(node.node_id, None)
        if node.schedulable and self.nodes.get(node.node_id) is node:
            self.index.add(node)
            self._wake()

    def _unreserve_ask(self, app: Application, ask: Ask) -> None:
        for reservation in app.reservations_of(ask):
            self._unreserve(reservation)

    def _settle_reservations(self, app: Application, ask: Ask, node: Node) -> None:
        """After an allocation of ``ask``: free its node, and reservations it no longer needs."""
        held = app.reservations_of(ask)
        if not held:
            return
        if node.reserved is not None and node.reserved.ask is ask:
            self._unreserve(node.reserved)
            held = app.reservations_of(ask)
        while held and len(held) > ask.pending:
            self._unreserve(held.pop())

    def _arm_reservation_timer(self) -> None:
        due = self._reserve_due
        if due is not None:
            self._reserve_due = None
            self.timers.set(
                "partition:reservation",
                max(0.0, due - self.clock()),
                ReservationDue(),
                to="partition",
            )

    def commit(self, proposal: Proposal) -> Allocation | None:
        """Re-check what the proposal assumed and apply it in one step, or drop it."""
        if proposal.replace is not None:
            self._start_replacement(proposal)
            return None
        app, ask, node = proposal.application, proposal.ask, proposal.node
        queue = app.queue
        res = ask.resource
        if (
            queue is None
            or ask.pending <= 0
            or app.asks.get(ask.allocation_key) is not ask
            or self.applications.get(app.application_id) is not app
            or not node.schedulable
            or self.nodes.get(node.node_id) is not node
            or (node.reserved is not None and node.reserved.ask is not ask)
            or not fits(res, node.available)
            or (queue.limited_chain and not queue.headroom_fits(res))
            or (
                queue.app_limited_chain
                and app.state is AppState.ACCEPTED
                and not queue.can_run_another_app()
            )
        ):
            return None
        alloc = Allocation(
            new_uuid(),
            ask.allocation_key,
            app.application_id,
            self.name,
            node.node_id,
            res,
            ask.priority,
            ask.tags,
            ask.task_group_name,
            ask.placeholder,
            ask.created,
            self.clock(),
        )
        node.add_allocation(alloc)
        self.index.update(node)
        app.allocate_from(ask, alloc)
        queue.allocate(res)
        if app.reservations:
            self._settle_reservations(app, ask, node)
        self.outbox.add("new", alloc.to_si(ask.resource_si()))
        if ask.placeholder:
            self._placeholder_placed(app, alloc)
        elif app.state is not AppState.RUNNING:
            self.transition(app, AppEvent.RUN)
        return alloc

    # ================================================================== gang scheduling
    # The flows of YuniKorn's gang scheduling design: placeholders are placed like normal
    # asks; a real ask of a task group takes the place of one of its placeholders through
    # a release handshake with the RM; placeholders that are not used time out.

    def _gang_step(self, app: Application, ask: Ask) -> Proposal | bool:
        """What a real ask of a task group does now: ``True`` it waits (placeholders are
        still pending), a ``Proposal`` takes a free placeholder's place, ``False`` it is
        scheduled as a normal ask (no placeholder of its group is left for it)."""
        group = app.task_groups.get(ask.task_group_name)
        if group is None or ask.no_replace:
            return False
        if app.placeholders_wanted:
            return True
        for placeholder in group.free.values():
            return Proposal(app, ask, self.nodes[placeholder.node_id], replace=placeholder)
        return False

    def _gang_fits(self, queue: Queue, app: Application) -> bool:
        """The whole placeholder total of ``app`` fits in the free quota of every limited
        queue above it, counting what gangs that are still placing have yet to take."""
        total = app.placeholder_ask
        for q in queue.limited_chain:
            held = q.gang_reserved
            need = {n: v + held.get(n, 0) for n, v in total.items()} if held else total
            if not fits_under_max(need, q.allocated, q.max_resources):
                return False
        return True

    def _gang_release_hold(self, app: Application) -> None:
        held = app.gang_held
        if held and app.queue is not None:
            for q in app.queue.chain:
                sub_into(q.gang_reserved, held)
            self._wake()  # a gang waiting for the quota may start now
        app.gang_held = {}

    def _placeholder_placed(self, app: Application, alloc: Allocation) -> None:
        """A placeholder was allocated (or recovered): track it and move the gang on."""
        app.task_group(alloc.task_group_name, alloc.resource).free[alloc.uuid] = alloc
        queue = app.queue
        if not app.gang_started:
            app.gang_started = True
            if app.placeholder_ask and queue is not None and queue.limited_chain:
                app.gang_held = dict(app.placeholder_ask)
                for q in queue.chain:
                    add_into(q.gang_reserved, app.gang_held)
        held = app.gang_held
        if held and queue is not None:
            taken = {n: min(v, held[n]) for n, v in alloc.resource.items() if held.get(n)}
            sub_into(held, taken)
            for q in queue.chain:
                sub_into(q.gang_reserved, taken)
        if not app.gang_timer:
            app.gang_timer = True
            ms = app.execution_timeout_ms
            self.timers.set(
                f"gang:{app.application_id}",
                ms / 1000 if ms > 0 else self.timeouts.placeholder,
                GangTimer(
                    application_id=app.application_id,
                    submit_seq=app.submit_seq,
                    kind="placeholder",
                ),
                to=f"app:{app.application_id}",
            )
        self._event(
            si.EventRecordType.REQUEST,
            alloc.allocation_key,
            "PlaceholderAllocated",
            f"placeholder {alloc.uuid} of task group {alloc.task_group_name} allocated on "
            f"node {alloc.node_id}",
            group=app.application_id,
        )
        if app.state is AppState.NEW:
            self.transition(app, AppEvent.RUN)
        if app.state is AppState.ACCEPTED and app.placeholders_placed():
            self._gang_release_hold(app)
            self.transition(app, AppEvent.RUN, "all placeholders allocated")
        if not app.placeholders_wanted:
            self._wake()  # real asks that waited for the gang may go now

    def _start_replacement(self, proposal: Proposal) -> bool:
        """Claim placeholder ``proposal.replace`` for a real ask and release it to the RM.

        Nothing is allocated yet: the real allocation is made when the RM confirms the
        release (``_complete_replacement``). A real ask larger than the placeholder cannot
        use it: the placeholder is released with ``TIMEOUT`` and the ask goes on as a
        normal ask.
        """
        app, ask, ph = proposal.application, proposal.ask, proposal.replace
        assert ph is not None
        group = app.task_groups.get(ph.task_group_name)
        if (
            group is None
            or group.free.get(ph.uuid) is not ph
            or ask.pending <= 0
            or app.asks.get(ask.allocation_key) is not ask
            or self.applications.get(app.application_id) is not app
            or app.allocations.get(ph.uuid) is not ph
        ):
            return False
        del group.free[ph.uuid]
        if not fits(ask.resource, ph.resource):
            ask.no_replace = True
            self._time_out_placeholder(group, ph, "cancel placeholder: resource incompatible")
            self._event(
                si.EventRecordType.REQUEST,
                ask.allocation_key,
                "PlaceholderCancelled",
                f"placeholder {ph.uuid} released: ask {ask.allocation_key} "
                f"{_show(ask.resource)} is larger than the placeholder {_show(ph.resource)}",
                group=app.application_id,
            )
            self._wake()
            return True
        ph.release_pending = si.TerminationType.PLACEHOLDER_REPLACED
        app.take_pending(ask)
        if app.queue is not None:
            app.queue.remove_pending(ask.resource)
        if app.reservations:
            self._settle_reservations(app, ask, proposal.node)
        app.replacing[ph.uuid] = Replacement(ph, ask, self.clock())
        self._report_release(
            ph,
            si.TerminationType.PLACEHOLDER_REPLACED,
            f"placeholder replaced by ask {ask.allocation_key}",
        )
        if not app.handshake_timer:
            self._arm_handshake_timer(app, self.timeouts.handshake)
        if ask.pending:
            self._wake()
        return True

    def _complete_replacement(self, app: Application, rep: Replacement) -> None:
        """The RM confirmed the release: the real allocation takes the placeholder's place.

        One update of node, application and queue; a real ask smaller than the placeholder
        gives the difference back. If the application no longer wants the ask, only the
        placeholder goes.
        """
        ph, ask = rep.placeholder, rep.ask
        del app.replacing[ph.uuid]
        node = self.nodes.get(ph.node_id)
        queue = app.queue
        real: Allocation | None = None
        if (
            node is not None
            and not rep.cancelled
            and app.asks.get(ask.allocation_key) is ask
            and app.state is not AppState.FAILING
        ):
            real = Allocation(
                new_uuid(),
                ask.allocation_key,
                app.application_id,
                self.name,
                node.node_id,
                ask.resource,
                ask.priority,
                ask.tags,
                ask.task_group_name,
                False,
                ask.created,
                self.clock(),
            )
        real_before = len(app.allocations) - app.placeholder_count
        same = real is not None and real.resource == ph.resource
        if node is not None:
            if real is not None and same:
                node.swap_allocation(ph.uuid, real)  # same size: node totals stay
            else:
                node.remove_allocation(ph.uuid)
                if real is not None:
                    node.add_allocation(real)
                self.index.update(node)
        app.remove_allocation(ph.uuid)
        if queue is not None and not same:
            queue.remove_allocated(ph.resource)
        group = app.task_groups.get(ph.task_group_name)
        if real is None:
            if group is not None:
                group.timedout += 1
            self._after_placeholders(app)
            self._maybe_complete(app)
            self._wake()
            return
        app.add_allocation(real)
        if queue is not None and not same:
            queue.add_allocated(real.resource)
        if group is not None:
            group.replaced += 1
        self.total_allocations += 1
        self.outbox.add("new", real.to_si(ask.resource_si()))
        self._event(
            si.EventRecordType.REQUEST,
            ask.allocation_key,
            "PlaceholderReplaced",
            f"placeholder {ph.uuid} replaced by allocation {real.uuid} on node {real.node_id}",
            group=app.application_id,
        )
        if app.state in (AppState.ACCEPTED, AppState.COMPLETING) or (
            app.state is AppState.STARTING and real_before
        ):
            self.transition(app, AppEvent.RUN)
        self._after_placeholders(app)
        self._wake()

    def _placeholder_dropped(self, app: Application, alloc: Allocation) -> None:
        """A placeholder went without replacing anything (released, timed out, node gone)."""
        rep = app.replacing.pop(alloc.uuid, None) if app.replacing else None
        if rep is not None:
            # It was being replaced: the real ask wants an allocation again.
            delta = app.give_back_pending(rep.ask)
            if delta and app.queue is not None:
                app.queue.add_pending(delta)
                self._wake()
        group = app.task_groups.get(alloc.task_group_name)
        if group is not None and alloc.release_pending is not si.TerminationType.TIMEOUT:
            group.timedout += 1  # a TIMEOUT release was counted when it was sent
        self._after_placeholders(app)

    def _after_placeholders(self, app: Application) -> None:
        """The states that wait for the last placeholder to go."""
        if app.placeholder_count:
            return
        if app.gang_timer:
            app.gang_timer = False
            self.timers.cancel(f"gang:{app.application_id}")
        if app.state is AppState.RESUMING:
            self.transition(app, AppEvent.RUN, "placeholders released: scheduling normally")
            if app.allocations:  # a replacement completed while it resumed
                self.transition(app, AppEvent.RUN)
        elif app.state is AppState.COMPLETING and app.cleanup_started:
            self.transition(app, AppEvent.COMPLETE, "placeholders released")

    def _release_free_placeholders(self, app: Application, message: str) -> int:
        """Release every placeholder no real ask claimed, with ``TIMEOUT``."""
        released = 0
        for group in app.task_groups.values():
            for ph in group.free.values():
                self._time_out_placeholder(group, ph, message)
                released += 1
            group.free.clear()
        return released

    def _time_out_placeholder(self, group: TaskGroup, ph: Allocation, message: str) -> None:
        """Release placeholder ``ph`` with ``TIMEOUT``; it counts as timed out now, once."""
        ph.release_pending = si.TerminationType.TIMEOUT
        group.timedout += 1
        self._report_release(ph, si.TerminationType.TIMEOUT, message)

    def _release_asks_on_timeout(self, app: Application, real_too: bool) -> int:
        """Release pending placeholder asks (and real ones with ``real_too``), ``TIMEOUT``."""
        in_handshake = {id(r.ask) for r in app.replacing.values()}
        released = 0
        for ask in list(app.asks.values()):
            if not ask.placeholder and not real_too:
                continue
            if ask.pending <= 0 and id(ask) not in in_handshake:
                continue
            if ask.placeholder:
                group = app.task_groups.get(ask.task_group_name)
                if group is not None:
                    group.timedout += ask.pending
            self.outbox.add(
                "released_asks",
                si.AllocationAskRelease(
                    partition_name=self.name,
                    application_id=app.application_id,
                    allocation_key=ask.allocation_key,
                    termination_type=si.TerminationType.TIMEOUT,
                    message="releasing placeholder asks on placeholder timeout",
                ),
            )
            self._remove_ask(app, ask.allocation_key)
            released += 1
        return released

    def on_gang_timer(self, msg: GangTimer) -> None:
        app = self.applications.get(msg.application_id)
        if app is None or app.submit_seq != msg.submit_seq:
            return
        if msg.kind == "placeholder":
            if app.gang_timer:
                app.gang_timer = False
                self._placeholder_timeout(app)
            return
        # The handshake bound: report every release that has waited too long, and wait
        # for the next one that may.
        app.handshake_timer = False
        bound = self.timeouts.handshake
        now = self.clock()
        next_due: float | None = None
        for uuid, rep in app.replacing.items():
            if rep.overdue:
                continue
            due = rep.started + bound
            if due > now:
                next_due = due if next_due is None else min(next_due, due)
                continue
            rep.overdue = True
            self.log.warning(
                "application {}: the RM has not confirmed the release of placeholder {} after {}s",
                app.application_id,
                uuid,
                bound,
            )
            self._event(
                si.EventRecordType.REQUEST,
                rep.ask.allocation_key,
                "PlaceholderReleaseOverdue",
                f"placeholder {uuid} is still waiting for the RM to confirm its release "
                f"after {bound:g}s; ask {rep.ask.allocation_key} takes its place once it does",
                group=app.application_id,
            )
        if next_due is not None:
            self._arm_handshake_timer(app, next_due - now)

    def _arm_handshake_timer(self, app: Application, delay: float) -> None:
        """One timer per application watches the bound of all its open handshakes."""
        app.handshake_timer = True
        self.timers.set(
            f"handshake:{app.application_id}",
            delay,
            GangTimer(
                application_id=app.application_id, submit_seq=app.submit_seq, kind="handshake"
            ),
            to=f"app:{app.application_id}",
        )

    def _placeholder_timeout(self, app: Application) -> None:
        """The placeholder timeout ran out (YuniKorn's ``timeoutPlaceholderProcessing``).

        An application that got all its placeholders only loses the unused ones. One still
        placing them gives up: ``Hard`` fails, ``Soft`` resumes as a normal application.
        The releases go out in one response, before the state change.
        """
        state = app.state
        if state in (AppState.STARTING, AppState.RUNNING, AppState.COMPLETING):
            self._gang_release_hold(app)
            asks = self._release_asks_on_timeout(app, real_too=False)
            released = self._release_free_placeholders(
                app, "releasing allocated placeholders on placeholder timeout"
            )
            self._gang_timeout_event(app, released, asks)
            return
        if state not in (AppState.NEW, AppState.ACCEPTED):
            return
        hard = app.gang_scheduling_style == "Hard"
        asks = self._release_asks_on_timeout(app, real_too=hard)
        released = self._release_free_placeholders(
            app, "releasing allocated placeholders on placeholder timeout"
        )
        if hard:
            for rep in app.replacing.values():
                rep.cancelled = True
        self._gang_release_hold(app)
        self._gang_timeout_event(app, released, asks)
        self.transition(
            app, AppEvent.FAIL if hard else AppEvent.RESUME, "ResourceReservationTimeout"
        )
        self._after_placeholders(app)
        self._maybe_complete(app)

    def _gang_timeout_event(self, app: Application, released: int, asks: int) -> None:
        self._event(
            si.EventRecordType.APP,
            app.application_id,
            "PlaceholderTimeout",
            f"placeholder timeout of application {app.application_id}: {released} "
            f"placeholders and {asks} asks released",
            group=app.queue_name,
        )

    # ============================================================================ state
    def transition(self, app: Application, event: AppEvent, message: str = "") -> None:
        """Fire ``event`` on ``app`` and carry out what entering the new state means."""
        old = app.state
        new = app.fire(event, self.clock())
        if new is old:
            return
        if old is AppState.COMPLETING:
            app.cleanup_started = False
        was_running, is_running = old in _RUNNING_STATES, new in _RUNNING_STATES
        if was_running != is_running and app.queue is not None:
            app.queue.count_running(1 if is_running else -1)
            if was_running and app.queue.app_limited_chain:
                self._wake()  # an application waiting for maxapplications may start now
        self.log.debug("application {} {} -> {}", app.application_id, old, new)
        now = self.clock()
        self.outbox.add(
            "app_updated",
            si.UpdatedApplication(
                application_id=app.application_id,
                state=str(new),
                state_transition_timestamp=int(now * 1e9),
                message=message,
            ),
        )
        self._event(
            si.EventRecordType.APP,
            app.application_id,
            str(new),
            message or f"application {app.application_id} is {new}",
            group=app.queue_name,
        )
        key = f"app:{app.application_id}"
        self.timers.cancel(key)
        delay, timer_event = _STATE_TIMERS.get(new, (None, None))
        if timer_event is not None:
            delay = getattr(self.timeouts, delay)  # type: ignore[arg-type]
            self.timers.set(
                key,
                delay,
                AppTimer(application_id=app.application_id, event=timer_event, state=str(new)),
                to=key,
            )
        if new in (AppState.COMPLETED, AppState.FAILED):
            self._leave_queue(app)
        elif new is AppState.EXPIRED:
            self.terminated.pop(app.application_id, None)
            self.timers.cancel(key)
            self.on_app_removed(app)

    def _leave_queue(self, app: Application) -> None:
        for reservation in list(app.reservations.values()):
            self._unreserve(reservation)
        for key in list(app.asks):
            self._remove_ask(app, key)
        self._gang_release_hold(app)
        self.timers.cancel(f"gang:{app.application_id}")
        self.timers.cancel(f"handshake:{app.application_id}")
        queue = app.queue
        if queue is not None:
            queue.remove_application(app)
            self._queue_emptied(queue)
        if self.applications.get(app.application_id) is app:
            del self.applications[app.application_id]
        self.terminated[app.application_id] = app

    def _queue_emptied(self, queue: Queue) -> None:
        """An application left ``queue``: a dynamic queue goes after a while, if empty."""
        if queue.dynamic and queue.is_empty():
            self.timers.set(
                f"queue:{queue.path}",
                self.timeouts.dynamic_queue,
                QueueTimer(path=queue.path),
                to=f"queue:{queue.path}",
            )
        elif queue.status is QueueStatus.DRAINING:
            self._remove_queue_if_empty(queue)

    def on_app_timer(self, msg: AppTimer) -> None:
        app = self.applications.get(msg.application_id) or self.terminated.get(msg.application_id)
        if app is None or str(app.state) != msg.state:
            return
        event = AppEvent(msg.event)
        if app.state is AppState.COMPLETING and app.placeholder_count:
            # Leftover placeholders go first; Completed follows once the RM confirms.
            app.cleanup_started = True
            released = self._release_free_placeholders(
                app, "releasing placeholders on app complete"
            )
            self._gang_timeout_event(app, released, 0)
            return
        if app.can_fire(event):
            self.transition(app, event)

    # =========================================================================== events
    def _event(
        self, kind: si.EventRecordType, object_id: str, reason: str, message: str, group: str = ""
    ) -> None:
        self.outbox.events.append(
            si.EventRecord(
                type=kind,
                object_id=object_id,
                group_id=group,
                reason=reason,
                message=message,
                timestamp_nano=int(self.clock() * 1e9),
            ),
        )

    # ========================================================================= capacity
    def capacity(self) -> tuple[Res, Res]:
        total: Res = {}
        used: Res = {}
        for node in self.nodes.values():
            add_into(total, node.capacity)
            add_into(used, node.allocated)
        return total, used

    def __repr__(self) -> str:
        return (
            f"<Partition {self.name} apps={len(self.applications)} nodes={len(self.nodes)} "
            f"allocations={self.total_allocations}>"
        )


_STATE_TIMERS: dict[AppState, tuple[str, str]] = {
    AppState.STARTING: ("starting", AppEvent.RUN.value),
    AppState.COMPLETING: ("completing", AppEvent.COMPLETE.value),
    AppState.COMPLETED: ("terminated", AppEvent.EXPIRE.value),
    AppState.FAILED: ("terminated", AppEvent.EXPIRE.value),
    AppState.REJECTED: ("terminated", AppEvent.EXPIRE.value),
}


def _qualify(path: str) -> str:
    path = path.strip()
    if path == "root" or path.startswith("root."):
        return path
    return f"root.{path}" if path else "root"


def _gang_problem(app: Application, queue: Queue) -> str:
    """Why a gang application can never run in ``queue`` (empty if it can)."""
    ask = app.placeholder_ask
    if not ask:
        return ""
    if queue.sort_policy == "fair":
        return f"queue {queue.path} sorts applications fair; a gang application needs a fifo queue"
    for q in queue.limited_chain:
        if not fits_under_max(ask, {}, q.max_resources):
            return (
                f"placeholder ask {_show(ask)} is larger than the max {_show(q.max_resources)} "
                f"of queue {q.path}"
            )
    return ""


def _show(res: Res) -> str:
    return "{" + ", ".join(f"{name}: {v}" for name, v in sorted(res.items())) + "}"


def _acl_allows(queue: Queue, user: str, groups: list[str]) -> bool:
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
