"""The partition actor: configuration, new applications, and the scheduling pass.

It owns the partition's nodes and node index (the RM's node updates are applied by
``scheduler.core._node_flows``), its reservations, the scheduling pass
(``scheduler.core._pass``) and the outbox. The queue and application actors of the
partition run on its dispatcher: when every mailbox of the group is drained, ``on_drained``
runs the pass on state nothing is still changing, and hands what happened to the RM's
callback actor.
"""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import suppress
from typing import TYPE_CHECKING

from actors import (
    Actor,
    ActorDeadError,
    ActorRef,
    AskTimeoutError,
    DeadlineExceeded,
    Dispatcher,
    TimerHandle,
    wall_of,
)
from scheduler import si
from scheduler._errors import SchedulerError
from scheduler.config._parser import queue_paths
from scheduler.config._timeouts import Timeouts
from scheduler.core import _views
from scheduler.core._app_actor import ApplicationActor
from scheduler.core._counters import SchedulingCounters
from scheduler.core._events import (
    AllocationsReleased,
    ApplicationsAdded,
    ApplicationsRemoved,
    AppSpec,
    AsksReleased,
    AsksUpdated,
    CheckPredicates,
    CheckPreemptionPredicates,
    ConfigUpdated,
    ConfigureQueue,
    Event,
    NodesUpdated,
    NodeUpdate,
    Outbound,
    PreemptionDue,
    Query,
    ReservationDue,
    Retire,
    RMPaused,
)
from scheduler.core._node_flows import PartitionNodes
from scheduler.core._outstanding import InspectOutstanding, OutstandingRequests
from scheduler.core._partition import Partition
from scheduler.core._pass import Scheduler
from scheduler.core._preempt import MAX_STARTED, PreemptionRound
from scheduler.core._queue_actor import QueueActor
from scheduler.objects._application import Application
from scheduler.objects._asks import Ask
from scheduler.objects._nodes import NodeIndex
from scheduler.objects._queue import Queue
from scheduler.objects._ugm import UserGroupManager
from scheduler.policies._placement import gang_problem, place

if TYPE_CHECKING:
    from actors import Promise
    from scheduler.config._parser import PartitionConfig, QueueConfig
    from scheduler.gangs._permit import GangGroup

__all__ = ["SCHEDULE_BATCH", "PartitionActor"]

# A scheduling pass makes at most this many allocations before the partition drains its
# mailboxes again, so a large backlog never starves RM requests or queries.
SCHEDULE_BATCH = 2_000


class _Continue(Event, frozen=True, kw_only=True):
    """Wake the partition to go on with a scheduling pass that hit its batch limit."""


