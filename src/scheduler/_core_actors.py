"""The partition, queue, application and RM-callback actors.

The actors of one partition share its dispatcher, so they share its turn: each drains its
own mailbox, and when every mailbox of the partition is empty the partition actor's
``on_drained`` runs the scheduling pass and hands what happened to the RM's callback actor.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from loguru import logger

from actors import Actor, ActorRef, ActorSystem, Dispatcher, TimerHandle
from scheduler import _views, si
from scheduler._application import Application
from scheduler._errors import SchedulerError
from scheduler._events import (
    AllocationsReleased,
    ApplicationsAdded,
    ApplicationsRemoved,
    AppTimer,
    AsksReleased,
    AsksUpdated,
    CheckPredicates,
    ConfigUpdated,
    Event,
    GangTimer,
    NodesUpdated,
    Outbound,
    PredicatesChecked,
    Query,
    QueueTimer,
    ReservationDue,
)
from scheduler._partition import Partition, Timeouts
from scheduler._queue import Queue

if TYPE_CHECKING:
    from scheduler import ResourceManagerCallback
    from scheduler._config import PartitionConfig

__all__ = ["ApplicationActor", "CallbackActor", "PartitionActor", "QueueActor"]

# A scheduling pass makes at most this many allocations before the partition drains its
# mailboxes again, so a large backlog never starves RM requests or queries.
SCHEDULE_BATCH = 2_000


class _Timers:
    """The partition's ``TimerPort``: timers on the core's clock, one per key."""

    def __init__(self, system: ActorSystem, resolve: Callable[[str], ActorRef | None]) -> None:
        self._system = system
        self._resolve = resolve
        self._handles: dict[str, TimerHandle] = {}

    def set(self, key: str, delay: float, message: Event, to: str) -> None:
        self.cancel(key)
        ref = self._resolve(to)
        if ref is not None:
            self._handles[key] = self._system.timers.after(delay, message, to=ref)

    def cancel(self, key: str) -> None:
        handle = self._handles.pop(key, None)
        if handle is not None:
            handle.cancel()

    def cancel_all(self) -> None:
        for handle in self._handles.values():
            handle.cancel()
        self._handles.clear()


class PartitionActor(Actor):
    """Owns a ``Partition``; routes application and queue messages to their actors."""

    def __init__(
        self,
        config: PartitionConfig,
        *,
        rm_id: str,
        callback: ActorRef,
        dispatcher: Dispatcher,
        timeouts: Timeouts | None = None,
        predicates: bool = False,
    ) -> None:
        self._predicates = predicates
        self._config = config
        self._rm_id = rm_id
        self._callback = callback
        self._dispatcher = dispatcher
        self._timeouts = timeouts
        self.app_refs: dict[str, ActorRef] = {}
        self.queue_refs: dict[str, ActorRef] = {}
        self.partition: Partition

    def on_start(self) -> None:
        system = self.actor_system
        self.timers = _Timers(system, self._resolve)
        self.partition = Partition(
            self._config,
            rm_id=self._rm_id,
            clock=system.clock.now,
            timers=self.timers,
            timeouts=self._timeouts,
        )
        p = self.partition
        p.use_predicates = self._predicates
        p.on_queue_added = self._spawn_queue
        p.on_queue_removed = self._stop_queue
        p.on_app_removed = self._stop_app
        for queue in list(p.queues.values()):
            self._spawn_queue(queue)
        self._flush()

    def on_stop(self) -> None:
        self.timers.cancel_all()

    def _resolve(self, to: str) -> ActorRef | None:
        kind, _, key = to.partition(":")
        if kind == "app":
            # A rejected application has no actor: its timers come to the partition.
            return self.app_refs.get(key, self.actor_ref)
        if kind == "queue":
            return self.queue_refs.get(key)
        return self.actor_ref

    def _actor_name(self, kind: str, key: str) -> str:
        return f"{self.actor_ref.name}/{kind}:{key}"

    def _spawn_queue(self, queue: Queue) -> None:
        ref = self.actor_system.spawn(
            QueueActor(self.partition, queue.path),
            name=self._actor_name("queue", queue.path),
            dispatcher=self._dispatcher,
        )
        self.queue_refs[queue.path] = ref

    def _stop_queue(self, queue: Queue) -> None:
        ref = self.queue_refs.pop(queue.path, None)
        if ref is not None:
            ref.stop()

    def _stop_app(self, app: Application) -> None:
        ref = self.app_refs.pop(app.application_id, None)
        if ref is not None:
            ref.stop()

    # ------------------------------------------------------------------------ messages
    def receive(self, message: object) -> object:
        p = self.partition
        match message:
            case AsksUpdated(application_id=app_id):
                self._to_app(app_id, message)
            case AllocationsReleased(application_id=app_id) | AsksReleased(application_id=app_id):
                self._to_app(app_id, message)
            case NodesUpdated(nodes=nodes):
                p.update_nodes(nodes)
            case ApplicationsAdded(apps=apps):
                for spec in apps:
                    app = p.add_application(spec)
                    if app is not None:
                        self._spawn_app(app)
            case ApplicationsRemoved(application_ids=ids):
                for app_id in ids:
                    p.remove_application(app_id)
            case ConfigUpdated(config=config, dry_run=dry_run):
                p.check_config(config)
                if not dry_run:
                    p.apply_config(config)
            case Query(kind=kind, key=key):
                return _views.answer(p, kind, key)
            case _Continue():
                pass  # on_drained goes on with the pass
            case ReservationDue():
                p._wake()
            case AppTimer():
                p.on_app_timer(message)
            case GangTimer():
                p.on_gang_timer(message)
            case PredicatesChecked(allowed=allowed):
                p.on_predicates_checked(allowed)
            case _:
                raise SchedulerError(f"partition {p.name}: unexpected message {message!r}")
        return None

    def _spawn_app(self, app: Application) -> None:
        old = self.app_refs.pop(app.application_id, None)
        if old is not None:
            old.stop()
        self.app_refs[app.application_id] = self.actor_system.spawn(
            ApplicationActor(self.partition, app),
            name=self._actor_name("app", f"{app.application_id}#{app.submit_seq}"),
            dispatcher=self._dispatcher,
        )

    def _to_app(
        self, app_id: str, message: AsksUpdated | AllocationsReleased | AsksReleased
    ) -> None:
        ref = self.app_refs.get(app_id)
        app = self.partition.applications.get(app_id)
        if ref is not None and app is not None:
            ref.tell(message)
            return
        if isinstance(message, AsksUpdated):
            reason = f"application {app_id} not found in partition {self.partition.name}"
            for spec in message.asks:
                self.partition._reject_ask(spec, reason)
        else:
            self.log.warning("release for unknown application {}", app_id)

    def on_drained(self) -> None:
        p = self.partition
        if p.use_predicates:
            if p.schedule_pending:
                proposal = p.propose_checked()
                if proposal is not None:
                    self._callback.tell(
                        CheckPredicates(
                            allocation_key=proposal.ask.allocation_key,
                            node_id=proposal.node.node_id,
                            reply_to=self.actor_ref,
                        )
                    )
        elif p.schedule_pending:
            p.schedule(SCHEDULE_BATCH)
            if p.schedule_pending:
                self.actor_ref.tell(_Continue())
        self._flush()

    def _flush(self) -> None:
        if self.partition.outbox:
            for kind, payload in self.partition.outbox.flush():
                self._callback.tell(Outbound(kind=kind, payload=payload))

    def __repr__(self) -> str:
        return f"<PartitionActor {self.partition!r}>"


class _Continue(Event, frozen=True, kw_only=True):
    """Wake the partition to go on with a scheduling pass that hit its batch limit."""


class ApplicationActor(Actor):
    """One application's conversations: its asks, releases and state timers."""

    def __init__(self, partition: Partition, app: Application) -> None:
        self.partition = partition
        self.app = app

    def receive(self, message: object) -> object:
        p, app = self.partition, self.app
        match message:
            case AsksUpdated(asks=asks):
                p.update_asks(app, asks)
            case AllocationsReleased(releases=releases):
                p.release_allocations(app, releases)
            case AsksReleased(allocation_keys=keys, message=text):
                p.release_asks(app, keys, text)
            case AppTimer():
                p.on_app_timer(message)
            case GangTimer():
                p.on_gang_timer(message)
            case _:
                raise SchedulerError(f"application {app.application_id}: unexpected {message!r}")
        return None


