"""A small actor runtime on anyio (asyncio backend): mailboxes, tell/ask, timers, supervision.

It knows nothing about scheduling. See docs/actors.md for a guide.
"""

from __future__ import annotations

from loguru import logger as _logger

from ._actor import Actor, ActorRef, MailboxStats
from ._clock import Clock, ManualClock, SystemClock, wall_ns, wall_of
from ._dispatcher import Dispatcher
from ._errors import ActorDeadError, AskTimeoutError, DeadlineExceeded
from ._system import ActorSystem
from ._timers import TimerHandle
from ._turns import Promise

_logger.disable("actors")  # a library stays quiet unless the application enables it

__all__ = [
    "Actor",
    "ActorDeadError",
    "ActorRef",
    "ActorSystem",
    "AskTimeoutError",
    "Clock",
    "DeadlineExceeded",
    "Dispatcher",
    "MailboxStats",
    "ManualClock",
    "Promise",
    "SystemClock",
    "TimerHandle",
    "wall_ns",
    "wall_of",
]
