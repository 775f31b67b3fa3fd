"""The actor system: registry of actors and dispatchers, owner of every task."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from time import monotonic
from types import TracebackType
from typing import Final

import anyio
from loguru import logger

from ._actor import START, STOP, Actor, ActorRef, Cell, MailboxStats, _Ask, expire
from ._clock import Clock, ManualClock, SystemClock
from ._dispatcher import DEFAULT_BATCH, Dispatcher
from ._timers import Timers

__all__ = ["ActorSystem"]

_SWEEPS_PER_TIMEOUT = 8  # a default-timeout ask fails within (1, 1 + 2/8] x timeout
_NEW: Final = "new"
_RUNNING: Final = "running"
_STOPPING: Final = "stopping"
_STOPPED: Final = "stopped"


class ActorSystem:
    """Actors, their dispatchers and timers, owned by one task group in `run()`.

    Requires anyio's asyncio backend (the hot path uses asyncio futures directly). Call the
    public methods from the event loop's thread only.

    ```python
    system = ActorSystem(ManualClock())
    owner = asyncio.get_running_loop().create_task(system.run())
    await system.ready()
    ...
    system.stop()
    await owner          # re-raises if the system crashed
    ```
    or `async with ActorSystem() as system: ...`, which does exactly that.

    Args:
        clock: Where timers read the time; `SystemClock()` by default. A `ManualClock`
            gets this system attached to it, so `advance()` delivers its timers.
        default_ask_timeout: Real seconds an `ask` waits by default; None waits forever.
    """

    def __init__(
        self, clock: Clock | None = None, *, default_ask_timeout: float | None = 30.0
    ) -> None:
        self.clock: Clock = clock if clock is not None else SystemClock()
        self._ask_timeout = default_ask_timeout
        self._sweeper: asyncio.TimerHandle | None = None  # armed while default asks wait
        self._coarse_now = 0.0  # monotonic(), refreshed at least every sweep period
        self.timers = Timers(self.clock)
        self._cells: dict[str, Cell] = {}
        self._retired: dict[str, MailboxStats] = {}  # stopped actors' totals, by class name
        self._dispatchers: dict[str, Dispatcher] = {}
        self._private: dict[Dispatcher, None] = {}  # one per actor spawned without a group
        self._state: str = _NEW
        self._stop_requested = False
        self._busy = 0  # dispatchers with work in hand or queued
        self._settlers: list[asyncio.Future[None]] = []
        self._ready_event = asyncio.Event()
        self._stop_event = asyncio.Event()
        self._task_group: anyio.abc.TaskGroup | None = None
        self._timer_scope: anyio.CancelScope | None = None
        self._owner: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()  # dispatcher tasks
        if isinstance(self.clock, ManualClock):
            self.clock._attach(self)

    def __repr__(self) -> str:
        dispatchers = len(self._dispatchers) + len(self._private)
        return (
            f"<ActorSystem {self._state} actors={len(self._cells)} dispatchers={dispatchers} "
            f"busy={self._busy} timers={len(self.timers)}>"
        )

    # -- lifecycle -----------------------------------------------------------------

    async def run(self) -> None:
        """Run every dispatcher and the timer task until `stop()`; call once.

        Raises:
            RuntimeError: Called twice, or not on the asyncio backend.
            BaseException: Whatever crashed the system itself (not a handler failure).
        """
        if self._state != _NEW:
            raise RuntimeError(f"ActorSystem.run() called on a {self._state} system")
        asyncio.get_running_loop()  # the asyncio backend is required
        self._state = _RUNNING
        self._timer_scope = anyio.CancelScope()
        try:
            async with anyio.create_task_group() as task_group:
                self._task_group = task_group
                task_group.start_soon(self._run_timers, name="actors-timers")
                for dispatcher in [*self._dispatchers.values(), *self._private]:
                    if dispatcher._cells:
                        self._start(dispatcher)
                self._ready_event.set()
                logger.debug("actor system running")
                await self._stop_event.wait()
                self._state = _STOPPING
                self._close_all()
                self._timer_scope.cancel()
                self.timers._cancel_all()
            # leaving the task group waited for every dispatcher to finish its actors
        except BaseExceptionGroup as group:
            if len(group.exceptions) == 1:
                raise group.exceptions[0] from group
            raise
        finally:
            if self._tasks:  # only if cancelled before an owner first ran
                with anyio.CancelScope(shield=True):
                    for task in list(self._tasks):
                        task.cancel()
                    await asyncio.gather(*self._tasks, return_exceptions=True)
            self._abort()
            logger.debug("actor system stopped")

    async def ready(self) -> ActorSystem:
        """Wait until `run()` has started (or ended); returns the system."""
        await self._ready_event.wait()
        return self

    def stop(self) -> None:
        """Ask `run()` to shut down in order, and return at once.

        Every actor finishes the message in hand, its asks still queued fail with
        `ActorDeadError` and `on_stop` runs; timers are cancelled; then `run()` returns.
        Tells and asks raise `ActorDeadError` from now on.
        """
        if self._stop_requested:
            return
        self._stop_requested = True
        self._close_all()
        self._stop_event.set()

    async def __aenter__(self) -> ActorSystem:
        self._owner = asyncio.get_running_loop().create_task(self.run(), name="actors-owner")
        return await self.ready()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
        assert self._owner is not None
        await self._owner

    @property
    def default_ask_timeout(self) -> float | None:
        """Real seconds an `ask` waits unless it passes its own `timeout`."""
        return self._ask_timeout

    @property
    def running(self) -> bool:
        """True between `run()` starting and `stop()`."""
        return self._state == _RUNNING and not self._stop_requested

    # -- actors --------------------------------------------------------------------

    def dispatcher(self, name: str, *, batch: int = DEFAULT_BATCH) -> Dispatcher:
        """The shared dispatcher called `name`, created on first use.

        Args:
            name: The group's name (dispatcher names and actor names are separate).
            batch: Most messages taken from one actor before moving to the next.

        Raises:
            ValueError: It exists with another `batch`, or `batch` < 1.
        """
        dispatcher = self._dispatchers.get(name)
        if dispatcher is None:
            dispatcher = self._dispatchers[name] = Dispatcher(self, name, batch=batch)
        elif dispatcher.batch != batch:
            raise ValueError(f"dispatcher {name!r} exists with batch={dispatcher.batch}")
        return dispatcher

    def spawn(
        self,
        actor: Actor | Callable[[], Actor],
        *,
        name: str,
        dispatcher: Dispatcher | None = None,
        restart: bool = False,
    ) -> ActorRef:
        """Start an actor (before or after `run()` started).

        Args:
            actor: An instance, or a factory that builds one.
            name: Unique among the live actors of this system.
            dispatcher: The group to run in; by default the actor gets its own.
            restart: Rebuild the actor from the factory after a failed tell (the mailbox is
                kept); the default policy logs the failure and resumes.

        Returns:
            The actor's reference.

        Raises:
            ValueError: The name is taken, `restart` without a factory, or a dispatcher of
                another system.
            TypeError: The factory did not return an `Actor`.
            RuntimeError: The system is stopping or stopped.
        """
        if self._stop_requested or self._state in (_STOPPING, _STOPPED):
            raise RuntimeError(f"cannot spawn {name!r}: the actor system is {self._state}")
        if name in self._cells:
            raise ValueError(f"an actor named {name!r} already exists")
        factory = None if isinstance(actor, Actor) else actor
        if restart and factory is None:
            raise ValueError("restart=True needs a factory, not an actor instance")
        if dispatcher is None:
            dispatcher = Dispatcher(self, name, private=True)
            self._private[dispatcher] = None
        elif dispatcher._system is not self:
            raise ValueError(f"dispatcher {dispatcher.name!r} belongs to another system")
        elif self._dispatchers.setdefault(dispatcher.name, dispatcher) is not dispatcher:
            raise ValueError(f"another dispatcher is called {dispatcher.name!r} now")
        instance = actor if isinstance(actor, Actor) else actor()
        cell = Cell(self, dispatcher, name, instance, factory, restart)
        self._cells[name] = cell
        dispatcher._add(cell)
        cell.request(START)
        if self._state == _RUNNING and not dispatcher._task_alive:
            self._start(dispatcher)
        return cell.ref

    def get(self, name: str) -> ActorRef:
        """The live actor called `name`.

        Raises:
            KeyError: No such actor.
        """
        return self._cells[name].ref

    def stats(self) -> dict[str, MailboxStats]:
        """Mailbox counters of every live actor, by name."""
        return {name: cell.stats() for name, cell in self._cells.items()}

    def retired_stats(self) -> dict[str, MailboxStats]:
        """The counters of every actor that has stopped, added up per actor kind (its
        class name): `processed`, `handler_time`, `failures` and `resumed` are totals,
        `peak` the largest, `queued` and `suspended` zero."""
        return dict(self._retired)

    # -- quiescence ----------------------------------------------------------------

    async def settle(self) -> None:
        """Wait until no message is in flight and no timer is due.

        A message is in flight from `tell`/`ask` until its handler (and the `on_drained`
        pass after it) finished; messages those handlers send count before it ends. Does
        not poll: the dispatcher that goes idle last wakes the waiters.

        Raises:
            RuntimeError: `run()` has not started, or the caller is an actor's handler.
        """
        if self._state == _NEW:
            raise RuntimeError("settle() needs a running system: await ready() first")
        if asyncio.current_task() in self._tasks:
            raise RuntimeError("settle() inside an actor's handler would wait for itself")
        loop = asyncio.get_running_loop()
        while self._state in (_RUNNING, _STOPPING):
            if self._state == _RUNNING:
                self.timers._fire_due()
            if not self._busy:
                return
            waiter: asyncio.Future[None] = loop.create_future()
            self._settlers.append(waiter)
            try:
                await waiter
            finally:
                if waiter in self._settlers:
                    self._settlers.remove(waiter)

    def _wake_settlers(self) -> None:
        settlers = self._settlers
        if settlers:
            self._settlers = []
            for waiter in settlers:
                if not waiter.done():
                    waiter.set_result(None)

    # -- ManualClock hooks ------------------------------------------------------------

    @property
    def _clock_running(self) -> bool:
        return self._state == _RUNNING

    def _next_timer_due(self) -> float | None:
        return self.timers.next_due()

    def _fire_due_timers(self) -> None:
        self.timers._fire_due()

    # -- default ask timeout: a coarse sweep ------------------------------------------

    def _arm_sweeper(self) -> None:
        assert self._ask_timeout is not None
        self._coarse_now = monotonic()
        period = self._ask_timeout / _SWEEPS_PER_TIMEOUT
        self._sweeper = asyncio.get_running_loop().call_later(period, self._sweep)

    def _sweep(self) -> None:
        """Fail default-timeout asks sent at least `timeout` ago; re-arm while any wait.

        An ask records `_coarse_now`, which lags the real time by at most one period, so
        failing those recorded more than timeout + period ago never fails one early.
        """
        self._sweeper = None
        timeout = self._ask_timeout
        assert timeout is not None
        now = monotonic()
        oldest_allowed = now - timeout * (1 + 1 / _SWEEPS_PER_TIMEOUT)
        waiting = False
        for cell in self._cells.values():
            if cell.asks:
                for message in cell.mailbox:
                    if type(message) is _Ask:
                        waiting |= _sweep_one(message, cell.name, oldest_allowed, timeout)
            for frame in cell.frames:  # suspended handlers answering an ask
                if frame.ask is not None:
                    waiting |= _sweep_one(frame.ask, cell.name, oldest_allowed, timeout)
        for dispatcher in [*self._dispatchers.values(), *self._private]:
            in_hand = dispatcher._in_hand
            if in_hand is not None:
                ask, name = in_hand
                waiting |= _sweep_one(ask, name, oldest_allowed, timeout)
        if waiting:
            self._arm_sweeper()

    # -- internals -----------------------------------------------------------------

    def _start(self, dispatcher: Dispatcher) -> None:
        # The dispatcher runs in a plain asyncio task that a task-group child awaits: the
        # child owns it (cancellation goes in, exceptions come out), and the dispatcher's
        # every step is spared the extra coroutine frame anyio wraps its tasks in.
        assert self._task_group is not None
        dispatcher._task_alive = True
        name = f"actors-dispatcher-{dispatcher.name}"
        task = asyncio.get_running_loop().create_task(dispatcher._run(), name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        self._task_group.start_soon(_own, task, name=name)

    async def _run_timers(self) -> None:
        assert self._timer_scope is not None
        with self._timer_scope:
            await self.timers._run()

    def _close_all(self) -> None:
        for cell in list(self._cells.values()):
            if not cell.closed:
                cell.request(STOP)

    def _forget(self, cell: Cell) -> None:
        if self._cells.get(cell.name) is cell:
            del self._cells[cell.name]
            self._retire(cell)
        dispatcher = cell.dispatcher
        if dispatcher._cells:
            return
        if dispatcher._private:
            del self._private[dispatcher]
        elif self._dispatchers.get(dispatcher.name) is dispatcher:
            # An empty group is forgotten; spawning into it again registers it again.
            del self._dispatchers[dispatcher.name]

    def _retire(self, cell: Cell) -> None:
        kind, now = type(cell.actor).__name__, cell.stats()
        was = self._retired.get(kind, MailboxStats(0, 0, 0, 0.0, 0))
        self._retired[kind] = MailboxStats(
            queued=0,
            peak=max(was.peak, now.peak),
            processed=was.processed + now.processed,
            handler_time=was.handler_time + now.handler_time,
            failures=was.failures + now.failures,
            resumed=was.resumed + now.resumed,
        )

    def _abort(self) -> None:
        """After run(): whatever is left (after a crash or cancellation) is dead."""
        for cell in list(self._cells.values()):
            cell.closed = True
            cell.ref._hot = False
            cell.dead = True
            cell.drop_mailbox()
            cell.dispatcher._cancel_frames(cell)
        self._cells.clear()
        self.timers._cancel_all()
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        self._state = _STOPPED
        self._stop_requested = True
        self._busy = 0
        self._wake_settlers()
        self._ready_event.set()
        if isinstance(self.clock, ManualClock):
            self.clock._detach(self)


async def _own(task: asyncio.Task[None]) -> None:
    await task


def _sweep_one(ask: _Ask, name: str, oldest_allowed: float, timeout: float) -> bool:
    """Expire `ask` if it is too old; True if it still waits under the default timeout."""
    if ask.since is None or ask.future.done():
        return False
    if ask.since < oldest_allowed:
        expire(ask.future, name, timeout)
        return False
    return True