class PartitionActor(Actor):
    """Owns a ``Partition``: its nodes (through ``PartitionNodes``), queue tree, new
    applications and the pass."""

    def __init__(
        self,
        config: PartitionConfig,
        *,
        rm_id: str,
        callback: ActorRef,
        dispatcher: Dispatcher,
        timeouts: Timeouts | None = None,
        predicates: bool = False,
        directory: dict[str, ActorRef] | None = None,
        outstanding: bool = False,
    ) -> None:
        self._config = config
        self._rm_id = rm_id
        self._callback = callback
        self._dispatcher = dispatcher
        self._timeouts = timeouts
        self._predicates = predicates  # the RM checks predicates: one proposal at a time
        self._directory = directory
        self._checking = False  # a proposal is out with the RM's predicates
        self._paused = False  # the RM lost its connection: no pass until it resumes
        self._unpublished: list[str] = []  # new application actors the proxy does not know
        self._reservation_timer: TimerHandle | None = None
        self._preemption_timer: TimerHandle | None = None
        self._queue_actors = 0
        self._inspects = outstanding  # the RM hears of outstanding requests (autoscaling)
        self.outstanding: OutstandingRequests | None = None
        self.counters = SchedulingCounters()  # YuniKorn's counter metrics, per pass and flush
        self.partition: Partition
        self.scheduler: Scheduler
        self.preemption: PreemptionRound
        self.nodes: PartitionNodes  # the RM's node updates, applied to ``partition``

    def on_start(self) -> None:
        p = self.partition = Partition(
            self._config,
            rm_id=self._rm_id,
            clock=self.actor_system.clock.now,
            wall=wall_of(self.actor_system.clock),
            timeouts=self._timeouts,
            directory=self._directory,
        )
        self.scheduler = Scheduler(p, self.counters)
        self.preemption = PreemptionRound(p)
        self.nodes = PartitionNodes(p, self.counters)
        self.scheduler.checks_predicates = self._predicates
        p.permits.on_wait = self._watch_gang
        if self._inspects:
            self.outstanding = OutstandingRequests(p, self.scheduler, self._arm)
        p.root.apply_config(self._config.queue)
        self._spawn_queue(p.root)
        for child in self._config.queue.queues:
            self._new_queue(p.root, child)
        p.wake()
        self._flush()

    def on_stop(self) -> None:
        """The partition's queue and application actors stop with it."""
        p = self.partition
        for ref in [*p.app_refs.values(), *p.queue_refs.values()]:
            if ref.alive:
                ref.stop()
        p.directory.clear()
        if self._reservation_timer is not None:
            self._reservation_timer.cancel()
        if self.outstanding is not None:
            self.outstanding.stop()
        p.dismantle()  # freed now, not at the cyclic collector's next full collection

    # ========================================================================= messages
    async def receive(self, message: object) -> object:
        match message:
            case NodesUpdated(nodes=nodes):
                self.update_nodes(nodes)
            case ApplicationsAdded(apps=apps):
                for spec in apps:
                    self.add_application(spec)
            case ApplicationsRemoved(application_ids=ids):
                for app_id in ids:
                    self.remove_application(app_id)
            case AsksUpdated() | AllocationsReleased() | AsksReleased():
                self._forward(message)
            case ConfigUpdated(config=config, dry_run=dry_run):
                self.check_config(config)
                if not dry_run:
                    await self.apply_config(config)
            case Query(kind=kind, key=key):
                answer = _views.answer(self.partition, kind, key)
                if kind in ("dump", "summary"):
                    answer["schedulerMetrics"] = self.counters.info()
                return answer
            case _Continue():
                pass  # on_drained goes on with the pass
            case ReservationDue():
                self.partition.wake()
            case RMPaused(paused=paused):
                self._paused = paused
                if not paused:
                    self.partition.wake()  # what waited while the RM was away
            case PreemptionDue():
                self._preemption_timer = None
                self.partition.schedule_pending = True  # a pass, then the round
            case InspectOutstanding():
                if self.outstanding is not None:
                    self.outstanding.inspect()
            case _:
                raise SchedulerError(f"partition {self.partition.name}: unexpected {message!r}")
        return None

    def _actor_name(self, kind: str, key: str) -> str:
        return f"{self.actor_ref.name}/{kind}:{key}"

    # ==================================================================== configuration
    def check_config(self, config: PartitionConfig) -> None:
        """Raise ``SchedulerError`` if ``config`` cannot replace the live one."""
        p = self.partition
        paths = queue_paths(config)
        for path, queue in p.queues.items():
            new = paths.get(path)
            if new is not None and queue.leaf and queue.applications and not new.is_leaf:
                raise SchedulerError(
                    f"partition {p.name}: queue {path} has applications and cannot "
                    "become a parent queue"
                )
        policy = config.node_sort_policy.type or "fair"
        if policy not in NodeIndex.POLICIES:
            raise SchedulerError(f"partition {p.name}: unknown node sort policy {policy!r}")

    async def apply_config(self, config: PartitionConfig) -> None:
        """Each queue's actor takes its part of ``config``, parents first; new queues are
        made here, queues gone from it drain. The caller's ask returns once all is done."""
        p = self.partition
        p.config = config
        await self._configure(p.root, config.queue)
        paths = queue_paths(config)
        for path, queue in list(p.queues.items()):
            if path not in paths and not queue.dynamic and queue is not p.root:
                await self._ask_queue(queue, ConfigureQueue(config=None))
        weights = config.node_sort_policy.resource_weights or None
        policy = config.node_sort_policy.type or "fair"
        if policy != p.index.policy or (weights and weights != p.index.weights):
            index = NodeIndex(policy, weights)
            for node in p.nodes.values():
                if node.schedulable and node.reserved is None:
                    index.add(node)
            p.index = index
        # The new limits decide from now on; what is allocated stays (YuniKorn's UpdateConfig).
        p.ugm = UserGroupManager.for_config(config, p.applications.values())
        p.wake()

    async def _configure(self, queue: Queue, conf: QueueConfig) -> None:
        await self._ask_queue(queue, ConfigureQueue(config=conf))
        for child_conf in conf.queues:
            child = queue.children.get(child_conf.name)
            if child is None:
                self._new_queue(queue, child_conf)
            else:
                await self._configure(child, child_conf)

    async def _ask_queue(self, queue: Queue, message: ConfigureQueue) -> None:
        ref = self.partition.queue_refs.get(queue.path)
        if ref is not None and ref.alive:
            with suppress(ActorDeadError):  # it may leave the tree meanwhile
                await ref.ask(message)  # the turn ends until the queue's actor answers

    def _new_queue(self, parent: Queue, conf: QueueConfig) -> None:
        """A configured queue that does not exist yet, and its children."""
        queue = Queue(conf.name, parent, leaf=conf.is_leaf)
        queue.apply_config(conf)
        self.partition.queues[queue.path] = queue
        self._spawn_queue(queue)
        for child in conf.queues:
            self._new_queue(queue, child)

    def _spawn_queue(self, queue: Queue) -> None:
        self._queue_actors += 1
        ref = self.actor_system.spawn(
            QueueActor(self.partition, queue),
            name=self._actor_name("queue", f"{queue.path}#{self._queue_actors}"),
            dispatcher=self._dispatcher,
        )
        self.partition.queue_refs[queue.path] = ref

    # ============================================================================ nodes
    def update_nodes(self, updates: Iterable[NodeUpdate]) -> None:
        self.nodes.update(updates)

    # ===================================================================== applications
    def add_application(self, spec: AppSpec) -> None:
        """Place and accept an application, or reject it with a reason."""
        p = self.partition
        app_id = spec.application_id
        if app_id in p.applications:
            p.outbox.add(
                "app_rejected",
                si.RejectedApplication(
                    application_id=app_id, reason=f"application {app_id} already exists"
                ),
            )
            self._unpublished.append(app_id)  # the proxy forgot its actor with this add
            return
        app = Application(
            application_id=app_id,
            partition=p.name,
            queue_name=spec.queue_name,
            user=spec.user,
            groups=list(spec.groups),
            tags=spec.tags,
            submit_time=p.clock(),
            submit_seq=p.take_seq(),
            placeholder_ask=spec.placeholder_ask,
            gang_scheduling_style=spec.gang_scheduling_style,
            execution_timeout_ms=spec.execution_timeout_ms,
        )
        created: list[Queue] = []
        queue, reason = place(p, app, created)
        for new in created:
            self._spawn_queue(new)
        if queue is not None:
            reason = gang_problem(app, queue)
            if reason:
                p.queue_emptied(queue)  # a dynamic queue made for it goes again
                queue = None
        p.terminated.pop(app_id, None)
        actor = self._spawn_app(app)
        if queue is None:
            p.terminated[app_id] = app
            p.outbox.add(
                "app_rejected", si.RejectedApplication(application_id=app_id, reason=reason)
            )
            actor.reject(reason)
            p.keep_terminated()
            return
        queue.add_application(app)
        p.applications[app_id] = app
        p.owners[app_id] = actor
        p.outbox.add("app_accepted", si.AcceptedApplication(application_id=app_id))
        p.outbox.event(
            si.EventRecordType.APP,
            app_id,
            "ApplicationAdded",
            f"application {app_id} added to queue {queue.path}",
            group=queue.path,
        )

    def _spawn_app(self, app: Application) -> ApplicationActor:
        p = self.partition
        app_id = app.application_id
        old = p.app_refs.get(app_id)
        if old is not None:
            p.forget_actor(app_id, old)
            if old.alive:
                old.tell(Retire())
        actor = ApplicationActor(p, app)
        p.app_refs[app_id] = self.actor_system.spawn(
            actor,
            name=self._actor_name("app", f"{app_id}#{app.submit_seq}"),
            dispatcher=self._dispatcher,
        )
        self._unpublished.append(app_id)
        return actor

    def remove_application(self, app_id: str) -> None:
        """The RM removes an application: its actor's ``remove``, now, in this turn (so an
        add of the same id that follows finds it gone)."""
        owner = self.partition.owners.get(app_id)
        if owner is None:
            self.partition.log.warning("remove of unknown application {}", app_id)
            return
        owner.remove()

    def _forward(self, message: AsksUpdated | AllocationsReleased | AsksReleased) -> None:
        """A message for an application the proxy did not know the actor of yet."""
        p = self.partition
        app_id = message.application_id
        ref = p.app_refs.get(app_id)
        if ref is not None and ref.alive:
            ref.tell(message)
        elif isinstance(message, AsksUpdated):
            reason = f"application {app_id} not found in partition {p.name}"
            for ask in message.asks:
                p.outbox.reject_ask(ask, reason)
        else:
            p.log.warning("release for unknown application {}", app_id)

    # ====================================================================== the pass
    def on_drained(self) -> None:
        p = self.partition
        woke = p.schedule_pending and not self._paused
        if woke and not self._checking:
            if self._predicates:
                self._checking = True
                self.run_handler(self._schedule_checked())
            else:
                start = p.clock()
                try:
                    made = self.scheduler.schedule(SCHEDULE_BATCH)
                except Exception:
                    self.counters.attempts["error"] += 1  # YuniKorn's scheduling error
                    raise
                took = p.clock() - start
                self.counters.observe_pass(took)
                if made:
                    self.counters.observe_try_node(took, made)
                if not p.schedule_pending and self.preemption.wanted():
                    start = p.clock()
                    self.preemption.run()  # the pass placed what fits: who may preempt
                    self.counters.observe_preemption(p.clock() - start)
                    self._arm_preemption_timer()
                if p.schedule_pending:
                    self.actor_ref.tell(_Continue())
                self._arm_reservation_timer()
        if self.outstanding is not None:
            self.outstanding.after_drain(woke)
        self._publish()
        self._flush()

    async def _schedule_checked(self) -> None:
        """With an RM that checks predicates: one proposal at a time is put to it, an
        awaited ask from this turn. The partition's other messages go on meanwhile, and the
        commit re-checks everything the proposal assumed."""
        p, scheduler = self.partition, self.scheduler
        scheduler.time_sorts()
        try:
            while p.schedule_pending:
                proposal = scheduler.propose_checked()
                if proposal is None:
                    self._arm_reservation_timer()  # a younger ask may reserve later
                    if self.preemption.wanted():
                        await self._preempt_checked()
                    return
                question = CheckPredicates(
                    allocation_key=proposal.ask.allocation_key,
                    node_id=proposal.node.node_id,
                    allocate=proposal.allocate,
                )
                start = p.clock()  # YuniKorn's trynode latency: the RM's predicates included
                try:
                    allowed = bool(await self._callback.ask(question))
                except (AskTimeoutError, ActorDeadError) as exc:
                    p.log.warning("predicates for {} not answered ({}): refused", question, exc)
                    allowed = False
                if scheduler.predicates_checked(proposal, allowed) is not None:
                    self.counters.observe_try_node(p.clock() - start)
        finally:
            self._checking = False

    async def _preempt_checked(self) -> None:
        """With an RM that checks predicates: each preemption is put to its
        ``preemption_predicates`` first, one at a time, and started only if it accepts
        (the plan is checked again when it starts: anything may have changed meanwhile).
        The round's latency includes the RM's answers, as YuniKorn's tryPreemption does."""
        p, rounds = self.partition, self.preemption
        start = p.clock()
        for _ in range(MAX_STARTED):
            plan = rounds.next_plan()
            if plan is None:
                break
            keys = tuple(alloc.allocation_key for alloc, _ in plan.victims)
            question = CheckPreemptionPredicates(
                allocation_key=plan.ask.allocation_key,
                node_id=plan.node.node_id,
                preempt_allocation_keys=keys,
                start_index=len(keys) - 1,  # every victim is needed (just enough)
            )
            try:
                answer = await self._callback.ask(question)
            except (AskTimeoutError, ActorDeadError) as exc:
                p.log.warning("preemption predicates for {} not answered ({})", question, exc)
                answer = None
            if (
                isinstance(answer, si.PreemptionPredicatesResponse)
                and answer.success
                and answer.index == len(keys) - 1  # every victim goes, as planned
            ):
                rounds.start(plan)
            else:
                rounds.refused(plan)
        self.counters.observe_preemption(p.clock() - start)
        self._arm_preemption_timer()
        self._flush()

    # ==================================================================== permit gangs
    def _watch_gang(self, group: GangGroup) -> None:
        """A permit gang group's wait started (its first tentative member): await it."""
        wait = group.wait
        assert wait is not None and group.wait_gang is not None
        self.run_handler(self._gang_wait(group, wait, group.wait_gang.spec.waiting_time))

    async def _gang_wait(self, group: GangGroup, wait: Promise[bool], seconds: float) -> None:
        """The group's wait, as a handler of this actor: it ends when the group is bound
        or rolled back (``wait`` settles), or times the group out when ``seconds`` of the
        core's clock pass first. The partition goes on scheduling meanwhile."""
        try:
            await wait.within(seconds)
            return
        except DeadlineExceeded:
            pass
        p = self.partition
        if group.wait is not wait:
            return  # it settled meanwhile
        members = p.permits.time_out(group)
        reason = p.permits.timeout_reason(group)
        by_app: dict[str, list[Ask]] = {}
        for app, ask in members:
            by_app.setdefault(app.application_id, []).append(ask)
        for app_id, asks in by_app.items():
            owner = p.owners.get(app_id)
            if owner is not None:
                owner.reject_asks(asks, reason)
        p.wake()  # the room the group held is free

    def _arm_reservation_timer(self) -> None:
        due = self.scheduler.reserve_due
        if due is not None:
            self.scheduler.reserve_due = None
            if self._reservation_timer is not None:
                self._reservation_timer.cancel()
            self._reservation_timer = self.actor_system.timers.after(
                max(0.0, due - self.partition.clock()), ReservationDue(), to=self.actor_ref
            )

    def _arm_preemption_timer(self) -> None:
        due = self.preemption.due
        if due is None:
            return
        self.preemption.due = None
        timer = self._preemption_timer
        if timer is not None:
            if timer.due <= due:
                return  # an earlier one is set: that round arms the next
            timer.cancel()
        self._preemption_timer = self.actor_system.timers.after(
            max(0.0, due - self.partition.clock()), PreemptionDue(), to=self.actor_ref
        )

    def _arm(self, delay: float, message: InspectOutstanding) -> TimerHandle:
        return self.actor_system.timers.after(delay, message, to=self.actor_ref)

    def _publish(self) -> None:
        """Tell the proxy about new application actors. Only now, with every mailbox of the
        partition drained: what came for them through the partition is handled, so what
        the proxy sends them from now on comes after it."""
        if self._unpublished:
            p = self.partition
            for app_id in self._unpublished:
                ref = p.app_refs.get(app_id)
                if ref is not None and ref.alive:
                    p.directory[app_id] = ref
            self._unpublished.clear()

    def _flush(self) -> None:
        outbox = self.partition.outbox
        if outbox:
            self.counters.count_flush(outbox.entries, len(outbox.events))
            for kind, payload in outbox.flush():
                self._callback.tell(Outbound(kind=kind, payload=payload))

    def __repr__(self) -> str:
        return f"<PartitionActor {self.partition!r}>"
