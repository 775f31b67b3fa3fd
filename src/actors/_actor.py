"""Actors, their references, and the mailbox cell that joins them to a dispatcher."""

from __future__ import annotations

import asyncio
import enum
import inspect
from asyncio import Future
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, ClassVar, Final, Literal, cast

import msgspec
from loguru import logger

from ._errors import ActorDeadError, AskTimeoutError
from ._turns import Frame, Promise, Sleep, driver

if TYPE_CHECKING:
    from loguru import Logger

    from ._dispatcher import Dispatcher
    from ._system import ActorSystem

__all__ = ["Actor", "ActorRef", "MailboxStats"]


class Actor:
    """Subclass and override `receive`; everything else is optional.

    The runtime sets `actor_ref`, `actor_system` and `log` (a loguru logger bound with
    `actor=<name>`) before `on_start` runs.

    `receive` may be a coroutine function. In a reentrant actor (the default) the runtime
    steps the handler itself: when it awaits a `Promise`, an `ask`, `sleep` or
    `promise.within(...)`, the handler is suspended and the actor's turn ends; the
    dispatcher goes on with every other message (of this actor too), and the handler
    continues as a later turn of this actor once what it awaited is ready. Anything else it
    awaits is awaited inline: nothing else of the dispatcher runs meanwhile. With
    ``reentrant = False`` a coroutine handler is awaited inline as a whole.

    Hooks (`on_start`, `on_stop`, `on_drained`) and `receive_batch` may be coroutine
    functions too; they are always awaited inline.
    """

    actor_ref: ActorRef
    actor_system: ActorSystem
    log: Logger
    #: False: coroutine handlers run to completion before the next message (an actor that
    #: calls foreign code whose awaits must not let its next message in).
    reentrant: ClassVar[bool] = True

    def receive(self, message: object) -> object:
        """Handle one message; the return value is the reply to an `ask`."""
        raise NotImplementedError(f"{type(self).__name__} does not handle {type(message).__name__}")

    def receive_batch(self, messages: list[object]) -> Awaitable[None] | None:
        """Handle every queued tell at once; only called when a subclass overrides it.

        Asks still go through `receive`, in mailbox order.
        """
        for message in messages:
            self.receive(message)
        return None

    def on_start(self) -> Awaitable[None] | None:
        """Called by the dispatcher before the first message."""
        return None

    def on_stop(self) -> Awaitable[None] | None:
        """Called by the dispatcher after the last message (also before a restart)."""
        return None

    def on_drained(self) -> Awaitable[None] | None:
        """Called when every mailbox of the actor's dispatcher group is empty."""
        return None

    # -- handlers that await ---------------------------------------------------------------
    def promise(self) -> Promise[Any]:
        """A new `Promise`: a handler awaits it, a later handler (of any actor) settles it."""
        return Promise()

    def sleep(self, seconds: float) -> Awaitable[None]:
        """Awaitable in a handler: continue after ``seconds`` of the system's clock."""
        return Sleep(seconds)

    def run_handler(self, coro: Coroutine[Any, Any, Any]) -> None:
        """Run ``coro`` as a handler of this actor, starting now, in the caller's turn.

        It runs until it first awaits something not ready yet; from then on it goes on as
        turns of this actor, like a handler that a message began. Its errors go through
        supervision like any handler error. Call it from a handler or hook of this actor's
        dispatcher (or while that dispatcher is idle), so that the first step shares a turn
        with nothing else.

        Raises:
            ActorDeadError: This actor has stopped (``coro`` is closed).
            RuntimeError: Called while another task holds this dispatcher's turn.
        """
        cell = self.actor_ref._cell
        if cell.closed:
            coro.close()
            raise ActorDeadError(f"actor {cell.name!r} is stopped")
        dispatcher = cell.dispatcher
        if not dispatcher._idle and asyncio.current_task() is not dispatcher._task:
            coro.close()
            raise RuntimeError(
                f"run_handler on {cell.name!r} from outside its dispatcher's turn "
                f"({dispatcher.name!r} is busy)"
            )
        dispatcher._start_frame(cell, coro)


class MailboxStats(msgspec.Struct, frozen=True):
    """A snapshot of one actor's mailbox and handler counters.

    `peak` is the largest queue length seen when the dispatcher picked up a batch (or now);
    `handler_time` is wall time in seconds spent in the actor's handlers and hooks;
    `failures` counts handler and hook exceptions (tells, asks, hooks);
    `suspended` counts handlers waiting for something to be ready (a promise, an ask, a
    deadline), and `resumed` the continuations run so far.
    """

    queued: int
    peak: int
    processed: int
    handler_time: float
    failures: int
    suspended: int = 0
    resumed: int = 0


class _Ask(msgspec.Struct, gc=False):
    """An ask waiting in a mailbox: the message and where its reply goes.

    The reply goes to an asyncio future, or to a `Promise` when a handler asked. A msgspec
    Struct because it is built in C: one is made per ask. Untracked by the garbage
    collector: it never takes part in a reference cycle.
    """

    message: object
    future: asyncio.Future[object] | Promise[object]
    since: float | None = None  # coarse send time, for the default-timeout sweep


