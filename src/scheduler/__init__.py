"""A cluster scheduler core (Apache YuniKorn's), as an asyncio actor system.

Resource managers talk to it through the Scheduler Interface (``scheduler.si``):

    async with scheduler.start_scheduler() as core:
        await core.register_resource_manager(request, callback)
        await core.update_node(...); await core.settle()

The public surface is this module, ``scheduler.si``, ``scheduler.testing`` and
``scheduler.client`` (an RM's connection to a daemon, ``scheduler serve``).

Inside, the package is split into rooms by layer, each importing only the rooms below it:
``si``, ``config``, ``objects``, ``policies``, ``gangs``, ``core``, ``daemon``, ``client``
and ``cli`` (``docs/architecture.md``). Only the modules named above are public.

The library logs through loguru and is silent until the application turns it on:
``logger.enable("scheduler")`` (and ``logger.enable("actors")`` for the runtime).
"""

from __future__ import annotations

from importlib import metadata as _metadata

from loguru import logger as _logger

from scheduler._errors import ConfigError, NotFoundError, SchedulerError
from scheduler.config._timeouts import Timeouts
from scheduler.core import Core, gang_tags, start_scheduler, tune_gc, tune_malloc
from scheduler.si._callback import ResourceManagerCallback

_logger.disable("scheduler")  # a library adds no sinks and stays quiet unless enabled

try:
    __version__ = _metadata.version("pyscheduler-core")
except _metadata.PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+unknown"

__all__ = [
    "ConfigError",
    "Core",
    "NotFoundError",
    "ResourceManagerCallback",
    "SchedulerError",
    "Timeouts",
    "gang_tags",
    "start_scheduler",
    "tune_gc",
    "tune_malloc",
]
