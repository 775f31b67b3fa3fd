"""Build script: the pure-Python package, or with ``SCHEDULER_COMPILE=1`` a mypyc build.

The pure package is the default and needs no compiler. ``SCHEDULER_COMPILE=1`` compiles the
modules in ``COMPILED`` with mypyc into C extensions beside the pure modules
(docs/compiled.md); it needs a C compiler and mypy, types-PyYAML and the project's
dependencies in the build environment, so build with ``--no-build-isolation``:

    pip install 'mypy>=1.10' types-PyYAML setuptools wheel -e .   # or: pip install -e '.[dev]'
    SCHEDULER_COMPILE=1 pip install --no-build-isolation --no-deps --force-reinstall .

Never compile an editable install: the extensions would land in ``src/`` and every test run
from the checkout would use them.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from setuptools import setup

# The scheduler's domain modules: the allocation path (scheduling, queues, applications,
# nodes, resources, the outbox, limits, priorities). Left out: ``_proxy`` (it checks SI
# values against their declared types, and compiled code raises TypeError at the first
# wrongly typed value instead), the actor runtime (``src/actors``: a msgspec Struct whose
# annotations a compiled module cannot resolve, mixins), the modules mypyc rejects as
# written (the ``core._app_actor``/``gangs._placeholders`` mixins, ``core._core``'s async
# generator) and those that run once (config, CLI, views).
COMPILED = [
    # objects: the domain the pass reads and changes
    "scheduler/objects/_resources.py",
    "scheduler/objects/_asks.py",
    "scheduler/objects/_nodes.py",
    "scheduler/objects/_application.py",
    "scheduler/objects/_pending.py",
    "scheduler/objects/_queue.py",
    "scheduler/objects/_priority.py",
    "scheduler/objects/_ugm.py",
    "scheduler/objects/_reservations.py",
    "scheduler/objects/_outbox.py",
    "scheduler/objects/_partition.py",
    # policies and config: placement, quantities
    "scheduler/policies/_placement.py",
    "scheduler/config/_quantity.py",
    # core: the pass, the partition (a subclass of the compiled PartitionState must be
    # compiled too), events, and the small actors
    "scheduler/core/_walk.py",
    "scheduler/core/_pass.py",
    "scheduler/core/_partition.py",
    "scheduler/core/_outstanding.py",
    "scheduler/core/_events.py",
    "scheduler/core/_queue_actor.py",
    "scheduler/core/_callback_actor.py",
]


def ext_modules() -> list[object]:
    if os.environ.get("SCHEDULER_COMPILE", "") in ("", "0"):
        return []
    from mypyc.build import mypycify  # only a compiled build needs mypy

    return list(mypycify([f"src/{m}" for m in COMPILED], opt_level="3"))


# setuptools reuses build/ across builds: a stale extension from an earlier compiled build
# would land in the next wheel (a pure one too, or a compiled one that dropped a module).
shutil.rmtree(Path(__file__).parent / "build", ignore_errors=True)
setup(ext_modules=ext_modules())
