"""A dispatcher: one task that runs a group of actors, one message at a time."""

from __future__ import annotations

import asyncio
from asyncio import Future
from collections import deque
from collections.abc import Callable
from itertools import repeat, starmap
from operator import length_hint
from time import perf_counter
from typing import TYPE_CHECKING

from ._actor import RESTART, START, STOP, Actor, Cell, _Ask
from ._errors import ActorDeadError
from ._turns import Continuations

if TYPE_CHECKING:
    from ._system import ActorSystem

__all__ = ["Dispatcher"]

DEFAULT_BATCH = 256
_YIELD_EVERY = 4096  # messages handled before the dispatcher lets other tasks run


class Dispatcher(Continuations):
    """A shared turn: every actor spawned onto it is run by one task.

    The task drains the mailboxes of its actors round-robin, at most `batch` messages from
    one actor before moving on. When every mailbox is empty it calls `on_drained()` of each
    actor that defines it (in spawn order); anything those tell is drained before another
    `on_drained` pass. Nothing else runs between two messages of a group, so the handlers
    of one group always see state that no other handler of the group is changing.

    Get one with `ActorSystem.dispatcher(name)`.
    """

    __slots__ = (
        "_cells",
        "_drainers",
        "_idle",
        "_private",
        "_ready",
        "_system",
        "_task",
        "_task_alive",
        "_waiter",
        "batch",
        "name",
    )

    def __init__(
        self, system: ActorSystem, name: str, *, batch: int = DEFAULT_BATCH, private: bool = False
    ) -> None:
        if batch < 1:
            raise ValueError(f"batch must be >= 1, got {batch}")
        self.name = name
        self.batch = batch
        self._system = system
        self._private = private
        self._cells: dict[Cell, None] = {}  # an ordered set: spawn order, O(1) removal
        self._drainers: list[Cell] = []
        self._ready: deque[Cell] = deque()
        self._idle = True  # not counted as busy by the system
        self._waiter: asyncio.Future[None] | None = None
        self._task: asyncio.Task[object] | None = None
        self._task_alive = False
        self._awaiting = False  # awaiting an async handler or hook
        self._in_hand: tuple[_Ask, str] | None = None  # an ask an async handler is awaiting

    def __repr__(self) -> str:
        queued = sum(len(c.mailbox) for c in self._cells)
        state = "idle" if self._idle else "busy"
        return f"<Dispatcher {self.name} actors={len(self._cells)} queued={queued} {state}>"

    @property
    def actors(self) -> list[str]:
        """Names of the actors in this group, in spawn order."""
        return [c.name for c in self._cells]

    # -- bookkeeping (called by the system and by cells) ------------------------------

    def _add(self, cell: Cell) -> None:
        self._cells[cell] = None
        self._track_drainer(cell)

    def _track_drainer(self, cell: Cell) -> None:
        if cell.has_drained and cell not in self._drainers:
            self._drainers.append(cell)
        elif not cell.has_drained and cell in self._drainers:
            self._drainers.remove(cell)

    def _remove(self, cell: Cell) -> None:
        del self._cells[cell]
        if cell in self._drainers:
            self._drainers.remove(cell)

    def _schedule(self, cell: Cell) -> None:
        cell.scheduled = True
        cell.ref._hot = not cell.closed
        self._ready.append(cell)
        if self._idle:
            self._idle = False
            self._system._busy += 1
            waiter = self._waiter
            if waiter is not None:
                self._waiter = None
                if not waiter.done():
                    waiter.set_result(None)

    # -- the task --------------------------------------------------------------------

    async def _run(self) -> None:
        # One function on purpose: the wake-drain-idle cycle is the ask round trip's hot path.
        self._task = asyncio.current_task()
        loop = asyncio.get_running_loop()
        system = self._system
        ready = self._ready
        batch = self.batch
        budget = _YIELD_EVERY
        try:
            while True:
                while ready:
                    cell = ready.popleft()
                    if cell.control:
                        await self._control(cell)
                        if cell.dead:
                            continue
                    if cell.resumes and not cell.closed:
                        budget -= await self._resume(cell, batch)
                    mailbox = cell.mailbox
                    n = len(mailbox)
                    # control: a continuation failed and asked for a restart (messages wait)
                    if n and not cell.closed and not cell.control:
                        if n > cell.peak:
                            cell.peak = n
                        k = n if n < batch else batch
                        started = perf_counter()
                        if not cell.fast:
                            done = await self._run_general(cell, k)
                        elif cell.asks:
                            done = self._run_sync_mixed(cell, k)
                        else:
                            done = self._run_sync(cell, k)
                        cell.handler_time += perf_counter() - started
                        cell.processed += done
                        budget -= done
                        if cell.resumes and not cell.closed and not cell.control:
                            # What those messages woke (a confirmation its handler awaited)
                            # goes on now, while what it touches is still in the cache.
                            budget -= await self._resume(cell, batch)
                    if cell.control or mailbox or cell.resumes:
                        ready.append(cell)
                    else:
                        cell.scheduled = False
                        cell.ref._hot = False
                    if budget <= 0:
                        budget = _YIELD_EVERY
                        await asyncio.sleep(0)
                if self._drainers:
                    await self._drained()
                    if ready:
                        continue
                if not self._cells:
                    return  # the last actor stopped; spawn starts a new task
                self._idle = True
                system._busy -= 1
                if not system._busy and system._settlers:
                    system._wake_settlers()
                waiter: asyncio.Future[None] = Future(loop=loop)
                self._waiter = waiter
                await waiter
        finally:
            self._task_alive = False
            self._task = None
            self._waiter = None
            if not self._idle:
                self._idle = True
                system._busy -= 1
                if not system._busy:
                    system._wake_settlers()

    # -- message handling --------------------------------------------------------------

    def _run_sync(self, cell: Cell, k: int) -> int:
        """The hot path: k tells (no asks among them) to a synchronous `receive`.

        The pops run in C (starmap over popleft); the only Python per message is the
        handler call. No per-message stop check either: stopping an actor empties its
        mailbox at once (see `Cell.request`), so the pop after the message in hand raises
        IndexError right here.
        """
        receive = cell.receive
        todo = repeat((), k)
        messages = starmap(cell.mailbox.popleft, todo)
        message: object = None
        while True:
            try:
                for message in messages:
                    receive(message)
                return k
            except Exception as exc:
                left = length_hint(todo)
                if cell.closed and _raised_here(exc):
                    return k - left - 1  # the actor stopped: that pop took nothing
                self._tell_failed(cell, message)
                if cell.control:
                    return k - left

    def _run_sync_mixed(self, cell: Cell, k: int) -> int:
        popleft = cell.mailbox.popleft
        receive = cell.receive
        for done in range(k):
            if cell.closed:
                return done
            message = popleft()
            if type(message) is _Ask:
                cell.asks -= 1
                future = message.future
                try:
                    reply = receive(message.message)
                except Exception as exc:
                    self._ask_failed(cell, message, exc)
                else:
                    if not future.done():
                        future.set_result(reply)
            else:
                try:
                    receive(message)
                except Exception:
                    self._tell_failed(cell, message)
                    if cell.control:
                        return done + 1
        return k

    async def _run_general(self, cell: Cell, k: int) -> int:
        """Coroutine handlers and `receive_batch` actors; asks keep their mailbox order."""
        mailbox = cell.mailbox
        driven = cell.driven
        done = 0
        while done < k and not cell.closed and not cell.control:
            if cell.batch_fn is not None and mailbox[0].__class__ is not _Ask:
                messages = self._take_tells(cell, k - done)
                done += len(messages)
                await self._call_batch(cell, messages)
                continue
            message = mailbox.popleft()
            done += 1
            if type(message) is _Ask:
                cell.asks -= 1
                if driven:
                    await self._begin(cell, message.message, message)
                else:
                    await self._call_ask(cell, message)
            elif driven:
                await self._begin(cell, message, None)
            else:
                await self._call_tell(cell, message)
        return done

    @staticmethod
    def _take_tells(cell: Cell, limit: int) -> list[object]:
        popleft = cell.mailbox.popleft
        if not cell.asks:
            return [popleft() for _ in range(min(limit, len(cell.mailbox)))]
        messages: list[object] = []
        mailbox = cell.mailbox
        while len(messages) < limit and mailbox and mailbox[0].__class__ is not _Ask:
            messages.append(popleft())
        return messages

    async def _call_tell(self, cell: Cell, message: object) -> None:
        try:
            result = cell.receive(message)
            if cell.is_async:
                self._awaiting = True
                try:
                    await result  # type: ignore[misc]
                finally:
                    self._awaiting = False
        except Exception:
            self._tell_failed(cell, message)

    async def _call_ask(self, cell: Cell, ask: _Ask) -> None:
        future = ask.future
        try:
            reply = cell.receive(ask.message)
            if cell.is_async:
                self._in_hand = (ask, cell.name)
                self._awaiting = True
                try:
                    reply = await reply  # type: ignore[misc]
                finally:
                    self._in_hand = None
                    self._awaiting = False
        except Exception as exc:
            self._ask_failed(cell, ask, exc)
        except BaseException:  # cancelled (the system crashed): the asker must not hang
            if not future.done():
                future.set_exception(ActorDeadError(f"actor {cell.name!r} stopped"))
            raise
        else:
            if not future.done():
                future.set_result(reply)

    async def _call_batch(self, cell: Cell, messages: list[object]) -> None:
        assert cell.batch_fn is not None
        try:
            result = cell.batch_fn(messages)
            if result is not None:
                self._awaiting = True
                try:
                    await result
                finally:
                    self._awaiting = False
        except Exception:
            kinds = ", ".join(sorted({type(m).__name__ for m in messages}))
            self._failed(cell, f"batch of {kinds}")

    # -- failures ------------------------------------------------------------------

    def _tell_failed(self, cell: Cell, message: object) -> None:
        self._failed(cell, type(message).__name__)

    def _failed(self, cell: Cell, kind: str) -> None:
        """Log the exception being handled and apply the actor's policy."""
        cell.failures += 1
        restart = cell.restart and cell.factory is not None
        cell.log.bind(message_type=kind).exception(
            "actor {!r} failed handling {}; {}", cell.name, kind, "restart" if restart else "resume"
        )
        if restart:
            cell.control |= RESTART
            if not cell.scheduled:  # a handler run_handler began from another actor's turn
                self._schedule(cell)

    def _ask_failed(self, cell: Cell, ask: _Ask, exc: Exception) -> None:
        cell.failures += 1
        if not ask.future.done():
            ask.future.set_exception(exc)
        else:  # the asker gave up: nobody else will see it
            cell.log.opt(exception=exc).error(
                "actor {!r} failed handling abandoned ask {}", cell.name, type(ask.message).__name__
            )

    async def _hook(self, cell: Cell, hook: Callable[[], object], what: str) -> bool:
        started = perf_counter()
        self._awaiting = True
        try:
            result = hook()
            if result is not None:
                await result  # type: ignore[misc]
            return True
        except Exception:
            cell.failures += 1
            cell.log.exception("actor {!r} failed in {}", cell.name, what)
            return False
        finally:
            self._awaiting = False
            cell.handler_time += perf_counter() - started

    # -- lifecycle -----------------------------------------------------------------

    async def _drained(self) -> None:
        for cell in list(self._drainers):
            if cell.closed or not cell.started or cell.control:
                continue
            ok = await self._hook(cell, cell.actor.on_drained, "on_drained")
            if not ok and cell.restart and cell.factory is not None:
                cell.request(RESTART)

    async def _control(self, cell: Cell) -> None:
        control = cell.control
        cell.control = 0
        if control & STOP:
            await self._finalize(cell)
            return
        if control & RESTART:
            await self._restart(cell)
        if not cell.closed and control & (START | RESTART):
            await self._start(cell)

    async def _start(self, cell: Cell) -> None:
        cell.started = True
        if await self._hook(cell, cell.actor.on_start, "on_start"):
            cell.log.debug("actor {!r} started on {}", cell.name, self.name)
        else:
            cell.request(STOP)

    async def _restart(self, cell: Cell) -> None:
        assert cell.factory is not None
        self._cancel_frames(cell)  # they belong to the instance being replaced
        if cell.started:
            cell.started = False
            await self._hook(cell, cell.actor.on_stop, "on_stop")
        try:
            actor: Actor = cell.factory()
            cell.bind(actor)
        except Exception:
            cell.failures += 1
            cell.log.exception("actor {!r} could not be rebuilt; stopping", cell.name)
            cell.request(STOP)
            return
        self._track_drainer(cell)
        cell.log.info("actor {!r} restarted", cell.name)

    async def _finalize(self, cell: Cell) -> None:
        cell.closed = True
        cell.ref._hot = False
        cell.dropped += cell.drop_mailbox()
        self._cancel_frames(cell)
        if cell.started:
            cell.started = False
            await self._hook(cell, cell.actor.on_stop, "on_stop")
        dropped = cell.dropped
        cell.dead = True
        cell.scheduled = False
        self._system.timers.forget(cell.ref)  # its timers would only be dropped when due
        self._remove(cell)
        self._system._forget(cell)
        cell.release()  # a ref held anywhere keeps the cell, not the actor's state
        if dropped:
            cell.log.debug("actor {!r} stopped; {} tells dropped", cell.name, dropped)
        else:
            cell.log.debug("actor {!r} stopped", cell.name)


def _raised_here(exc: Exception) -> bool:
    """True for the IndexError of popleft() on an emptied mailbox, not one from a handler."""
    tb = exc.__traceback__
    return type(exc) is IndexError and tb is not None and tb.tb_next is None
