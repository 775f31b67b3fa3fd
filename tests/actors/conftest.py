"""Fixtures: a running system on a manual clock (STYLE 9's owner task) and a loguru sink."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import pytest_asyncio
from loguru import logger

from actors import ActorSystem, ManualClock


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest_asyncio.fixture
async def system(clock: ManualClock) -> AsyncIterator[ActorSystem]:
    """A running system; pytest-asyncio runs this teardown in another task than the setup."""
    system = ActorSystem(clock)
    owner = asyncio.get_running_loop().create_task(system.run())
    yield await system.ready()
    system.stop()
    await owner
    leftover = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    assert leftover == [], f"tasks left running: {leftover}"


class Logs:
    """Loguru records captured during a test."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def sink(self, message: Any) -> None:
        self.records.append(message.record)

    def at(self, level: str) -> list[dict[str, Any]]:
        return [r for r in self.records if r["level"].name == level]


@pytest.fixture
def logs() -> Iterator[Logs]:
    captured = Logs()
    sink_id = logger.add(captured.sink, level="DEBUG", format="{message}")
    yield captured
    logger.remove(sink_id)
