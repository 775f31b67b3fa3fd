"""A cluster scheduler core (Apache YuniKorn's), as an asyncio actor system.

Resource managers talk to it through the Scheduler Interface (``scheduler.si``):

    async with scheduler.start_scheduler() as core:
        await core.register_resource_manager(request, callback)
        await core.update_node(...); await core.settle()

The public surface is this module, ``scheduler.si`` and ``scheduler.testing``.
"""

from __future__ import annotations

from scheduler._callback import ResourceManagerCallback
from scheduler._core import Core, start_scheduler
from scheduler._errors import NotFoundError, SchedulerError
from scheduler._timeouts import Timeouts

__all__ = [
    "Core",
    "NotFoundError",
    "ResourceManagerCallback",
    "SchedulerError",
    "Timeouts",
    "start_scheduler",
]
