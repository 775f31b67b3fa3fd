"""Every test runs under an error watch: a handler that raised, or anything else the core
logged at ERROR, fails the test even when the core survived it. The package's own pytest
plugin is loaded even where the installed metadata predates its entry point."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from scheduler import pytest_plugin
from scheduler.testing import ErrorWatch


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "logs_errors(*expected): the test makes the core log these errors on purpose "
        "(substrings of the messages); any other error still fails it",
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
