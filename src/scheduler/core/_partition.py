"""The core's partition: the shared state of a partition's actors, with what only the
actors know.

``PartitionState`` (``scheduler.objects``) holds the domain objects; this adds the actors'
references (where the RM proxy and the partition's flows send messages), the permit gangs
(``scheduler.gangs``), and the messages a change of the state owes an actor. Plain
synchronous code, run in the partition's shared turn.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from scheduler.core._events import AppTimer, QueueEmptied
from scheduler.gangs._permit import PermitGangs
from scheduler.objects._application import AppEvent
from scheduler.objects._partition import PartitionState

if TYPE_CHECKING:
    from actors import ActorRef
    from scheduler.config._parser import PartitionConfig
    from scheduler.config._timeouts import Timeouts
    from scheduler.objects._application import Application
    from scheduler.objects._queue import Queue

__all__ = ["Partition"]


class Partition(PartitionState):
    """A partition's shared state, its actors' references and its permit gangs."""

    def __init__(
        self,
        config: PartitionConfig,
        *,
        rm_id: str,
        clock: Callable[[], float],
        wall: Callable[[float], int],
        timeouts: Timeouts | None = None,
        directory: dict[str, ActorRef] | None = None,
    ) -> None:
        super().__init__(config, rm_id=rm_id, clock=clock, wall=wall, timeouts=timeouts)
        self.queue_refs: dict[str, ActorRef] = {}  # the queue actors, by path
        # Application actors by application id (live or terminated, the newest per id), and
        # the RM proxy's view of them: where it sends asks and releases straight away.
        self.app_refs: dict[str, ActorRef] = {}
        self.directory: dict[str, ActorRef] = directory if directory is not None else {}
        self.permits = PermitGangs(self)

    def dismantle(self) -> None:
        """The partition is gone: its state, actor references and permit gangs too (see
        ``PartitionState.dismantle``)."""
        super().dismantle()
        self.queue_refs.clear()
        self.app_refs.clear()
        self.permits.clear()

    def application_left(self, app: Application) -> None:
        """``app`` finished: out of its queue (whose actor hears it, a dynamic queue may go)
        and the live set, kept as terminated; a satisfied gang kept for it may go."""
        queue = app.queue
        super().application_left(app)
        if queue is not None:
            self.queue_emptied(queue)
        if app.permit_gangs:
            self.permits.app_left(app)
        self.keep_terminated()

    def keep_terminated(self) -> None:
        """At most ``timeouts.terminated_kept`` terminated applications stay: the oldest
        leave the terminated set now, and their actors expire them as their timer would."""
        while len(self.terminated) > self.timeouts.terminated_kept:
            app_id = next(iter(self.terminated))  # the oldest: a dict keeps insertion order
            app = self.terminated.pop(app_id)
            ref = self.app_refs.get(app_id)
            if ref is not None and ref.alive:
                expire = AppTimer(
                    application_id=app_id, event=str(AppEvent.EXPIRE), state=str(app.state)
                )
                ref.tell(expire)

    def forget_actor(self, app_id: str, ref: ActorRef) -> None:
        """``ref`` (an application's actor) stops: nothing is routed to it any more."""
        if self.app_refs.get(app_id) is ref:
            del self.app_refs[app_id]
        if self.directory.get(app_id) is ref:
            del self.directory[app_id]

    def queue_emptied(self, queue: Queue) -> None:
        """Tell ``queue``'s actor that an application left it (a dynamic queue may go)."""
        ref = self.queue_refs.get(queue.path)
        if ref is not None and ref.alive:
            ref.tell(QueueEmptied())
