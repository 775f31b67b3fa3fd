"""What a client does when its connection is lost: its closed state, and reconnecting with
backoff and jitter, then resuming its RM's session or handing the RM its recovery hook.

``Lifeline`` is the part of a ``RemoteCore`` (either transport) that outlives one
connection. A transport gives it ``_connect`` (open a connection and be welcomed),
``_resume`` (resume the session of the RM registered before, if the daemon still has it)
and ``_tell`` (hand ``ConnectionClosed`` to the RM's callback, after what came before it);
it calls ``_lost`` when a connection ends. Without ``reconnect`` a lost connection is the
end: ``closed`` is set and ``wait_closed()`` returns. With it, calls made while the client
reconnects wait for it (up to the connect timeout), calls that were in flight fail with
``ConnectionError`` (the RM cannot know whether the daemon ran them), and once connected
again the RM's session is resumed: the daemon kept what the RM was sent while it was away
and sends it now, and the RM goes on as if nothing happened. If the daemon no longer has
the session (it restarted, or the RM was Stopped after ``--rm-timeout``), the RM's
``recover`` hook runs: it registers again and reports its state (the SI's recovery: its
applications, then its nodes with the allocations on them).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import random
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, cast

import msgspec
from loguru import logger

from scheduler._errors import SchedulerError
from scheduler.si._callback import ClosedKind, ConnectionClosed

if TYPE_CHECKING:
    from scheduler.client._native import RemoteCore

__all__ = ["Lifeline", "Reconnect", "Recover"]

#: The RM's recovery hook: called with the core when the daemon no longer has the RM's
#: session; it registers the RM again and reports its state.
Recover = Callable[["RemoteCore"], Awaitable[None]]

_log = logger.bind(transport="client")
# True in the task that restores a session: its calls (the recovery hook's) do not wait
# for the session to be restored.
_restoring: contextvars.ContextVar[bool] = contextvars.ContextVar("restoring", default=False)


class Reconnect(msgspec.Struct, frozen=True, kw_only=True):
    """How ``scheduler.client.connect(..., reconnect=Reconnect())`` reconnects: the first
    wait, doubled (``factor``) after each failed attempt up to ``most`` seconds, each drawn
    at random from ``[wait * (1 - jitter), wait]`` so that many RMs of a restarted daemon
    do not all come back at once; ``attempts`` in a row before giving up (None: never).
    """

    first: float = 0.1
    most: float = 10.0
    factor: float = 2.0
    jitter: float = 0.5
    attempts: int | None = None

    def __post_init__(self) -> None:
        if not 0 < self.first <= self.most:
            raise SchedulerError(
                f"Reconnect: first={self.first!r} and most={self.most!r} must be seconds "
                "above 0, first no more than most"
            )
        if self.factor < 1:
            raise SchedulerError(f"Reconnect: factor={self.factor!r} must be at least 1")
        if not 0 <= self.jitter <= 1:
            raise SchedulerError(f"Reconnect: jitter={self.jitter!r} must be from 0 to 1")
        if self.attempts is not None and self.attempts < 1:
            raise SchedulerError(f"Reconnect: attempts={self.attempts!r} must be at least 1")

    def waits(self, rng: random.Random) -> Iterator[float]:
        """The seconds to wait before each attempt."""
        wait, tried = self.first, 0
        while self.attempts is None or tried < self.attempts:
            yield wait * (1 - self.jitter * rng.random())
            wait = min(self.most, wait * self.factor)
            tried += 1


class Lifeline:
    """The closed state and the reconnection of a ``RemoteCore``; see the module."""

    target: str
    _timeout: float
    _reconnect: Reconnect | None
    _recover: Recover | None

    def _init_lifeline(self, reconnect: Reconnect | None, recover: Recover | None) -> None:
        self._reconnect = reconnect
        self._recover = recover
        self._ready = asyncio.Event()  # connected, and the session (if any) restored
        self._closed: ConnectionClosed | None = None
        self._closed_future: asyncio.Future[ConnectionClosed] = (
            asyncio.get_running_loop().create_future()
        )
        self._supervisor: asyncio.Task[None] | None = None
        self._closing = False
        self._registered = False  # an RM was registered on this core (and may be recovered)
        self._rng = random.Random()
        self.reconnects = 0

    # ====================================================================== the state
    @property
    def closed(self) -> ConnectionClosed | None:
        """How the connection ended for good (None while it is open or reconnecting)."""
        return self._closed

    @property
    def connected(self) -> bool:
        """Connected, and the RM's session (if any) resumed or recovered: calls go out now."""
        return self._ready.is_set() and self._closed is None

    async def wait_closed(self) -> ConnectionClosed:
        """Wait until the connection ends for good, and say how (``closed``)."""
        return await asyncio.shield(self._closed_future)

    def _error(self) -> ConnectionError:
        reason = self._closed.reason if self._closed is not None else "not connected"
        return ConnectionError(f"{self.target}: {reason}")

    async def _gate(self) -> None:
        """Before a call: wait while the client reconnects (up to the connect timeout)."""
        if self._closed is not None:
            raise self._error()
        if self._ready.is_set() or _restoring.get():
            return
        try:
            async with asyncio.timeout(self._timeout):
                await self._ready.wait()
        except TimeoutError:
            raise ConnectionError(
                f"{self.target}: not connected again within {self._timeout:g}s"
            ) from None
        if self._closed is not None:
            raise self._error()

    # ================================================================ the transport's
    async def _connect(self) -> None:
        raise NotImplementedError

    async def _resume(self) -> bool:
        raise NotImplementedError

    def _tell(self, closed: ConnectionClosed) -> None:
        raise NotImplementedError

    # ======================================================================= the loss
    def _lost(self, kind: ClosedKind, reason: str) -> None:
        """The connection ended (``kind`` as ``ConnectionClosed.kind``): the end, or a
        reconnection."""
        if self._closing or self._closed is not None:
            return
        was_ready = self._ready.is_set()
        self._ready.clear()
        final = self._reconnect is None or kind == "refused"
        closed = ConnectionClosed(kind=kind, reason=reason, final=final)
        if final:
            self._finish(closed)
            return
        if was_ready:
            _log.warning("{}: {}; reconnecting", self.target, reason)
            self._tell(closed)
        if self._supervisor is None or self._supervisor.done():
            self._supervisor = asyncio.get_running_loop().create_task(
                self._reconnecting(closed), name=f"scheduler.client reconnect {self.target}"
            )

    def _finish(self, closed: ConnectionClosed) -> None:
        """The end: ``closed``, and every call that waits fails."""
        if self._closed is not None:
            return
        self._closed = closed
        if not self._closed_future.done():
            self._closed_future.set_result(closed)
        self._ready.set()  # calls waiting at the gate see the end
        if closed.kind != "closed":
            _log.warning("{}: {} (connection closed)", self.target, closed.reason)
            self._tell(closed)

    async def _reconnecting(self, lost: ConnectionClosed) -> None:
        assert self._reconnect is not None
        _restoring.set(True)
        tried = 0
        for wait in self._reconnect.waits(self._rng):
            await asyncio.sleep(wait)
            tried += 1
            try:
                await self._connect()
                if await self._restored():
                    return
            except ConnectionRefusedError as exc:  # it would refuse again
                self._finish(ConnectionClosed(kind="refused", reason=str(exc)))
                return
            except ConnectionError as exc:
                _log.info("{}: reconnecting, attempt {} failed: {}", self.target, tried, exc)
                if self._closed is not None:
                    return  # refused, or the recovery cannot go on
        self._finish(
            ConnectionClosed(
                kind=lost.kind,
                reason=f"{lost.reason}; not connected again after {tried} attempts",
            )
        )

    async def _restored(self) -> bool:
        """Connected again: resume the RM's session, or recover it. Returns False when the
        connection was lost meanwhile (the caller tries again)."""
        resumed = await self._resume()
        if not resumed and self._registered:
            if self._recover is None:
                self._finish(
                    ConnectionClosed(
                        kind="lost",
                        reason="connected again, but the daemon no longer has the RM's "
                        "session (it restarted, or the RM was Stopped): connect with "
                        "recover= to register again and report its state",
                    )
                )
                return True
            try:
                await self._recover(cast("RemoteCore", self))
            except ConnectionError:
                raise
            except Exception as exc:
                _log.exception("{}: the RM's recover hook raised", self.target)
                self._finish(
                    ConnectionClosed(kind="lost", reason=f"the RM's recover hook raised: {exc!r}")
                )
                return True
        if not self._link_up():
            return False
        self.reconnects += 1
        _log.info(
            "{}: connected again ({}); calls go on",
            self.target,
            "session resumed" if resumed else "RM recovered" if self._registered else "no RM yet",
        )
        self._ready.set()
        return True

    def _link_up(self) -> bool:
        raise NotImplementedError

    async def _stop_lifeline(self) -> None:
        """The RM closes the connection: no reconnection, and ``closed`` says so."""
        self._closing = True
        supervisor = self._supervisor
        if supervisor is not None and supervisor is not asyncio.current_task():
            supervisor.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await supervisor
        self._finish(ConnectionClosed(kind="closed", reason="the connection is closed"))