class _Default(enum.Enum):
    TIMEOUT = "system default"


SYSTEM_DEFAULT: Final = _Default.TIMEOUT

# control flags: work for the dispatcher besides messages
START: Final = 1
RESTART: Final = 2
STOP: Final = 4


class Cell:
    """One actor's mailbox, state and counters; owned by its dispatcher."""

    __slots__ = (
        "actor",
        "asks",
        "batch_fn",
        "closed",
        "control",
        "dead",
        "dispatcher",
        "driven",
        "dropped",
        "factory",
        "failures",
        "fast",
        "frames",
        "handler_time",
        "has_drained",
        "is_async",
        "log",
        "mailbox",
        "name",
        "peak",
        "processed",
        "receive",
        "ref",
        "restart",
        "resumed",
        "resumes",
        "scheduled",
        "started",
        "system",
    )

    def __init__(
        self,
        system: ActorSystem,
        dispatcher: Dispatcher,
        name: str,
        actor: Actor,
        factory: Callable[[], Actor] | None,
        restart: bool,
    ) -> None:
        self.system = system
        self.dispatcher = dispatcher
        self.name = name
        self.factory = factory
        self.restart = restart
        self.mailbox: deque[object] = deque()
        self.asks = 0
        self.scheduled = False  # in the dispatcher's ready queue (or in its hands)
        self.closed = False  # stop requested: no more messages are taken
        self.dead = False  # stopped and finalised
        self.started = False
        self.control = 0
        self.peak = 0
        self.processed = 0
        self.handler_time = 0.0
        self.failures = 0
        self.dropped = 0
        # Handlers that awaited: every started, unfinished frame, and those ready to go on.
        self.frames: dict[Frame, None] = {}
        self.resumes: deque[Frame] = deque()
        self.resumed = 0
        self.log = logger.bind(actor=name)
        self.ref = ActorRef(self)
        self.bind(actor)

    def bind(self, actor: Actor) -> None:
        """Make `actor` the instance behind this cell (at spawn and on restart)."""
        if not isinstance(actor, Actor):
            raise TypeError(f"expected an Actor, got {type(actor).__name__}")
        actor.actor_ref = self.ref
        actor.actor_system = self.system
        actor.log = self.log
        cls = type(actor)
        self.actor = actor
        self.receive: Callable[[object], object] = actor.receive
        self.is_async = inspect.iscoroutinefunction(actor.receive)
        overrides_batch = cls.receive_batch is not Actor.receive_batch
        self.batch_fn = actor.receive_batch if overrides_batch else None
        self.has_drained = cls.on_drained is not Actor.on_drained
        self.fast = not self.is_async and self.batch_fn is None
        self.driven = self.is_async and cls.reentrant

    def release(self) -> None:
        """The actor stopped for good: its cell lets go of the instance (and of what it
        would restart from). A ref to it held anywhere (a stale entry, a message in
        flight) then keeps this small cell, not the actor and all its state."""
        self.actor = _STOPPED
        self.receive = _STOPPED.receive
        self.batch_fn = None
        self.factory = None
        # The ref and the cell refer to each other: a cycle only a full collection of the
        # cyclic collector would free (rare in a tuned daemon, and every stopped actor
        # would wait for it). The ref points at a tombstone from now on.
        self.ref._cell = cast("Cell", _Tombstone(self))
        self.ref._mailbox = _NO_MAILBOX

    def tell_slow(self, message: object) -> None:
        if self.closed:
            raise ActorDeadError(f"actor {self.name!r} is stopped")
        self.mailbox.append(message)
        if not self.scheduled:
            self.dispatcher._schedule(self)

    def request(self, flag: int) -> None:
        """Ask the dispatcher to start, restart or stop this actor."""
        self.control |= flag
        if flag == STOP:
            self.closed = True
            self.ref._hot = False
            self.dropped += self.drop_mailbox()  # queued asks fail now, not after the one in hand
        if not self.scheduled:
            self.dispatcher._schedule(self)

    def drop_mailbox(self) -> int:
        """Empty the mailbox: asks fail with ActorDeadError; returns the tells dropped."""
        mailbox = self.mailbox
        dropped = 0
        while mailbox:
            message = mailbox.popleft()
            if type(message) is _Ask:
                if not message.future.done():
                    message.future.set_exception(ActorDeadError(f"actor {self.name!r} stopped"))
            else:
                dropped += 1
        self.asks = 0
        return dropped

    def stats(self) -> MailboxStats:
        queued = len(self.mailbox)
        return MailboxStats(
            queued=queued,
            peak=max(self.peak, queued),
            processed=self.processed,
            handler_time=self.handler_time,
            failures=self.failures,
            suspended=len(self.frames) - len(self.resumes),
            resumed=self.resumed,
        )


class _Stopped(Actor):
    """What a stopped actor's cell holds in place of its instance (``Cell.release``)."""

    def receive(self, message: object) -> object:
        raise ActorDeadError("the actor has stopped")


