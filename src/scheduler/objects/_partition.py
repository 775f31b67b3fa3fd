"""A partition's state: the domain objects its actors share in their turn.

The partition, queue and application actors of one partition run on one dispatcher, so
they share its turn (STYLE 3): a handler runs alone until it returns or awaits, and the
scheduling pass runs when every mailbox of the partition is drained. What they share lives
here: nodes and the node index, the queue tree, the applications, reservations, user and
group usage, the outbox, and the flag that asks for a scheduling pass. Each flow lives with
the actor that owns it (``scheduler.core``); this class only keeps the shared totals
consistent. Plain synchronous code: no anyio, no awaits. The core's ``Partition``
(``scheduler.core._partition``) adds what belongs to the actors: their references and the
permit gangs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Protocol

from loguru import logger

from scheduler.config._timeouts import Timeouts
from scheduler.objects._nodes import NodeIndex
from scheduler.objects._outbox import Outbox
from scheduler.objects._preemption import Preemptions
from scheduler.objects._queue import Queue
from scheduler.objects._reservations import Reservations
from scheduler.objects._resources import Res, add_into
from scheduler.objects._ugm import UserGroupManager

if TYPE_CHECKING:
    from scheduler.config._parser import PartitionConfig
    from scheduler.objects._application import Application
    from scheduler.objects._asks import Allocation, Ask
    from scheduler.objects._handshake import Preemption
    from scheduler.objects._nodes import Node

__all__ = ["ApplicationOwner", "PartitionState"]


class ApplicationOwner(Protocol):
    """What the partition's own flows ask of an application's actor, in the shared turn."""

    app: Application

    def allocated(self, ask: Ask, alloc: Allocation) -> None:
        """The scheduling pass committed ``alloc`` for ``ask`` (node, queue and app updated)."""

    def begin_replacement(
        self, ask: Ask, placeholder: Allocation, node: Node | None = None
    ) -> bool:
        """Real ``ask`` takes ``placeholder``'s place (on ``node``, if not the
        placeholder's): claim it and start the handshake."""

    def allocation_lost(self, alloc: Allocation, message: str) -> None:
        """``alloc`` went with its node: take it off the application and tell the RM."""

    def recover(self, alloc: Allocation) -> None:
        """``alloc`` exists on a node the RM registered: hold it as the application's."""

    def remove(self) -> None:
        """The RM removes the application: everything it holds goes."""

    def reject_asks(self, asks: Iterable[Ask], reason: str) -> None:
        """The core gives up on ``asks``: withdrawn, each answered with a rejection."""

    def await_preemption(self, rec: Preemption) -> None:
        """Victims were released for one of its asks: await the RM's confirmations."""