class QueueActor(Actor):
    """One queue's conversations: for now, removing itself when dynamic and empty."""

    def __init__(self, partition: Partition, path: str) -> None:
        self.partition = partition
        self.path = path

    def receive(self, message: object) -> object:
        match message:
            case QueueTimer():
                self.partition.on_queue_timer(message)
            case _:
                raise SchedulerError(f"queue {self.path}: unexpected {message!r}")
        return None


_METHOD_OF = {
    "allocation": "update_allocation",
    "application": "update_application",
    "node": "update_node",
    "event": "send_event",
}


class CallbackActor(Actor):
    """Calls one RM's callback, one call at a time, in order, merging what is ready."""

    def __init__(self, rm_id: str, callback: ResourceManagerCallback) -> None:
        self.rm_id = rm_id
        self.callback = callback
        self.calls = 0

    async def receive_batch(self, messages: list[object]) -> None:
        run: list[object] = []
        for msg in messages:
            if isinstance(msg, CheckPredicates):
                await self._deliver(run)
                run = []
                await self._check(msg)
            else:
                run.append(msg)
        await self._deliver(run)

    async def _check(self, msg: CheckPredicates) -> None:
        args = si.PredicatesArgs(
            allocation_key=msg.allocation_key, node_id=msg.node_id, allocate=True
        )
        try:
            allowed = bool(await self.callback.predicates(args))
        except Exception:
            logger.bind(rm_id=self.rm_id).exception("RM predicates raised: node refused")
            allowed = False
        if msg.reply_to.alive:
            msg.reply_to.tell(PredicatesChecked(allowed=allowed))

    async def _deliver(self, messages: list[object]) -> None:
        for kind, payload in _merge(messages):
            method: Callable[[Any], Awaitable[Any]] = getattr(self.callback, _METHOD_OF[kind])
            self.calls += 1
            try:
                await method(payload)
            except Exception:
                logger.bind(rm_id=self.rm_id).exception(
                    "RM callback {} raised; the core goes on", _METHOD_OF[kind]
                )

    async def receive(self, message: object) -> object:
        await self.receive_batch([message])
        return None


def _merge(messages: list[object]) -> list[tuple[str, Any]]:
    """Merge consecutive responses of one kind into one (order across kinds is kept)."""
    out: list[tuple[str, Any]] = []
    for msg in messages:
        if not isinstance(msg, Outbound):
            continue
        if out and out[-1][0] == msg.kind:
            out[-1] = (msg.kind, _join(msg.kind, out[-1][1], msg.payload))
        else:
            out.append((msg.kind, msg.payload))
    return out


def _join(kind: str, a: Any, b: Any) -> Any:
    if kind == "event":
        return [*a, *b]
    cls = type(a)
    return cls(**{f: [*getattr(a, f), *getattr(b, f)] for f in cls.__struct_fields__})
