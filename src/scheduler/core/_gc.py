"""Garbage collector and malloc settings for a process that runs the core and owns its
interpreter.

The core makes few reference cycles, and what it keeps (nodes, queues, applications, asks)
lives long: the cyclic collector's default first-generation threshold (700 new container
objects) makes it walk young objects every few dozen allocations and promote live ones
into the generations a full collection walks again. A process that owns its interpreter
(the CLI, ``bench/``, a daemon) calls ``tune_gc()`` once its start-up is done, and
``tune_malloc()``; importing the library changes neither the collector nor malloc.
"""

from __future__ import annotations

import ctypes
import gc
import platform

__all__ = ["MMAP_THRESHOLD", "THRESHOLDS", "tune_gc", "tune_malloc"]

#: The thresholds ``tune_gc`` sets (CPython's default is 700, 10, 10): young objects are
#: collected every 10,000 new containers, and the older generations a few times less often.
#: Measured with bench_scheduling, time in the collector went from about 8% of the run to
#: about 3% (10k-asks: 36 ms -> 7 ms; 50k-nodes: 444 ms -> 166 ms); 50,000 young objects
#: were no better than 10,000.
THRESHOLDS = (10_000, 20, 50)


def tune_gc(young: int = THRESHOLDS[0]) -> tuple[int, int, int]:
    """Freeze what start-up made and collect young objects less often; returns the
    thresholds that were in force before.

    ``gc.freeze()`` moves every object alive now (modules, classes, configuration) into a
    permanent generation that no collection walks again; the thresholds become
    ``THRESHOLDS``, the first one ``young``. Call it from the program that
    owns the process, after start-up, never from a library: it changes the whole
    interpreter. ``gc.unfreeze()`` and ``gc.set_threshold(*returned)`` undo it.
    """
    if young < 1:
        raise ValueError(f"young must be a positive number of objects, got {young}")
    before = gc.get_threshold()
    gc.collect()
    gc.freeze()
    gc.set_threshold(young, *THRESHOLDS[1:])
    return before


#: The size above which glibc's malloc serves a request with its own ``mmap`` and gives it
#: back to the system on ``free`` (glibc's initial value). Left alone, glibc raises it to
#: the size of each large block freed, up to 32 MiB, and from then on serves such blocks
#: from its heap: a daemon's transient buffers (socket reads, a batch of frames, a REST
#: answer) left holes there that the heap could not give back. The soak (bench/soak.py,
#: tcp:// with cuts) saw RSS grow 20 MiB in bursts and never come down while malloc's own
#: count of memory in use stayed flat. Fixed, the adjustment is off. The price: asyncio's
#: 256 KiB socket reads are mapped and unmapped each time (an mmap, an mremap and a
#: munmap: 5,490 of each per 13,781 reads, ``strace -c`` of a soak's daemon). At 512 KiB
#: they were not, but the 12-minute soak's RSS still crept up by 1.15 MiB/min after its
#: warm-up, where at 128 KiB it held at +0.35.
MMAP_THRESHOLD = 128 * 1024
_M_MMAP_THRESHOLD = -3  # mallopt's parameter number, from glibc's malloc.h


def tune_malloc(mmap_threshold: int = MMAP_THRESHOLD) -> bool:
    """Fix glibc malloc's mmap threshold at ``mmap_threshold`` bytes; returns whether it
    was set (False where the C library is not glibc).

    Setting the threshold turns off glibc's dynamic adjustment of it and of the heap's
    trim threshold, so large transient blocks never settle in the heap. Call it from the
    program that owns the process, as ``tune_gc``, never from a library.
    """
    if mmap_threshold < 1:
        raise ValueError(f"mmap_threshold must be a positive number of bytes, got {mmap_threshold}")
    if platform.libc_ver()[0] != "glibc":
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # a static or unusual build: leave malloc alone
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, mmap_threshold))
