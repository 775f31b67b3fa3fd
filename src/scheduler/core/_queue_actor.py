"""The queue actor: one queue's configuration changes, draining, and removal when empty."""

from __future__ import annotations

from typing import TYPE_CHECKING

from actors import Actor, TimerHandle
from scheduler._errors import SchedulerError
from scheduler.core._events import ChildQueueRemoved, ConfigureQueue, QueueEmptied, QueueTimer
from scheduler.objects._queue import Queue, QueueStatus

if TYPE_CHECKING:
    from scheduler.core._partition import Partition

__all__ = ["QueueActor"]


class QueueActor(Actor):
    """Owns one ``Queue`` of a partition (it shares the partition's dispatcher).

    Usage totals and the running-application count of the queue change in the turns of
    the partition's and applications' actors that cause them (STYLE 3: no total agreed by
    a message in flight); what the queue decides about itself happens here.
    """

    def __init__(self, partition: Partition, queue: Queue) -> None:
        self.partition = partition
        self.queue = queue
        self._removal: TimerHandle | None = None

    def receive(self, message: object) -> object:
        match message:
            case ConfigureQueue(config=conf):
                if conf is not None:
                    self.queue.apply_config(conf)
                elif not self.queue.dynamic:
                    self.queue.status = QueueStatus.DRAINING  # gone from the configuration
                    self.remove_if_empty()
            case QueueEmptied():
                self.emptied()
            case QueueTimer() | ChildQueueRemoved():
                self.remove_if_empty()
            case _:
                raise SchedulerError(f"queue {self.queue.path}: unexpected {message!r}")
        return None

    def emptied(self) -> None:
        """An application left: a dynamic queue goes after a while if still empty, a
        draining one goes now."""
        queue = self.queue
        if queue.dynamic and queue.is_empty():
            if self._removal is not None:
                self._removal.cancel()
            self._removal = self.actor_system.timers.after(
                self.partition.timeouts.dynamic_queue,
                QueueTimer(path=queue.path),
                to=self.actor_ref,
            )
        elif queue.status is QueueStatus.DRAINING:
            self.remove_if_empty()

    def remove_if_empty(self) -> None:
        """Leave the tree if nothing is left in the queue; its parent checks itself next."""
        queue, p = self.queue, self.partition
        if not queue.removable():
            return
        queue.detach()
        del p.queues[queue.path]
        p.queue_refs.pop(queue.path, None)
        if self._removal is not None:
            self._removal.cancel()
        self.actor_ref.stop()
        parent = queue.parent
        assert parent is not None
        parent_ref = p.queue_refs.get(parent.path)
        if parent_ref is not None and parent_ref.alive:
            parent_ref.tell(ChildQueueRemoved())

    def __repr__(self) -> str:
        return f"<QueueActor {self.queue!r}>"
