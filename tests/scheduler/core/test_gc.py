"""scheduler.tune_gc: what an owning process gets, and that importing never changes it."""

from __future__ import annotations

import gc
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
