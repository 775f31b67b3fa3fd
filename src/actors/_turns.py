"""Handlers that await: promises, suspended handlers and their continuations.

A handler coroutine of a reentrant actor is not awaited by its dispatcher's task: the
dispatcher steps it (``coro.send``) itself. When it awaits something the runtime knows (a
`Promise`, an ask made from the handler, a deadline or a sleep on the system's clock), the
step yields that object, the frame parks on it and the actor's turn ends. When the object
is ready it wakes the frame: the frame is queued as a continuation of its actor and runs as
a later turn on the actor's own dispatcher, never beside another handler of that
dispatcher (the turn-based model of Orleans grains).

Anything else a handler awaits (an asyncio future, ``asyncio.sleep``) is awaited inline:
the dispatcher waits for it and nothing else of its group runs meanwhile.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Generator
from typing import TYPE_CHECKING, Any, Final, Generic, Protocol, TypeVar

from ._errors import DeadlineExceeded

if TYPE_CHECKING:
    from ._actor import Cell, _Ask
    from ._timers import TimerHandle

__all__ = ["Promise"]

T = TypeVar("T")


class _Driver:
    """Which frame is being stepped right now (None: plain asyncio code is running)."""

    __slots__ = ("current",)

    def __init__(self) -> None:
        self.current: Frame | None = None


driver: Final = _Driver()

# Frame states
RUNNING: Final = 0  # being stepped, or waiting inline for a foreign awaitable
PARKED: Final = 1  # suspended on a runtime awaitable
RUNNABLE: Final = 2  # woken: queued as a continuation of its actor
DONE: Final = 3  # returned, raised or was closed


class Frame:
    """One running handler coroutine of an actor (a message's, or one `run_handler` began)."""

    __slots__ = ("ask", "cell", "coro", "kind", "state", "waiting")

    def __init__(
        self, cell: Cell, coro: Coroutine[Any, Any, Any], ask: _Ask | None, kind: str
    ) -> None:
        self.cell = cell
        self.coro = coro
        self.ask = ask  # the ask this handler answers, if any
        self.kind = kind  # what it handles, for logs
        self.state = RUNNING
        self.waiting: Waitable | None = None

    def wake(self) -> None:
        """The awaited thing is ready: queue this frame as a turn of its actor."""
        if self.state != PARKED:
            return
        self.waiting = None
        cell = self.cell
        if cell.closed:
            return  # stopping: it is closed with the actor, never resumed
        self.state = RUNNABLE
        cell.resumes.append(self)
        if not cell.scheduled:
            cell.dispatcher._schedule(cell)

    def __repr__(self) -> str:
        state = ("running", "parked", "runnable", "done")[self.state]
        return f"<Frame {self.cell.name} {self.kind} {state}>"


class Waitable:
    """What a driven handler can await without blocking its dispatcher."""

    __slots__ = ()

    def park(self, frame: Frame) -> None:
        """Remember ``frame`` and wake it when ready."""
        raise NotImplementedError

    def abandon(self, frame: Frame) -> None:
        """``frame`` was closed while parked here: forget it."""


class _Waker(Protocol):
    def wake(self) -> None: ...


class _Pending:
    __slots__ = ()

    def __repr__(self) -> str:
        return "pending"


_PENDING: Final = _Pending()


class Promise(Waitable, Generic[T]):
    """A value some later handler provides: `resolve` it, `reject` it, or `await` it.

    Awaited from a handler of a reentrant actor, it suspends the handler and ends its turn;
    the handler goes on as a later turn of the same actor once the promise is settled.
    Awaited from plain asyncio code it behaves like a future. Settling a settled promise is a
    no-op that returns False.
    """

    __slots__ = ("_error", "_value", "_waiters")

    def __init__(self) -> None:
        self._value: Any = _PENDING
        self._error: BaseException | None = None
        self._waiters: list[_Waker] = []

    def done(self) -> bool:
        """True once resolved or rejected."""
        return self._value is not _PENDING or self._error is not None

    def resolve(self, value: T) -> bool:
        """Settle with ``value``; returns False (and changes nothing) if already settled."""
        if self._value is not _PENDING or self._error is not None:
            return False
        self._value = value
        self._wake_all()
        return True

    def reject(self, error: BaseException) -> bool:
        """Settle with ``error``, raised in whoever awaits; False if already settled."""
        if self._value is not _PENDING or self._error is not None:
            return False
        self._error = error
        self._wake_all()
        return True

    # The names an asyncio future has, so an ask's reply slot can be either.
    def set_result(self, value: T) -> None:
        self.resolve(value)

    def set_exception(self, error: BaseException) -> None:
        self.reject(error)

    def result(self) -> T:
        """The value, or the error raised.

        Raises:
            asyncio.InvalidStateError: Not settled yet.
        """
        if self._error is not None:
            raise self._error
        if self._value is _PENDING:
            raise asyncio.InvalidStateError("the promise is not settled yet")
        return self._value  # type: ignore[no-any-return]

    def within(self, seconds: float) -> _Timed[T]:
        """Await this promise for at most ``seconds`` of the system's clock.

        ``await promise.within(60)`` raises `DeadlineExceeded` when the time passes first;
        the promise itself stays as it is and can be awaited again. Only in a handler.
        """
        return _Timed(self, seconds)

    def _wake_all(self) -> None:
        waiters = self._waiters
        if waiters:
            self._waiters = []
            for waiter in waiters:
                waiter.wake()

    def park(self, frame: Frame) -> None:
        self._waiters.append(frame)

    def abandon(self, frame: _Waker) -> None:
        if frame in self._waiters:
            self._waiters.remove(frame)

    def __await__(self) -> Generator[Any, None, T]:
        if not self.done():
            if driver.current is not None:
                yield self  # the dispatcher parks the handler on this promise
            else:
                waiter = _FutureWaiter(asyncio.get_running_loop().create_future())
                self._waiters.append(waiter)
                yield from waiter.future.__await__()
        return self.result()

    def __repr__(self) -> str:
        if self._error is not None:
            return f"<Promise rejected {type(self._error).__name__}>"
        return f"<Promise {self._value!r}>" if self.done() else "<Promise pending>"


class _FutureWaiter:
    """Plain asyncio code awaiting a promise: a future set when it settles."""

    __slots__ = ("future",)

    def __init__(self, future: asyncio.Future[None]) -> None:
        self.future = future

    def wake(self) -> None:
        if not self.future.done():
            self.future.set_result(None)


class _Timed(Waitable, Generic[T]):
    """`Promise.within`: the promise, or `DeadlineExceeded` when the clock passes first."""

    __slots__ = ("_frame", "_handle", "_promise", "_seconds")

    def __init__(self, promise: Promise[T], seconds: float) -> None:
        self._promise = promise
        self._seconds = seconds
        self._frame: Frame | None = None
        self._handle: TimerHandle | None = None

    def __await__(self) -> Generator[Any, None, T]:
        promise = self._promise
        if not promise.done():
            if driver.current is None:
                raise RuntimeError("within() can only be awaited in an actor's handler")
            yield self
            if not promise.done():
                raise DeadlineExceeded(f"no answer within {self._seconds:g}s")
        return promise.result()

    def park(self, frame: Frame) -> None:
        self._frame = frame
        self._promise._waiters.append(self)
        self._handle = frame.cell.system.timers.call_after(self._seconds, self._expire)

    def wake(self) -> None:  # the promise settled first
        frame, self._frame = self._frame, None
        if frame is not None:
            if self._handle is not None:
                self._handle.cancel()
            frame.wake()

    def _expire(self) -> None:
        frame, self._frame = self._frame, None
        if frame is not None:
            self._promise.abandon(self)
            frame.wake()

    def abandon(self, frame: Frame) -> None:
        self._frame = None
        if self._handle is not None:
            self._handle.cancel()
        self._promise.abandon(self)


class Sleep(Waitable):
    """`Actor.sleep`: wake the handler after ``seconds`` of the system's clock."""

    __slots__ = ("_handle", "_seconds")

    def __init__(self, seconds: float) -> None:
        self._seconds = seconds
        self._handle: TimerHandle | None = None

    def __await__(self) -> Generator[Any, None, None]:
        if driver.current is None:
            raise RuntimeError("Actor.sleep() can only be awaited in an actor's handler")
        yield self

    def park(self, frame: Frame) -> None:
        self._handle = frame.cell.system.timers.call_after(self._seconds, frame.wake)

    def abandon(self, frame: Frame) -> None:
        if self._handle is not None:
            self._handle.cancel()
