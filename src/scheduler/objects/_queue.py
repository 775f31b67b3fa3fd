"""The queue hierarchy: quotas, usage, the order children and applications are tried in,
and what each queue's properties say about preemption."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping
from enum import StrEnum
from operator import neg
from typing import TYPE_CHECKING, Any, Final

from loguru import logger
from sortedcontainers import SortedDict

from scheduler.config._parser import APPLICATION_SORT_POLICY, PREEMPTION_DELAY, PREEMPTION_POLICY
from scheduler.config._properties import (
    DEFAULT_PREEMPTION_DELAY,
    PROPERTY_READERS,
    SORT_POLICIES,
    application_sort_policy,
    preemption_delay,
    preemption_policy,
    read_or_default,
)
from scheduler.objects._application import AppState
from scheduler.objects._pending import Shapes
from scheduler.objects._priority import (
    PrioritySettings,
    app_priority_moved,
    current_priority,
    settings_of,
)
from scheduler.objects._priority import activate as activate_priorities
from scheduler.objects._priority import forget as forget_priorities
from scheduler.objects._resources import Res, add_into, fits_under_max, shares, sub_into

if TYPE_CHECKING:
    from scheduler.config._parser import QueueConfig
    from scheduler.objects._application import Application

__all__ = ["APP_SORT_POLICY", "SORT_POLICIES", "Queue", "QueueStatus"]

APP_SORT_POLICY = APPLICATION_SORT_POLICY

OrderKey = tuple[Any, ...]
# Up to this many children, a child is found in its parent's order by identity, not by key.
_SCAN_BELOW = 32


class QueueStatus(StrEnum):
    ACTIVE = "Active"
    DRAINING = "Draining"
    STOPPED = "Stopped"


# Looked up once: reading an enum member off its class costs a slow attribute lookup.
_STOPPED: Final = QueueStatus.STOPPED


class Queue:
    """One queue: configuration, allocated and pending totals, children or applications."""

    def __init__(
        self,
        name: str,
        parent: Queue | None = None,
        *,
        leaf: bool = True,
        dynamic: bool = False,
    ) -> None:
        self.name = name
        self.parent = parent
        self.path: str = f"{parent.path}.{name}" if parent else name
        self.leaf = leaf
        self.dynamic = dynamic
        self._status = QueueStatus.ACTIVE
        self.max_resources: Res = {}
        self.guaranteed: Res = {}
        self.properties: dict[str, str] = {}
        self.submit_acl = ""
        self.admin_acl = ""
        self.max_applications = 0
        # Applications in Starting or Running below this queue (YuniKorn's runningApps);
        # maxapplications caps it.
        self.running_apps = 0
        self.sort_policy = "fifo"
        self.priority_settings = PrioritySettings()
        # YuniKorn 1.3+'s preemption.policy ("default", "fence" or "disabled") and
        # preemption.delay in seconds: set by ``configure`` (``_read_preemption``).
        self.preemption_policy = "default"
        self.preemption_delay = DEFAULT_PREEMPTION_DELAY
        # Plain submission order: fifo, and no priority in play (the scheduling fast path).
        self.fifo_order = True
        # How this parent orders its children (see ``refresh_order``).
        self.child_key: Callable[[Queue], OrderKey] = _queue_order
        self.children: dict[str, Queue] = {}
        self.applications: dict[str, Application] = {}
        # The applications with pending asks, keyed by submission number, and the same in
        # submission order as a plain list: what scheduling walks (``pending_changed``).
        self.pending_apps: SortedDict = SortedDict()
        self.pending_list: list[Application] = []
        # The children with pending work: what scheduling walks below a parent.
        self.pending_children: dict[str, Queue] = {}
        # A leaf's shapes of pending asks: what the pass reads to skip it as a whole.
        self.shapes = Shapes()
        # Those of them not stopped, in the order scheduling tries them, and their keys
        # (ascending, one per child, in step): kept sorted as children change (see
        # ``sorted_children``). A child whose key may have moved waits in ``_dirty``.
        self._ordered: list[Queue] = []
        self._keys: list[OrderKey] = []
        self._dirty: list[Queue] = []
        self.allocated: Res = {}
        self.pending: Res = {}
        # What gang applications that started placing placeholders below this queue have
        # yet to place: a new gang starts only if its total fits beside it.
        self.gang_reserved: Res = {}
        # The key this queue is filed under in its parent's order (None: not in it), and
        # whether it waits in the parent's ``_dirty`` to be filed again. Root has no parent:
        # it counts as waiting for good, so nothing ever files it.
        self.order_key: OrderKey | None = None
        self.order_dirty = parent is None
        self._parent_dirty: list[Queue] = parent._dirty if parent is not None else []
        # Self first, root last: the chain a usage change or a quota check walks.
        self.chain: tuple[Queue, ...] = (self, *(parent.chain if parent else ()))
        self.root: Queue = self.chain[-1]
        # Priority scheduling (scheduler.objects._priority): set on the root once any ask has a
        # priority other than 0 or a queue an offset; then the caches below are kept.
        self.priorities_active = False
        self.priority_cache: int | None = None
        self.apps_by_priority: list[Application] | None = None
        # Only queues with a max take part in headroom checks (root too, once the partition
        # has nodes: its max is their capacity); likewise maxapplications. The gang rules
        # look at configured maxes only (YuniKorn's GetMaxQueueSet leaves the cluster size
        # out), so they have a chain of their own.
        self.limited_chain: tuple[Queue, ...] = ()
        # Root only: its max (the nodes' capacity) can refuse an ask some node has room
        # for only while a node holds more than its capacity (``PartitionState.overcommitted``);
        # until then root stays out of the chain and the pass pays nothing for it.
        self.capacity_binds = False
        self.max_set_chain: tuple[Queue, ...] = ()
        self.app_limited_chain: tuple[Queue, ...] = ()
        if parent is not None:
            parent.children[name] = self
            parent.leaf = False
        self.refresh_limits()

    @property
    def status(self) -> QueueStatus:
        return self._status

    @status.setter
    def status(self, status: QueueStatus) -> None:
        if status is not self._status:
            self._status = status
            self.order_changed()  # a stopped queue leaves its parent's order

    def configure(
        self,
        *,
        max_resources: Mapping[str, int],
        guaranteed: Mapping[str, int],
        properties: Mapping[str, str],
        submit_acl: str = "",
        admin_acl: str = "",
        max_applications: int = 0,
    ) -> None:
        self.max_resources = dict(max_resources)
        self.guaranteed = dict(guaranteed)
        preemption_before = _preemption_entries(self.properties)
        self.properties = dict(properties)
        self.submit_acl = submit_acl
        self.admin_acl = admin_acl
        self.max_applications = max_applications
        self.sort_policy = self._read_sort_policy()
        _warn_unreadable(self)
        below = _preemption_entries(self.properties) != preemption_before
        _read_preemption(self, with_descendants=below)
        old_settings, self.priority_settings = self.priority_settings, settings_of(self)
        if self.priority_settings.offset:
            activate_priorities(self.root)
        if self.priority_settings != old_settings and self.root.priorities_active:
            forget_priorities(self)
        self.refresh_order()
        self.order_changed()  # its guarantee may have changed
        self.refresh_limits()

    def _read_sort_policy(self) -> str:
        """``application.sort.policy``, inherited; fifo when unset or unreadable (YuniKorn's
        ``UpdateQueueProperties``; parents always sort fair). The queue that sets a value the
        core cannot read logs it (``_warn_unreadable``)."""
        policy = self.inherited_property(APP_SORT_POLICY)
        return read_or_default(application_sort_policy, policy, SORT_POLICIES[0])

    def refresh_order(self) -> None:
        """Choose how applications (leaf) and children (parent) are ordered."""
        by_priority = self.priority_settings.sort and self.root.priorities_active
        self.fifo_order = self.sort_policy == "fifo" and not by_priority
        if not self.root.priorities_active:
            self.child_key = _queue_order
        else:
            self.child_key = (
                _priority_then_fair if self.priority_settings.sort else _fair_then_priority
            )
        self.apps_by_priority = None
        self._refile_children()

    def _refile_children(self) -> None:
        """Key every child again: the way this queue orders them may have changed, and
        keys of two kinds do not compare, so the order starts over."""
        self._ordered = []
        self._keys = []
        for child in self.children.values():
            child.order_key = None
            child.order_changed()

    def order_changed(self) -> None:
        """This queue's key among its siblings may have moved: the parent files it again
        when it is next walked."""
        if not self.order_dirty:
            self.order_dirty = True
            self._parent_dirty.append(self)

    def apply_config(self, conf: QueueConfig) -> None:
        """Take the configured values of ``conf``: the queue is managed and active."""
        self.dynamic = False
        self.status = QueueStatus.ACTIVE
        if self.parent is not None:
            self.leaf = conf.is_leaf
        self.configure(
            # Root's max is the partition's node capacity (``PartitionState.capacity_changed``):
            # never configured (the configuration refuses resources on root, and YuniKorn's
            # ApplyConf skips them).
            max_resources=conf.max_resources if self.parent is not None else self.max_resources,
            guaranteed=conf.guaranteed,
            properties=conf.properties,
            submit_acl=conf.submit_acl,
            admin_acl=conf.admin_acl,
            max_applications=conf.max_applications,
        )

    def removable(self) -> bool:
        """Empty, and either dynamic or draining: it may leave the tree."""
        return (
            self.parent is not None
            and self.is_empty()
            and not self.pending
            and (self.dynamic or self.status is QueueStatus.DRAINING)
        )

    def detach(self) -> None:
        """Leave the parent's children (``removable`` first)."""
        parent = self.parent
        assert parent is not None
        del parent.children[self.name]
        parent.pending_children.pop(self.name, None)
        parent._unfile(self)

    def inherited_property(self, key: str) -> str:
        for queue in self.chain:
            if key in queue.properties:
                return queue.properties[key]
        return ""

    def refresh_limits(self) -> None:
        self.max_set_chain = tuple(q for q in self.chain if q.max_resources and q.parent)
        root = self.chain[-1]
        binds = root.capacity_binds and bool(root.max_resources)
        self.limited_chain = (*self.max_set_chain, root) if binds else self.max_set_chain
        self.app_limited_chain = tuple(q for q in self.chain if q.max_applications > 0)
        for child in self.children.values():
            child.refresh_limits()

    # -- accounting ------------------------------------------------------------------
    # Every change of usage marks the chain to be filed again in its parents' order
    # (``order_changed``, inlined on these paths).
    def add_pending(self, delta: Res) -> None:
        for queue in self.chain:
            pending = queue.pending
            add_into(pending, delta)
            for name in [n for n, v in pending.items() if not v]:
                del pending[name]
            if not queue.order_dirty:
                queue.order_dirty = True
                queue._parent_dirty.append(queue)
            queue._pending_to_parent()

    def remove_pending(self, res: Res) -> None:
        for queue in self.chain:
            sub_into(queue.pending, res)
            if not queue.order_dirty:
                queue.order_dirty = True
                queue._parent_dirty.append(queue)
            if not queue.pending:
                queue._pending_to_parent()

    def _pending_to_parent(self) -> None:
        """Keep the parent's ``pending_children`` in step with this queue's pending work."""
        parent = self.parent
        if parent is not None:
            if self.pending:
                parent.pending_children[self.name] = self
            else:
                parent.pending_children.pop(self.name, None)

    def add_allocated(self, res: Res) -> None:
        for queue in self.chain:
            add_into(queue.allocated, res)
            if not queue.order_dirty:
                queue.order_dirty = True
                queue._parent_dirty.append(queue)

    def remove_allocated(self, res: Res) -> None:
        for queue in self.chain:
            sub_into(queue.allocated, res)
            if not queue.order_dirty:
                queue.order_dirty = True
                queue._parent_dirty.append(queue)

    def allocate(self, res: Res) -> None:
        """One allocation of ``res`` moves from pending to allocated, up the chain."""
        quantities = tuple(res.items())
        for queue in self.chain:
            pending = queue.pending
            allocated = queue.allocated
            for name, v in quantities:
                left = pending.get(name, 0) - v
                if left:
                    pending[name] = left
                else:
                    del pending[name]
                allocated[name] = allocated.get(name, 0) + v
            if not queue.order_dirty:
                queue.order_dirty = True
                queue._parent_dirty.append(queue)
            if not pending:
                queue._pending_to_parent()

    def can_run_another_app(self) -> bool:
        """Room for one more running application here and in every parent."""
        for queue in self.app_limited_chain:
            if queue.running_apps >= queue.max_applications:
                return False
        return True

    def count_running(self, delta: int) -> None:
        for queue in self.chain:
            queue.running_apps += delta

    def headroom_fits(self, res: Res) -> bool:
        """``res`` fits under the max of this queue and of every parent."""
        for queue in self.limited_chain:
            if not fits_under_max(res, queue.allocated, queue.max_resources):
                return False
        return True

    def blocking_queue(self, res: Res) -> Queue | None:
        for queue in self.limited_chain:
            if not fits_under_max(res, queue.allocated, queue.max_resources):
                return queue
        return None

    # -- ordering --------------------------------------------------------------------
    def has_pending(self) -> bool:
        return any(v > 0 for v in self.pending.values())

    def sorted_children(self) -> list[Queue]:
        """Children with pending work, least used relative to their guarantee first.

        A draining queue takes no new applications but still schedules the ones it has;
        only a stopped queue is skipped (YuniKorn's ``sortQueues``). The list is kept
        sorted: only the children whose key may have moved since the last walk are filed
        again (taken out under the key they were filed under, put back under their new
        one). Keys end with the child's name, so no two are equal and the order is the one
        a full sort by ``child_key`` gives. The list is this queue's own: read it, and do
        not hold it across a change of the tree.
        """
        if self._dirty:
            self._refile()
        return self._ordered

    def _refile(self) -> None:
        ordered, keys, key = self._ordered, self._keys, self.child_key
        pending = self.pending_children
        for child in self._dirty:
            child.order_dirty = False
            old = child.order_key
            if pending.get(child.name) is not child or child._status is _STOPPED:
                if old is not None:
                    self._unfile(child)
                continue
            new = key(child)
            child.order_key = new
            if old is not None:
                at = self._position(child, old)
                # Usually the child keeps its place (its neighbours still bracket the new
                # key): then bisecting after taking it out would put it back right there.
                if (at == 0 or keys[at - 1] < new) and (at + 1 == len(keys) or new < keys[at + 1]):
                    keys[at] = new
                    continue
                del ordered[at]
                del keys[at]
            if not keys or keys[-1] < new:  # the most used now: where fair turns send it
                keys.append(new)
                ordered.append(child)
                continue
            at = bisect_left(keys, new)
            keys.insert(at, new)
            ordered.insert(at, child)
        self._dirty.clear()

    def _position(self, child: Queue, old: OrderKey) -> int:
        """Where ``child``, filed under ``old``, stands in the order."""
        ordered = self._ordered
        if len(ordered) <= _SCAN_BELOW:
            return ordered.index(child)  # a few children: identity checks beat key compares
        at = bisect_left(self._keys, old)
        if at >= len(ordered) or ordered[at] is not child:
            at = ordered.index(child)  # a twin key (a removed queue's namesake): look it up
        return at

    def _unfile(self, child: Queue) -> None:
        """Take ``child`` out of the order, if it is in it."""
        old = child.order_key
        if old is None:
            return
        at = self._position(child, old)
        del self._ordered[at]
        del self._keys[at]
        child.order_key = None

    def add_application(self, app: Application) -> None:
        """Take ``app`` into this leaf queue (it sets ``app.queue``)."""
        app.queue = self
        app.queue_name = self.path
        self.applications[app.application_id] = app
        app.pending_asks.shapes_to = self.shapes
        for size, created in app.pending_asks.shapes():
            self.shapes.came(size, created)
        self.shapes.preempting += app.pending_asks.preempting
        self.pending_changed(app)
        if app.pending_asks:
            app_priority_moved(self, app)

    def remove_application(self, app: Application) -> None:
        if self.applications.get(app.application_id) is app:
            del self.applications[app.application_id]
            if app.pending_asks.shapes_to is self.shapes:
                app.pending_asks.shapes_to = None
                for size, _ in app.pending_asks.shapes():
                    self.shapes.gone(size)
                self.shapes.preempting -= app.pending_asks.preempting
            if self._unlist(app):
                app_priority_moved(self, app)

    def pending_changed(self, app: Application) -> None:
        if app.pending_asks:
            seq = app.submit_seq
            pending = self.pending_apps
            if seq not in pending:
                pending[seq] = app
                if self.pending_list and seq < self.pending_list[-1].submit_seq:
                    self.pending_list.insert(pending.index(seq), app)
                else:
                    self.pending_list.append(app)  # the newest: the common case
        else:
            self._unlist(app)

    def _unlist(self, app: Application) -> bool:
        """Take ``app`` out of the pending applications; whether it was in them."""
        pending = self.pending_apps
        seq = app.submit_seq
        if seq not in pending:
            return False
        del self.pending_list[pending.index(seq)]
        del pending[seq]
        return True

    def sorted_applications(self, *, state_filter: bool = True) -> Iterable[Application]:
        """Applications to schedule, in the queue's order (YuniKorn's ``sortApplications``).

        Only applications with pending asks, which ``pending_apps`` holds keyed by submission
        number: plain fifo order is its own, and an application with nothing to ask for
        costs nothing here. ``stateaware`` filters them first (unless ``state_filter`` is
        off: the outstanding-request inspection sees every one, as YuniKorn's does);
        priority, when in play, comes first (see ``scheduler.objects._priority``).
        """
        if self.fifo_order:
            return self.pending_list  # kept in order: nothing built per call
        by_priority = self.priority_settings.sort and self.root.priorities_active
        policy = self.sort_policy
        if policy == "fair":
            return self._fair_order(by_priority)
        if policy == "stateaware":
            apps = self._state_aware() if state_filter else list(self.pending_list)
            if by_priority and len(apps) > 1:
                apps.sort(key=_higher_first)  # stable: submission order within a priority
            return apps
        cached = self.apps_by_priority  # fifo by priority: kept until a priority moves
        if cached is None:
            cached = self.apps_by_priority = sorted(self.pending_list, key=_higher_first)
        return cached

    def _fair_order(self, by_priority: bool) -> list[Application]:
        """Least used first (against the guarantee, else the max); priority first when
        ``by_priority``, else it breaks ties of usage (YuniKorn's fair sorts)."""
        apps = list(self.pending_list)
        if len(apps) > 1:
            guaranteed = self.guaranteed or self.max_resources
            if by_priority:
                apps.sort(
                    key=lambda a: (-a.priority, shares(a.allocated, guaranteed), a.submit_seq)
                )
            else:
                apps.sort(
                    key=lambda a: (shares(a.allocated, guaranteed), -a.priority, a.submit_seq)
                )
        return apps

    def _state_aware(self) -> list[Application]:
        """YuniKorn v1.2's ``stateAwareFilter``: the applications with pending asks that are
        not ``Accepted``, and the oldest ``Accepted`` one only while no application of the
        queue is ``Starting`` (pending asks or not); in submission order."""
        apps: list[Application] = []
        accepted: Application | None = None
        starting = False
        for app in self.pending_list:
            state = app.state
            if state is AppState.ACCEPTED:
                if accepted is None:
                    accepted = app
            else:
                starting = starting or state is AppState.STARTING
                apps.append(app)
        if accepted is None or starting:
            return apps
        if any(a.state is AppState.STARTING for a in self.applications.values()):
            return apps
        apps.append(accepted)
        if len(apps) > 1 and apps[-2].submit_seq > accepted.submit_seq:
            apps.sort(key=_submitted)
        return apps

    def is_empty(self) -> bool:
        return not self.applications and not self.children and not self.allocated

    def __repr__(self) -> str:
        return f"<Queue {self.path} apps={len(self.applications)} allocated={self.allocated}>"