class PartitionState:
    """The shared state of one partition; see the module docstring for who changes what."""

    def __init__(
        self,
        config: PartitionConfig,
        *,
        rm_id: str,
        clock: Callable[[], float],
        wall: Callable[[float], int],
        timeouts: Timeouts | None = None,
    ) -> None:
        self.name = config.name
        self.rm_id = rm_id
        self.clock = clock
        # Wall-clock Unix nanoseconds of a reading of ``clock``: what timestamps show.
        self.wall = wall
        self.timeouts = timeouts or Timeouts()
        self.config = config
        self.outbox = Outbox(self.name, clock, self.wall)
        self.root = Queue("root", leaf=False)
        self.queues: dict[str, Queue] = {"root": self.root}
        self.nodes: dict[str, Node] = {}
        self.index = self._empty_index()
        self.applications: dict[str, Application] = {}
        self.owners: dict[str, ApplicationOwner] = {}  # the actors of ``applications``
        self.terminated: dict[str, Application] = {}
        self.reservations = Reservations(self)
        # Preemptions in flight (``scheduler.core._preempt``), and the asks bound to a node
        # that the last pass found no room for on it (the DaemonSet case), by ask id.
        self.preemptions = Preemptions()
        self.required_waiting: dict[int, tuple[Application, Ask]] = {}
        # User and group limits, and what is charged against them: None without limits.
        self.ugm = UserGroupManager.for_config(config)
        # A scheduling pass is due; and, with an RM that checks predicates, the nodes it
        # refused per ask, and the asks whose reservation it refused (by ask id; both
        # forgotten when anything else changes).
        self.schedule_pending = False
        self.refused: dict[int, set[str]] = {}
        self.refused_reserve: set[int] = set()
        # Nodes holding more than their capacity (shrunk by an UPDATE, or recovered beyond
        # it): only while there is one can root's max refuse an ask that a node has room
        # for, so only then is root part of the quota checks (``Queue.capacity_binds``).
        self.overcommitted: set[str] = set()
        self.total_allocations = 0
        # In a scheduling pass, nothing frees up: a node whose reservation ends during one
        # waits here and comes back to the node index after it (``Reservations.release``).
        self.in_pass = False
        self.held_back: list[Node] = []
        # A count of cluster changes, which lets a permit gang parked until "the cluster
        # changes" go again.
        self.generation = 0
        self._seq = 0
        self.log = logger.bind(partition=self.name)

    def wake(self) -> None:
        """Something changed that may make an allocation possible."""
        self.schedule_pending = True
        self.generation += 1
        if self.refused:
            self.refused = {}
        if self.refused_reserve:
            self.refused_reserve = set()

    def end_pass(self) -> None:
        """The pass is over: the nodes held back during it come back to the index."""
        self.in_pass = False
        if self.held_back:
            held, self.held_back = self.held_back, []
            for node in held:
                if (
                    node.reserved is None
                    and node.schedulable
                    and self.nodes.get(node.node_id) is node
                ):
                    self.index.add(node)
            self.wake()

    def asks_came(self) -> None:
        """New asks: a pass is due, but the cluster is as it was (a gang parked until the
        cluster changes stays parked)."""
        self.schedule_pending = True
        if self.refused:
            self.refused = {}
        if self.refused_reserve:
            self.refused_reserve = set()

    def take_seq(self, count: int = 1) -> int:
        """The first of ``count`` fresh numbers: submission and arrival order."""
        first = self._seq + 1
        self._seq += count
        return first

    def free_on_node(self, alloc: Allocation) -> Node | None:
        """Take ``alloc`` off its node (which re-sorts); returns the node, if it still exists."""
        node = self.nodes.get(alloc.node_id)
        if node is not None:
            node.remove_allocation(alloc.uuid)
            self.index.update(node)
            if self.overcommitted:
                self.usage_changed(node)
        return node

    def usage_changed(self, node: Node | None, *, gone: bool = False) -> None:
        """Keep ``overcommitted`` right after ``node``'s capacity or allocations changed
        outside a commit (a commit never overcommits), or it ``gone``; root joins or leaves
        the quota checks when the set fills or empties."""
        if node is None:
            return
        over = self.overcommitted
        before = bool(over)
        if not gone and node.overcommitted():
            over.add(node.node_id)
        else:
            over.discard(node.node_id)
        if bool(over) != before:
            root = self.root
            root.capacity_binds = bool(over)
            root.refresh_limits()

    def application_left(self, app: Application) -> None:
        """``app`` finished: out of its queue and the live set, kept as terminated."""
        queue = app.queue
        if queue is not None:
            queue.remove_application(app)
        if self.applications.get(app.application_id) is app:
            del self.applications[app.application_id]
            self.owners.pop(app.application_id, None)
        if self.ugm is not None:
            self.ugm.forget(app)
        self.terminated[app.application_id] = app

    def capacity_changed(self, old: Res, new: Res) -> None:
        """A node's capacity went from ``old`` to ``new`` (``{}`` for a node that came or
        went): root's max, the partition's total capacity, follows (YuniKorn's
        ``updatePartitionResource``, ``addNodeToList``, ``removeNodeFromList``). A draining
        node still counts. Names that drop to zero go, so no nodes is ``{}``: no limit.
        """
        root = self.root
        total = root.max_resources
        had_limit = bool(total)
        grew = False
        for name in old.keys() | new.keys():
            delta = new.get(name, 0) - old.get(name, 0)
            if delta:
                grew = grew or delta > 0
                left = total.get(name, 0) + delta
                if left:
                    total[name] = left
                else:
                    del total[name]
        if bool(total) != had_limit and root.capacity_binds:
            root.refresh_limits()  # root joins (or leaves) every queue's limited chain
        if grew:
            self.wake()

    def capacity(self) -> tuple[Res, Res]:
        """The total capacity of the nodes (root's max) and what is allocated on them."""
        used: Res = {}
        for node in self.nodes.values():
            add_into(used, node.allocated)
        return dict(self.root.max_resources), used

    def _empty_index(self) -> NodeIndex:
        policy = self.config.node_sort_policy
        return NodeIndex(policy.type or "fair", policy.resource_weights)

    def dismantle(self) -> None:
        """The partition is gone (its RM was removed): let go of its applications, asks,
        allocations and nodes. Its skeleton refers to itself (queues to their chain, helpers
        to the partition), so without this all it held would wait for a full collection of
        the cyclic collector, which ``tune_gc`` makes minutes apart: the soak
        (bench/soak.py) saw every Stopped RM's state piling up. Now reference counting
        frees them at once; only the empty skeleton waits. Nothing may use the state after.
        """
        for queue in self.queues.values():
            queue.applications.clear()
            queue.pending_apps.clear()
            queue.pending_list.clear()
            queue.apps_by_priority = None
        self.applications.clear()
        self.owners.clear()
        self.terminated.clear()
        self.nodes.clear()
        self.index = self._empty_index()
        self.reservations = Reservations(self)
        self.preemptions = Preemptions()
        self.required_waiting.clear()
        self.refused.clear()
        self.refused_reserve.clear()
        self.held_back.clear()

    def __repr__(self) -> str:
        return (
            f"<{type(self).__name__} {self.name} apps={len(self.applications)} "
            f"nodes={len(self.nodes)} allocations={self.total_allocations}>"
        )
