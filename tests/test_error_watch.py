"""The error watch every test runs under: a crash the core survived still fails the test."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

CONFTEST = """
from tests.conftest import _no_silent_crash, pytest_configure  # the project's own watch
"""

# A fault injected into the partition's node handling: the partition actor logs it and
# resumes, the node is simply missing, and nothing the test asserts notices.
INNER = """
import pytest
import scheduler
from scheduler import si
from scheduler.core._partition_actor import PartitionActor
from scheduler.testing import ManualClock, RecordingCallback


def node(node_id):
    return si.NodeInfo(node_id=node_id, action=si.ActionFromRM.CREATE,
                       schedulable_resource=si.Resource.of(memory=10, vcore=1))


async def drive(monkeypatch, fail):
    if fail:
        def update_nodes(self, updates):
            raise RuntimeError("injected fault in node handling")
        monkeypatch.setattr(PartitionActor, "update_nodes", update_nodes)
    clock = ManualClock()
    async with scheduler.start_scheduler(clock=clock) as core:
        await core.register_resource_manager(
            si.RegisterResourceManagerRequest(rm_id="rm"), RecordingCallback())
        await core.update_node(si.NodeRequest(rm_id="rm", nodes=[node("n1")]))
        await core.settle()
        assert (await core.get_partitions())[0]["name"] == "default"


@pytest.mark.asyncio
async def test_clean(monkeypatch):
    await drive(monkeypatch, fail=False)


@pytest.mark.asyncio
async def test_injected_fault(monkeypatch):
    await drive(monkeypatch, fail=True)


@pytest.mark.asyncio
@pytest.mark.logs_errors("failed handling")
async def test_injected_fault_expected(monkeypatch):
    await drive(monkeypatch, fail=True)


@pytest.mark.asyncio
@pytest.mark.logs_errors("something else")
async def test_injected_fault_expected_otherwise(monkeypatch):
    await drive(monkeypatch, fail=True)
"""


@pytest.mark.logs_errors("failed handling NodesUpdated")  # the inner run's, logged in-process
def test_a_crash_the_core_survives_fails_the_test(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_inner=INNER)
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    reports = pytester.inline_run("-p", "no:cacheprovider").getreports("pytest_runtest_logreport")
    failed = {r.nodeid: r.longreprtext for r in reports if r.failed}
    passed = {r.nodeid for r in reports if r.when == "call" and r.passed}
    assert len(passed) == 4  # every inner test's own assertions held
    assert sorted(failed) == [
        "test_inner.py::test_injected_fault",
        "test_inner.py::test_injected_fault_expected_otherwise",
    ]
    for text in failed.values():
        assert "the core logged errors during the test" in text
        assert "RuntimeError: injected fault in node handling" in text