def _warn_unreadable(queue: Queue) -> None:
    """Log each value of the queue's own properties that the core cannot read."""
    for key, value in queue.properties.items():
        reader = PROPERTY_READERS.get(key)
        if reader is None:
            continue
        try:
            reader.read(value)
        except ValueError as exc:
            logger.warning(
                "queue {}: {} {!r} is not valid ({}), using {}",
                queue.path,
                key,
                value,
                exc,
                reader.default,
            )


def _preemption_entries(properties: Mapping[str, str]) -> tuple[str | None, str | None]:
    return properties.get(PREEMPTION_POLICY), properties.get(PREEMPTION_DELAY)


def _read_preemption(queue: Queue, *, with_descendants: bool) -> None:
    """Set ``preemption_policy`` and ``preemption_delay`` of ``queue`` (and, when its own
    entries changed, of every queue below it: they inherit them), parents first."""
    stack = [queue]
    while stack:
        q = stack.pop()
        q.preemption_policy = _preemption_policy(q)
        q.preemption_delay = _preemption_delay(q)
        if with_descendants:
            stack.extend(q.children.values())


def _preemption_policy(queue: Queue) -> str:
    """The queue's own ``preemption.policy`` wins; without one, the parent's counts only if
    it is ``disabled`` (YuniKorn's ``mergeProperties`` and ``filterParentProperty``)."""
    own = queue.properties.get(PREEMPTION_POLICY)
    if own is None:
        parent = queue.parent
        inherited = parent is not None and parent.preemption_policy == "disabled"
        return "disabled" if inherited else "default"
    try:
        return preemption_policy(own)
    except ValueError:
        return "default"


