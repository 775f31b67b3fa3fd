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
from time import perf_counter
from typing import TYPE_CHECKING, Any, Final, Generic, Protocol, TypeVar

import msgspec

from ._errors import ActorDeadError, DeadlineExceeded
from ._timers import RuntimeTimer

if TYPE_CHECKING:
    from ._actor import Cell, _Ask

__all__ = ["Continuations", "Promise"]

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


class Frame(msgspec.Struct, gc=False, eq=False):
    """One running handler coroutine of an actor (a message's, or one `run_handler` began).

    Built in C and not tracked by the garbage collector (one is made per handler that
    awaits): the reference cycle a parked frame is part of (frame, coroutine, what it
    awaits) is broken by the runtime when it wakes or is closed.
    """

    cell: Cell
    coro: Coroutine[Any, Any, Any]
    ask: _Ask | None  # the ask this handler answers, if any
    _kind: str | None
    state: int = RUNNING
    waiting: Any = None  # what it is parked on

    @property
    def kind(self) -> str:
        """What it handles, for logs: the message's type, or the coroutine's name."""
        if self._kind is None:
            self._kind = getattr(self.coro, "__qualname__", type(self.coro).__name__)
        return self._kind

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

    # One waiter is kept as is, several in a list.
    __slots__ = ("_error", "_value", "_waiters")

    def __init__(self) -> None:
        self._value: Any = _PENDING
        self._error: BaseException | None = None
        self._waiters: _Waker | list[_Waker] | None = None

    def done(self) -> bool:
        """True once resolved or rejected."""
        return self._value is not _PENDING or self._error is not None

    def resolve(self, value: T) -> bool:
        """Settle with ``value``; returns False (and changes nothing) if already settled."""
        if self._value is not _PENDING or self._error is not None:
            return False
        self._value = value
        if self._waiters is not None:
            self._wake_all()
        return True

    def reject(self, error: BaseException) -> bool:
        """Settle with ``error``, raised in whoever awaits; False if already settled."""
        if self._value is not _PENDING or self._error is not None:
            return False
        self._error = error
        if self._waiters is not None:
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
        return _Timed(self, float(seconds))

    def _wake_all(self) -> None:
        waiters, self._waiters = self._waiters, None
        if type(waiters) is list:
            for waiter in waiters:
                waiter.wake()
        elif waiters is not None:
            waiters.wake()  # type: ignore[union-attr]

    def add_waiter(self, waiter: _Waker) -> None:
        current = self._waiters
        if current is None:
            self._waiters = waiter
        elif type(current) is list:
            current.append(waiter)
        else:
            self._waiters = [current, waiter]  # type: ignore[list-item]

    def park(self, frame: Frame) -> None:
        self.add_waiter(frame)

    def abandon(self, frame: _Waker) -> None:
        current = self._waiters
        if current is frame:
            self._waiters = None
        elif type(current) is list and frame in current:
            current.remove(frame)

    def __await__(self) -> Generator[Any, None, T]:
        if self._value is _PENDING and self._error is None:
            if driver.current is not None:
                yield self  # the dispatcher parks the handler on this promise
            else:  # plain asyncio code: wait on a future
                waiter = _FutureWaiter(asyncio.get_running_loop().create_future())
                self.add_waiter(waiter)
                yield from waiter.future.__await__()
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[no-any-return]

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


class _Timed(RuntimeTimer, Waitable, Generic[T]):
    """`Promise.within`: the promise, or `DeadlineExceeded` when the clock passes first.

    One object is the awaitable and its timer (armed when the handler parks).
    """

    __slots__ = ("_frame", "_promise", "_seconds")

    def __init__(self, promise: Promise[T], seconds: float) -> None:
        self._promise = promise
        self._seconds = seconds
        self._frame: Frame | None = None

    def __await__(self) -> Generator[Any, None, T]:
        promise = self._promise
        if promise._value is _PENDING and promise._error is None:
            if driver.current is None:
                raise RuntimeError("within() can only be awaited in a handler of a reentrant actor")
            yield self
            if promise._value is _PENDING and promise._error is None:
                raise DeadlineExceeded(f"no answer within {self._seconds:g}s")
        if promise._error is not None:
            raise promise._error
        return promise._value  # type: ignore[no-any-return]

    def park(self, frame: Frame) -> None:
        self._frame = frame
        self._promise.add_waiter(self)
        frame.cell.system.timers.arm(self, self._seconds)

    def wake(self) -> None:  # the promise settled first
        frame, self._frame = self._frame, None
        if frame is not None:
            self.cancel()
            frame.wake()

    def fire(self) -> None:  # the deadline came first
        frame, self._frame = self._frame, None
        if frame is not None:
            self._promise.abandon(self)
            frame.wake()

    def abandon(self, frame: Frame) -> None:
        self._frame = None
        self.cancel()
        self._promise.abandon(self)


