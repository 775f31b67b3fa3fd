"""scheduler.tune_gc and tune_malloc: what an owning process gets, and that importing never
changes it."""

from __future__ import annotations

import gc
import platform
import subprocess
import sys
from collections.abc import Iterator

import pytest

import scheduler


@pytest.fixture
def restore_gc() -> Iterator[None]:
    before = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*before)


def test_importing_the_library_leaves_the_collector_alone() -> None:
    code = (
        "import gc; before = (gc.get_threshold(), gc.get_freeze_count()); "
        "import scheduler, scheduler.testing, scheduler.pytest_plugin; "
        "assert (gc.get_threshold(), gc.get_freeze_count()) == before, before"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


@pytest.mark.usefixtures("restore_gc")
def test_tune_gc_freezes_start_up_and_raises_the_thresholds() -> None:
    gc.set_threshold(700, 10, 10)
    kept = [object(), {"a": [1]}]  # alive at "start-up"
    before = scheduler.tune_gc()
    assert before == (700, 10, 10)
    assert gc.get_threshold() == (10_000, 20, 50)
    assert gc.get_freeze_count() > 0
    assert not any(o is kept[1] for o in gc.get_objects())  # frozen: no collection walks it
    scheduler.tune_gc(young=1234)
    assert gc.get_threshold()[0] == 1234


@pytest.mark.usefixtures("restore_gc")
def test_tune_gc_refuses_a_threshold_below_one() -> None:
    with pytest.raises(ValueError, match="young must be a positive number of objects, got 0"):
        scheduler.tune_gc(young=0)


def test_the_console_script_tunes_its_own_process() -> None:
    code = (
        "import gc, sys; import scheduler.__main__ as m; "
        "sys.argv = ['scheduler', '--version']; "
        "code = m.main(); "
        "assert gc.get_threshold() == (10_000, 20, 50) and gc.get_freeze_count() > 0; "
        "sys.exit(code)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert scheduler.__version__ in done.stdout


GLIBC = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"

# A large block freed raises glibc's mmap threshold to its size unless the threshold was
# set: the next block that size comes from the heap (no new mapped bytes) and, freed, may
# stay there for good. Prints the MiB mapped for a 2 MiB block after a 4 MiB one went.
MAPPED_AFTER_A_LARGE_FREE = """
import ctypes, sys
import scheduler
FIELDS = "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost"
class Info(ctypes.Structure):  # glibc's struct mallinfo2
    _fields_ = [(name, ctypes.c_size_t) for name in FIELDS.split()]
libc = ctypes.CDLL(None)
libc.mallinfo2.restype = Info
if sys.argv[1] == "tuned":
    assert scheduler.tune_malloc()
elif sys.argv[1] == "console":  # the console script tunes its own process
    import scheduler.__main__
    sys.argv = ["scheduler", "--version"]
    assert scheduler.__main__.main() == 0
block = bytes(4 << 20)
del block
before = libc.mallinfo2().hblkhd
block = bytes(2 << 20)
print("mapped", (libc.mallinfo2().hblkhd - before) >> 20)
"""


@pytest.mark.skipif(not GLIBC, reason="tune_malloc sets glibc's malloc only")
@pytest.mark.parametrize(("mode", "mapped_mib"), [("plain", 0), ("tuned", 2), ("console", 2)])
def test_tune_malloc_keeps_large_blocks_out_of_the_heap(mode: str, mapped_mib: int) -> None:
    done = subprocess.run(
        [sys.executable, "-c", MAPPED_AFTER_A_LARGE_FREE, mode],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == f"mapped {mapped_mib}"


def test_tune_malloc_refuses_a_threshold_below_one() -> None:
    with pytest.raises(ValueError, match="mmap_threshold must be a positive number of bytes"):
        scheduler.tune_malloc(mmap_threshold=0)