def _preemption_delay(queue: Queue) -> float:
    """The nearest ``preemption.delay`` up the chain, read on a leaf only (YuniKorn's
    ``UpdateQueueProperties``; a parent keeps the default)."""
    text = queue.inherited_property(PREEMPTION_DELAY) if queue.leaf else ""
    if not text:
        return DEFAULT_PREEMPTION_DELAY
    try:
        return preemption_delay(text)
    except ValueError:
        return DEFAULT_PREEMPTION_DELAY


def _queue_order(queue: Queue) -> OrderKey:
    # Lowest usage share first; on a tie the queue with more pending work, then by name.
    # (the pending quantities negated and ascending: largest first). It runs for each
    # queue of the chain on every allocation; two resources are the usual case, for
    # which the pending part is built without a sort (the list ``sorted`` gives), as
    # ``shares`` builds the usage part.
    pending = queue.pending
    if len(pending) == 2:
        first, second = pending.values()
        waiting = [-first, -second] if first >= second else [-second, -first]
    else:
        waiting = sorted(map(neg, pending.values()))
    return (shares(queue.allocated, queue.guaranteed), waiting, queue.name)


def _priority_then_fair(queue: Queue) -> OrderKey:
    # YuniKorn's sortQueuesByPriorityAndFairness: the highest priority first.
    return (-current_priority(queue), *_queue_order(queue))


def _fair_then_priority(queue: Queue) -> OrderKey:
    # YuniKorn's sortQueuesByFairnessAndPriority: priority breaks a tie of usage.
    used, pending, name = _queue_order(queue)
    return (used, -current_priority(queue), pending, name)


def _higher_first(app: Application) -> int:
    return -app.priority


def _submitted(app: Application) -> int:
    return app.submit_seq