_STOPPED = _Stopped()
_NO_MAILBOX: deque[object] = deque(maxlen=0)


class _Tombstone:
    """What the refs of a stopped actor point at once its cell is released: stopped, with
    its last counters (``ActorRef`` reads only these of a closed cell)."""

    __slots__ = ("_stats", "name", "peak")
    closed = True
    dead = True
    mailbox = _NO_MAILBOX

    def __init__(self, cell: Cell) -> None:
        self.name = cell.name
        self.peak = cell.peak
        self._stats = cell.stats()

    def tell_slow(self, message: object) -> None:
        raise ActorDeadError(f"actor {self.name!r} is stopped")

    def request(self, flag: int) -> None:
        """Nothing to stop any more."""

    def stats(self) -> MailboxStats:
        return self._stats


class ActorRef:
    """The only way to talk to an actor: `tell`, `ask`, `stats`, `stop`."""

    __slots__ = ("_cell", "_hot", "_mailbox", "name")

    def __init__(self, cell: Cell) -> None:
        self._cell = cell
        self._mailbox = cell.mailbox
        self._hot = False  # scheduled and open: tell only appends (kept here for speed)
        self.name = cell.name

    def tell(self, message: object) -> None:
        """Queue `message` for the actor; never blocks, never awaits.

        Raises:
            ActorDeadError: The actor has stopped.
        """
        if self._hot:
            self._mailbox.append(message)
        else:
            self._cell.tell_slow(message)

    async def ask(
        self, message: object, timeout: float | Literal[_Default.TIMEOUT] | None = SYSTEM_DEFAULT
    ) -> object:
        """Send `message` and wait for the value `receive` returns for it.

        Args:
            message: The request.
            timeout: Real seconds to wait (a liveness guard, not the injected clock);
                None waits forever; by default the system's `default_ask_timeout`.

        Returns:
            The handler's return value.

        From a handler of a reentrant actor the ask suspends the handler (its turn ends) until
        the reply comes, so it may ask any actor, one of its own dispatcher or itself included.

        Raises:
            ActorDeadError: The actor is stopped, or stopped before handling the ask.
            AskTimeoutError: No reply within `timeout`.
            RuntimeError: Asked from code its own dispatcher awaits inline (a hook or a
                non-reentrant handler): that would deadlock.
            Exception: Whatever the handler raised.
        """
        cell = self._cell
        if cell.closed:
            raise ActorDeadError(f"actor {self.name!r} is stopped")
        dispatcher = cell.dispatcher
        loop = asyncio.get_running_loop()
        future: asyncio.Future[object] | Promise[object]
        if driver.current is not None:
            future = Promise()  # the asking handler parks on it: no deadlock, no task
        elif dispatcher._awaiting and asyncio.current_task() is dispatcher._task:
            raise RuntimeError(
                f"ask to {self.name!r} from its own dispatcher {dispatcher.name!r} would deadlock"
            )
        else:
            future = Future(loop=loop)
        since: float | None = None
        if timeout is SYSTEM_DEFAULT:
            # The system's sweep guards default-timeout asks: no timer per ask.
            system = cell.system
            if system._ask_timeout is not None:
                if system._sweeper is None:
                    system._arm_sweeper()
                since = system._coarse_now
            timeout = None
        cell.asks += 1
        cell.mailbox.append(_Ask(message, future, since))
        if not cell.scheduled:  # Dispatcher._schedule, inlined: asks are a hot path
            cell.scheduled = True
            self._hot = True
            dispatcher._ready.append(cell)
            if dispatcher._idle:
                dispatcher._idle = False
                cell.system._busy += 1
                waiter = dispatcher._waiter
                if waiter is not None:
                    dispatcher._waiter = None
                    if not waiter.done():
                        waiter.set_result(None)
        if timeout is None:
            return await future
        expiry = loop.call_later(timeout, expire, future, self.name, timeout)
        try:
            return await future
        finally:
            expiry.cancel()

    def stats(self) -> MailboxStats:
        """A snapshot of this actor's mailbox counters."""
        return self._cell.stats()

    def stop(self) -> None:
        """Stop this actor only: it finishes the message in hand, then `on_stop` runs.

        Asks still queued fail with `ActorDeadError`; later tells and asks raise it.
        A no-op if the actor is already stopping.
        """
        cell = self._cell
        if not cell.closed:
            cell.request(STOP)

    @property
    def alive(self) -> bool:
        """False once `stop()` was requested (or the system stopped)."""
        return not self._cell.closed

    def __repr__(self) -> str:
        cell = self._cell
        queued = len(cell.mailbox)
        state = "" if not cell.closed else " stopped" if cell.dead else " stopping"
        return f"<ActorRef {self.name} queued={queued} peak={max(cell.peak, queued)}{state}>"


def expire(
    future: asyncio.Future[object] | Promise[object], name: str, timeout: float | None
) -> None:
    if not future.done():
        future.set_exception(AskTimeoutError(f"ask to {name!r} timed out after {timeout}s"))
