"""What a transport sent an RM's callback, kept until the RM says it has it, so that an RM
whose connection is lost can resume its session on a new one and hear everything once.

An ``Outbox`` belongs to one registration of one RM and outlives the connections it is
sent on. Each thing the core hands the RM's callback (a response, events, a scheduling
state) is pushed on a channel (the native transport has one; gRPC one per stream) and
counted there; it goes to the connection that owns the outbox, if one does, and is kept
until the RM acknowledges it (``ack``: how many it has received on that channel since it
registered). When the connection is lost the outbox keeps what the core goes on sending
(a Paused RM's partitions make no allocation, release or rejection of their own accord,
so that is little: timeouts, state changes, events), and ``resume`` hands a new
connection everything the RM has not received, in order, before anything new.

An outbox keeps at most ``limit`` things. Past that it keeps nothing more and counts what
it lost (``dropped``): its RM cannot resume any more, and must register again and recover
(the SI's recovery), as after the daemon restarts.
"""

from __future__ import annotations

import secrets
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

from scheduler._errors import NotFoundError

__all__ = ["Outbox", "Outboxes"]

T = TypeVar("T")


class Outbox(Generic[T]):
    """The callbacks of one RM registration, kept until acknowledged; see the module.

    Attributes:
        rm_id: the RM it belongs to.
        token: the session id the RM resumes with (a secret of the registration).
        owner: the connection it is sent on now, or None while the RM is away.
        dropped: what it could not keep (0 while the RM can resume).
    """

    def __init__(self, rm_id: str, limit: int) -> None:
        self.rm_id = rm_id
        self.token = secrets.token_hex(16)
        self.limit = limit
        self.owner: object | None = None
        self.callback: object = None  # the stand-in the RM is registered with in the core
        self.dropped = 0
        self._kept: dict[int, deque[T]] = {}
        self._sent: dict[int, int] = {}  # pushed on each channel since the registration
        self._size = 0

    def __repr__(self) -> str:
        state = "attached" if self.owner is not None else "detached"
        return f"<Outbox {self.rm_id} {state} sent={self._sent} kept={self._size}>"

    def push(self, channel: int, item: T) -> bool:
        """Count ``item`` on ``channel`` and keep it until acknowledged. Returns whether it
        is to be sent now (a connection owns the outbox)."""
        self._sent[channel] = self._sent.get(channel, 0) + 1
        if self.dropped:
            self.dropped += 1
        elif self._size >= self.limit:
            self.dropped = 1
            self._kept.clear()  # resuming is over: what is kept is of no use
            self._size = 0
        else:
            kept = self._kept.get(channel)
            if kept is None:
                kept = self._kept[channel] = deque()
            kept.append(item)
            self._size += 1
        return self.owner is not None

    def ack(self, channel: int, received: int) -> None:
        """The RM has received ``received`` things on ``channel`` since it registered:
        they need not be kept. A count beyond what was sent is ignored."""
        kept = self._kept.get(channel)
        if kept is None or received > self._sent.get(channel, 0):
            return
        first = self._sent.get(channel, 0) - len(kept) + 1  # the number of kept[0]
        for _ in range(received - first + 1):
            kept.popleft()
            self._size -= 1

    def attach(self, owner: object) -> list[tuple[int, T]]:
        """``owner`` sends what is pushed from now on, taking over from the connection
        that had it (if that one is not yet seen to be gone). Returns what is kept, by
        channel, in order: a registration's first connection sends it (what the core
        pushed while the registration was being answered)."""
        self.owner = owner
        return [(channel, item) for channel, kept in self._kept.items() for item in kept]

    def detach(self, owner: object) -> bool:
        """``owner``'s connection ended. Returns whether it owned the outbox (and so the RM
        is now away); a connection that another took over from changes nothing."""
        if self.owner is not owner:
            return False
        self.owner = None
        return True

    def resume(self, token: str, received: dict[int, int]) -> None:
        """The RM resumes with ``token``, having received ``received`` things on each
        channel: those need not be kept. ``attach`` then gives its new connection the
        rest, to send before anything new.

        Raises:
            NotFoundError: a wrong token, an outbox that lost what it kept, or counts
                that do not match what was sent and kept.
        """
        if not secrets.compare_digest(token.encode(), self.token.encode()):
            raise NotFoundError(
                f"resource manager {self.rm_id!r} has no session {token[:8]!r}…: register "
                "again and recover"
            )
        if self.dropped:
            raise NotFoundError(
                f"resource manager {self.rm_id!r} cannot resume: {self.dropped:,} callbacks "
                f"were lost while it was away (more than the {self.limit:,} kept): register "
                "again and recover"
            )
        counts = {channel: received.get(channel, 0) for channel in {*received, *self._sent}}
        for channel, count in counts.items():
            kept = len(self._kept.get(channel, ()))
            sent = self._sent.get(channel, 0)
            if not sent - kept <= count <= sent:
                raise NotFoundError(
                    f"resource manager {self.rm_id!r} cannot resume: it received {count} on "
                    f"channel {channel}, but {sent} were sent and the last {kept} kept: "
                    "register again and recover"
                )
        for channel, count in counts.items():
            self.ack(channel, count)


class Outboxes(Generic[T]):
    """The outboxes of the RMs a transport registered, by RM id, while each may resume."""

    def __init__(self) -> None:
        self._boxes: dict[str, Outbox[T]] = {}

    def __len__(self) -> int:
        return len(self._boxes)

    def add(self, outbox: Outbox[T], registered: Callable[[str, object], bool]) -> None:
        """``outbox`` is its RM's now; those of RMs that are away and no longer registered
        with theirs (``registered(rm_id, callback)`` is false: Stopped, or registered
        again elsewhere) are dropped."""
        for rm_id, box in list(self._boxes.items()):
            if box.owner is None and not registered(rm_id, box.callback):
                del self._boxes[rm_id]
        self._boxes[outbox.rm_id] = outbox

    def resume(
        self,
        rm_id: str,
        token: str,
        received: dict[int, int],
        reconnected: Callable[[str, object], bool],
    ) -> Outbox[T]:
        """The outbox ``rm_id`` resumes with ``token`` (``Outbox.resume``), once the core
        took the RM back (``reconnected(rm_id, callback)``, ``Core.rm_reconnected``).

        Raises:
            NotFoundError: none here, a wrong token or counts, or the RM was Stopped or
                registered again since: it registers again and recovers.
        """
        gone = (
            f"resource manager {rm_id!r} has no session to resume here (the daemon "
            "restarted, or the RM was Stopped or registered again): register again and recover"
        )
        box = self._boxes.get(rm_id)
        if box is None:
            raise NotFoundError(gone)
        box.resume(token, received)
        if not reconnected(rm_id, box.callback):
            del self._boxes[rm_id]
            raise NotFoundError(gone)
        return box
