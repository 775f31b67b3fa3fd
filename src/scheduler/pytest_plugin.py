"""pytest fixtures for testing a resource manager against the core.

Installed with the package and loaded through the ``pytest11`` entry point ``scheduler``
(``-p no:scheduler`` turns it off). The fixtures, each a fresh one per test:

* ``scheduler_clock``: a :class:`~scheduler.testing.ManualClock` at 0;
* ``scheduler_rm``: a :class:`~scheduler.testing.RecordingCallback`;
* ``scheduler_core``: a core started on ``scheduler_clock``, stopped after the test;
* ``scheduler_scenario``: a :class:`~scheduler.testing.Scenario` on that core, clock and RM,
  registered with the queue configuration of the test's ``scheduler_config`` marker, or
  of the ``scheduler_config`` fixture (the built-in default unless a test overrides it:
  YuniKorn's, which places an application by its ``namespace`` tag only).

The async fixtures run on the test's own event loop under pytest-asyncio (strict or auto
mode: they count as ``pytest_asyncio.fixture``\\ s) and under anyio's pytest plugin with the
asyncio backend (``@pytest.mark.anyio``).
"""

from __future__ import annotations

import sys
import types
from collections.abc import AsyncIterator, Callable, Generator
from typing import Any

import pytest

from scheduler import Core, start_scheduler
from scheduler.testing import ManualClock, RecordingCallback, Scenario

__all__ = [
    "scheduler_clock",
    "scheduler_config",
    "scheduler_core",
    "scheduler_rm",
    "scheduler_scenario",
]

_MARKER = "scheduler_config"
#: Each async fixture's function -> a copy that pytest-asyncio does not claim.
_PLAIN: dict[Callable[..., Any], Callable[..., Any]] = {}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{_MARKER}(yaml): queue configuration the scheduler_scenario fixture registers with",
    )
    # Imported by now if it is a plugin of this run; importing it here ourselves would
    # have pytest warn that it cannot rewrite a plugin loaded after this one.
    pytest_asyncio = sys.modules.get("pytest_asyncio")
    if pytest_asyncio is not None:
        for func in _PLAIN:
            pytest_asyncio.fixture(func)  # marks func as pytest-asyncio's to run


def _async_fixture(func: Callable[..., Any]) -> Any:
    """A function-scoped async fixture that pytest-asyncio and anyio both run.

    pytest-asyncio (strict mode) only runs fixtures declared with ``pytest_asyncio.fixture``;
    anyio runs plain ``async def`` fixtures of anyio tests. The fixture is declared for
    pytest-asyncio (:func:`pytest_configure`), and :func:`pytest_fixture_setup` hands anyio
    tests an undeclared copy.
    """
    plain = types.FunctionType(
        func.__code__, func.__globals__, func.__name__, func.__defaults__, func.__closure__
    )
    plain.__kwdefaults__ = func.__kwdefaults__
    _PLAIN[func] = plain
    return pytest.fixture(func)


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_fixture_setup(
    fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest
) -> Generator[None, Any, None]:
    plain = _PLAIN.get(fixturedef.func)
    if plain is None or "anyio_backend" not in request.fixturenames:
        yield
        return
    with pytest.MonkeyPatch.context() as patch:  # anyio's plugin runs it, pytest-asyncio not
        patch.setattr(fixturedef, "func", plain)
        yield


@pytest.fixture
def scheduler_clock() -> ManualClock:
    """A manual clock at 0: time moves only on ``await scheduler_clock.advance(seconds)``."""
    return ManualClock()


@pytest.fixture
def scheduler_rm() -> RecordingCallback:
    """A recording RM callback: every response the core sends, in order."""
    return RecordingCallback()


@pytest.fixture
def scheduler_config(request: pytest.FixtureRequest) -> str:
    """Queue configuration YAML for ``scheduler_scenario``: the ``scheduler_config`` marker's
    argument, else empty (the built-in default, YuniKorn's: placement by the ``namespace``
    tag only). Override the fixture to change it for a module or a directory."""
    marker = request.node.get_closest_marker(_MARKER)
    return str(marker.args[0]) if marker is not None else ""


@_async_fixture
async def scheduler_core(scheduler_clock: ManualClock) -> AsyncIterator[Core]:
    """A core on ``scheduler_clock``, stopped when the test ends."""
    async with start_scheduler(clock=scheduler_clock) as core:
        yield core


@_async_fixture
async def scheduler_scenario(
    scheduler_core: Core,
    scheduler_clock: ManualClock,
    scheduler_rm: RecordingCallback,
    scheduler_config: str,
) -> Scenario:
    """``scheduler_rm`` registered on ``scheduler_core`` with ``scheduler_config``."""
    scenario = Scenario(scheduler_core, scheduler_clock, scheduler_rm)
    await scenario.register(scheduler_config)
    return scenario
