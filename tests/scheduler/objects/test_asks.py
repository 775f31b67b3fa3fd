"""Allocation ids: unique against those of another process serving the same RM."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import scheduler

PRINT_ONE = "from scheduler.objects._asks import new_uuid; print(new_uuid())"


def first_uuid_of_a_new_process() -> str:
    """The first allocation id of a fresh interpreter, started as alike as can be: the
    same hash seed and, where ``setarch -R`` works, the same addresses (no address-space
    randomisation), as a daemon restarted on such a machine would be."""
    env = dict(os.environ, PYTHONHASHSEED="0", PYTHONPATH=str(Path(scheduler.__file__).parents[1]))
    command = [sys.executable, "-c", PRINT_ONE]
    setarch = shutil.which("setarch")
    if setarch is not None and subprocess.run([setarch, "-R", "true"], check=False).returncode == 0:
        command = [setarch, "-R", *command]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True, timeout=60)
    return done.stdout.strip()


def test_a_new_process_makes_other_allocation_ids_than_the_one_before() -> None:
    """A daemon that replaces one that was killed recovers the allocations the old one
    made, by their ids; the ids it makes itself must not be the same ones. They were
    ``<24 bits of an address>-<n>``: equal in two processes started alike."""
    first, second = first_uuid_of_a_new_process(), first_uuid_of_a_new_process()
    assert first.endswith("-1") and second.endswith("-1")
    assert first != second
    assert len(first.split("-")[0]) == 12  # 48 random bits