class Sleep(RuntimeTimer, Waitable):
    """`Actor.sleep`: wake the handler after ``seconds`` of the system's clock."""

    __slots__ = ("_frame", "_seconds")

    def __init__(self, seconds: float) -> None:
        self._seconds = seconds
        self._frame: Frame | None = None

    def __await__(self) -> Generator[Any, None, None]:
        if driver.current is None:
            raise RuntimeError(
                "Actor.sleep() can only be awaited in a handler of a reentrant actor"
            )
        yield self

    def park(self, frame: Frame) -> None:
        self._frame = frame
        frame.cell.system.timers.arm(self, self._seconds)

    def fire(self) -> None:
        frame, self._frame = self._frame, None
        if frame is not None:
            frame.wake()

    def abandon(self, frame: Frame) -> None:
        self._frame = None
        self.cancel()


class Continuations:
    """The part of a dispatcher that steps coroutine handlers: starts them, parks them on
    what they await, resumes them as turns, awaits foreign awaitables inline, and closes
    them when their actor stops. Mixed into `Dispatcher`."""

    __slots__ = ("_awaiting", "_in_hand")

    _awaiting: bool  # awaiting something inline (a hook, a foreign awaitable)
    _in_hand: tuple[_Ask, str] | None  # the ask whose handler is awaited inline

    if TYPE_CHECKING:  # provided by Dispatcher

        def _schedule(self, cell: Cell) -> None: ...

        def _failed(self, cell: Cell, kind: str) -> None: ...

        def _tell_failed(self, cell: Cell, message: object) -> None: ...

        def _ask_failed(self, cell: Cell, ask: _Ask, exc: Exception) -> None: ...

    async def _begin(self, cell: Cell, message: object, ask: _Ask | None) -> None:
        """Start the coroutine handler of a reentrant actor for one message."""
        try:
            coro = cell.receive(message)
        except Exception as exc:  # the call itself failed (a bad signature, say)
            if ask is not None:
                self._ask_failed(cell, ask, exc)
            else:
                self._tell_failed(cell, message)
            return
        frame = Frame(cell, coro, ask, type(message).__name__)  # type: ignore[arg-type]
        yielded = self._step(frame, None)
        if yielded is not _PARKED:
            await self._inline(frame, yielded)

    def _start_frame(self, cell: Cell, coro: Coroutine[Any, Any, Any]) -> None:
        """`Actor.run_handler`: the first step now; a foreign await goes on as a turn."""
        frame = Frame(cell, coro, None, None)
        yielded = self._step(frame, None)
        if yielded is not _PARKED:
            # It must wait inline, which only the dispatcher's task can do: as its next turn.
            frame.waiting = _Inline(yielded)
            frame.state = RUNNABLE
            cell.frames[frame] = None
            cell.resumes.append(frame)
            if not cell.scheduled:
                self._schedule(cell)

    async def _resume(self, cell: Cell, k: int) -> int:
        """Run up to ``k`` continuations of ``cell``, oldest first; returns how many ran
        (and counts them, and their time, in the cell's stats)."""
        started = perf_counter()
        resumes = cell.resumes
        done = 0
        while resumes and done < k and not cell.closed and not cell.control:
            frame = resumes.popleft()
            done += 1
            frame.state = RUNNING
            del cell.frames[frame]  # in hand now; back in if it parks again
            inline = frame.waiting  # None, but for a run_handler frame's first foreign wait
            if inline is not None:
                frame.waiting = None
                await self._inline(frame, inline.awaitable)
                continue
            yielded = self._step(frame, None)
            if yielded is not _PARKED:
                await self._inline(frame, yielded)
        cell.handler_time += perf_counter() - started
        cell.resumed += done
        return done

    def _step(self, frame: Frame, error: BaseException | None) -> object:
        """Run ``frame`` until it awaits; returns what it awaits unless it parked or ended."""
        previous = driver.current
        driver.current = frame
        try:
            yielded = frame.coro.send(None) if error is None else frame.coro.throw(error)
        except StopIteration as stop:
            driver.current = previous
            frame.state = DONE  # a frame in hand is in no ``frames`` and waits on nothing
            ask = frame.ask
            if ask is not None and not ask.future.done():
                ask.future.set_result(stop.value)
            return _PARKED
        except Exception as exc:
            driver.current = previous
            self._frame_done(frame)
            if frame.ask is not None:
                self._ask_failed(frame.cell, frame.ask, exc)
            else:
                self._failed(frame.cell, frame.kind)
            return _PARKED
        except BaseException:
            driver.current = previous
            self._frame_done(frame)
            ask = frame.ask
            if ask is not None and not ask.future.done():
                ask.future.set_exception(ActorDeadError(f"actor {frame.cell.name!r} stopped"))
            raise
        driver.current = previous
        if isinstance(yielded, Waitable):
            frame.state = PARKED
            frame.waiting = yielded
            frame.cell.frames[frame] = None
            yielded.park(frame)
            return _PARKED
        return yielded

    async def _inline(self, frame: Frame, yielded: object) -> None:
        """Await what the runtime does not know (an asyncio future) in this task, then go on
        stepping ``frame``: nothing else of the group runs meanwhile."""
        self._awaiting = True
        if frame.ask is not None:
            self._in_hand = (frame.ask, frame.cell.name)
        try:
            while yielded is not _PARKED:
                error: BaseException | None = None
                if yielded is None:
                    await asyncio.sleep(0)  # a bare yield: let other tasks run once
                elif isinstance(yielded, asyncio.Future):
                    yielded._asyncio_future_blocking = False
                    await asyncio.wait((yielded,))
                else:
                    error = RuntimeError(
                        f"a handler of {frame.cell.name!r} awaited {yielded!r}, which neither "
                        "the actor runtime nor asyncio can wait for"
                    )
                yielded = self._step(frame, error)
        except BaseException:  # cancelled while waiting: the handler cannot go on
            self._close_frame(frame)
            raise
        finally:
            self._awaiting = False
            self._in_hand = None

    @staticmethod
    def _frame_done(frame: Frame) -> None:
        frame.state = DONE
        frame.waiting = None
        frame.cell.frames.pop(frame, None)

    def _close_frame(self, frame: Frame) -> None:
        """Cancel a handler that will never go on: its ``finally`` blocks run now."""
        if frame.state == DONE:
            return
        waiting = frame.waiting
        self._frame_done(frame)
        if waiting is not None:
            waiting.abandon(frame)
        previous = driver.current
        driver.current = frame
        try:
            frame.coro.close()
        except Exception:
            frame.cell.log.exception(
                "actor {!r}: a suspended {} handler failed while cancelled",
                frame.cell.name,
                frame.kind,
            )
        finally:
            driver.current = previous
        ask = frame.ask
        if ask is not None and not ask.future.done():
            ask.future.set_exception(ActorDeadError(f"actor {frame.cell.name!r} stopped"))

    def _cancel_frames(self, cell: Cell) -> None:
        """The actor stops or restarts: its suspended handlers never go on."""
        for frame in list(cell.frames):
            self._close_frame(frame)
        cell.frames.clear()
        cell.resumes.clear()  # last: a closing handler's finally may have woken a sibling


class _Parked:
    __slots__ = ()


_PARKED = _Parked()  # what a step returns when the frame finished or parked on a Waitable


class _Inline(Waitable):
    """A foreign awaitable a handler began by `run_handler` met in its first step: the
    dispatcher awaits it inline as that handler's next turn."""

    __slots__ = ("awaitable",)

    def __init__(self, awaitable: object) -> None:
        self.awaitable = awaitable

    def park(self, frame: Frame) -> None:  # never parked on: it is queued at once
        raise AssertionError("an inline wait is not parked")
