"""Every test runs under an error watch: a handler that raised, or anything else the core
logged at ERROR, fails the test even when the core survived it. The package's own pytest
plugin is loaded even where the installed metadata predates its entry point.

The randomized property tests (hypothesis: ``@given``, state machines, and tests marked
``property``) are counted: the
SI requests they make of a core (``Core.register_resource_manager``, ``update_node``,
``update_application``, ``update_allocation``, ``update_configuration``, in-process or
through a daemon's transport), said at the end of the run. With
``$SCHEDULER_PROPERTY_SI_OPS`` set (``.ci/run`` sets 100000), a whole run that makes fewer
fails."""

from __future__ import annotations

import functools
import os
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest

from scheduler import pytest_plugin
from scheduler.core import Core
from scheduler.testing import ErrorWatch

SI_REQUESTS = (
    "register_resource_manager",
    "update_node",
    "update_application",
    "update_allocation",
    "update_configuration",
)


class PropertyBudget:
    """SI requests made by the property tests, and by how many of them."""

    def __init__(self) -> None:
        self.active = False  # a property test is running
        self.requests = 0
        self.tests = 0
        self.by_test: dict[str, int] = {}

    def counting(self, method: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        @functools.wraps(method)
        async def counted(*args: Any, **kwargs: Any) -> Any:
            if self.active:
                self.requests += 1
            return await method(*args, **kwargs)

        return counted


BUDGET = PropertyBudget()
for _name in SI_REQUESTS:
    setattr(Core, _name, BUDGET.counting(getattr(Core, _name)))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    prop = bool(
        getattr(getattr(item, "obj", None), "is_hypothesis_test", False)
        or item.get_closest_marker("property")
    )
    BUDGET.active = prop
    BUDGET.tests += prop
    before = BUDGET.requests
    try:
        return (yield)
    finally:
        BUDGET.active = False
        if prop:
            BUDGET.by_test[item.nodeid] = BUDGET.requests - before


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    if not BUDGET.tests:
        return
    terminalreporter.write_line(
        f"property tests: {BUDGET.tests} made {BUDGET.requests:,} SI requests of a core"
    )
    if config.get_verbosity() > 0:
        for nodeid, count in sorted(BUDGET.by_test.items(), key=lambda kv: -kv[1]):
            terminalreporter.write_line(f"  {count:>9,}  {nodeid}")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    want = int(os.environ.get("SCHEDULER_PROPERTY_SI_OPS", "0") or 0)
    if want and BUDGET.tests and BUDGET.requests < want and exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        print(
            f"\nproperty tests made {BUDGET.requests:,} SI requests, fewer than the "
            f"{want:,} of $SCHEDULER_PROPERTY_SI_OPS"
        )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "logs_errors(*expected): the test makes the core log these errors on purpose "
        "(substrings of the messages); any other error still fails it",
    )
    config.addinivalue_line(
        "markers",
        "property: a randomized property test that hypothesis does not mark itself (a state "
        "machine run with run_state_machine_as_test): its SI requests are counted",
    )
    if not config.pluginmanager.has_plugin("scheduler"):  # the pytest11 entry point's name
        config.pluginmanager.register(pytest_plugin, "scheduler")


@pytest.fixture(autouse=True)
def _no_silent_crash(request: pytest.FixtureRequest) -> Iterator[ErrorWatch]:
    marker = request.node.get_closest_marker("logs_errors")
    expected = tuple(marker.args) if marker is not None else ()
    with ErrorWatch(allow=expected) as errors:
        yield errors
    if errors:
        pytest.fail(f"the core logged errors during the test\n{errors.report()}", pytrace=False)
