"""What the RM hears back when it releases an allocation itself, as YuniKorn v1.2 answers.

YuniKorn v1.2.0 ``pkg/scheduler/context.go`` ``processAllocationReleases`` (the same in
v1.8.0): every allocation that an RM's ``AllocationRelease`` takes away is sent back in
``AllocationResponse.released`` with ``TerminationType.STOPPED_BY_RM`` and the message
"allocation remove as per RM request", whatever type the RM's release carried (its own
``STOPPED_BY_RM`` or ``TIMEOUT``, or its confirmation of the core's ``TIMEOUT``,
``PLACEHOLDER_REPLACED`` or ``PREEMPTED_BY_SCHEDULER``); a release that takes nothing away
(``partition.go`` ``removeAllocation`` found no application or no such uuid) gets no
answer. YuniKorn v1.2's shim (``pkg/callback/scheduler_callback.go``) acts on a released
allocation of any type but ``STOPPED_BY_RM`` as the core's own release, so an echo with the
RM's type would start a second release there.
"""

from __future__ import annotations

import pytest

from scheduler import si

from ..conftest import Driver, app, ask, node
from ..gangs.test_gang import confirm, placed_gang, reals

pytestmark = pytest.mark.asyncio

STOPPED = si.TerminationType.STOPPED_BY_RM
AS_PER_RM = "allocation remove as per RM request"


def echoes(d: Driver) -> list[tuple[str, si.TerminationType, str]]:
    return [(r.uuid, r.termination_type, r.message) for r in d.rm.released]


@pytest.mark.parametrize(
    "termination",
    [
        si.TerminationType.STOPPED_BY_RM,
        si.TerminationType.TIMEOUT,
        si.TerminationType.PREEMPTED_BY_SCHEDULER,
        si.TerminationType.UNKNOWN_TERMINATION_TYPE,
    ],
)
async def test_an_rm_release_of_any_type_is_echoed_as_stopped_by_rm(
    driver: Driver, termination: si.TerminationType
) -> None:
    await driver.nodes(node("n1"))
    await driver.apps(app("a1"))
    await driver.asks(ask("k1", "a1", count=2))
    await driver.settle()
    first, _second = driver.allocs("a1")
    await driver.release(first, termination=termination)
    await driver.settle()
    assert echoes(driver) == [(first.uuid, STOPPED, AS_PER_RM)]
    [echo] = driver.rm.released
    assert (echo.application_id, echo.allocation_key, echo.partition_name) == (
        "a1",
        "k1",
        "default",
    )
    assert (await driver.core.get_node("default", "n1"))["allocated"] == {"memory": 10, "vcore": 1}


async def test_a_release_without_uuid_echoes_every_allocation_and_an_unknown_one_none(
    driver: Driver,
) -> None:
    await driver.nodes(node("n1"))
    await driver.apps(app("a1"))
    await driver.asks(ask("k1", "a1", count=2))
    await driver.settle()
    held = driver.allocs("a1")
    await driver.release(
        si.Allocation(application_id="a1", uuid="no-such-uuid"),
        termination=si.TerminationType.TIMEOUT,
    )
    await driver.settle()
    assert driver.rm.released == []  # nothing taken away, nothing said
    await driver.release(si.Allocation(application_id="a1", uuid=""))
    await driver.settle()
    assert sorted(echoes(driver)) == sorted((a.uuid, STOPPED, AS_PER_RM) for a in held)


async def test_confirmed_placeholder_releases_are_echoed_before_the_real_allocation(
    driver: Driver,
) -> None:
    """The RM confirms ``PLACEHOLDER_REPLACED``: the placeholder comes back as
    ``STOPPED_BY_RM`` and the real allocation follows, in that order (v1.2 sends the
    release, then ``notifyRMNewAllocation``)."""
    await driver.nodes(node("n1"), node("n2"))
    phs = await placed_gang(driver, "gang", 2)
    await driver.asks(*reals("gang", 2))
    await driver.settle()
    asked = list(driver.rm.released)
    assert {r.termination_type for r in asked} == {si.TerminationType.PLACEHOLDER_REPLACED}
    seen = len(driver.rm.allocation_responses)
    await confirm(driver, asked)
    await driver.settle()
    after = driver.rm.allocation_responses[seen:]
    echoed = [(r.uuid, r.termination_type, r.message) for resp in after for r in resp.released]
    assert sorted(echoed) == sorted((p.uuid, STOPPED, AS_PER_RM) for p in phs)

    def response_of(field: str, key: str) -> int:
        return next(
            i
            for i, resp in enumerate(after)
            if key in [a.allocation_key for a in getattr(resp, field)]
        )

    for ph in phs:
        [real] = [a for a in driver.allocs("gang") if not a.placeholder and a.node_id == ph.node_id]
        assert response_of("released", ph.allocation_key) <= response_of("new", real.allocation_key)


async def test_a_placeholder_confirmed_twice_before_its_swap_is_echoed_once(
    driver: Driver,
) -> None:
    """The RM sends its confirmation twice before the core swapped the placeholder: the
    second takes nothing away (YuniKorn v1.2's ``removeAllocation`` finds the placeholder
    gone and answers nothing), so one echo, and one real allocation per placeholder."""
    await driver.nodes(node("n1"))
    [ph] = await placed_gang(driver, "gang", 1)
    await driver.asks(*reals("gang", 1))
    await driver.settle()
    [asked] = driver.rm.released
    await confirm(driver, [asked, asked])  # twice in one request: before the swap
    await confirm(driver, [asked])  # and once more after it
    await driver.settle()
    assert echoes(driver)[1:] == [(ph.uuid, STOPPED, AS_PER_RM)]
    [real] = [a for a in driver.allocs("gang") if not a.placeholder]
    assert real.node_id == ph.node_id
    assert real.resource_per_alloc is not None
    held = {name: q.value for name, q in real.resource_per_alloc.resources.items()}
    assert (await driver.core.get_node("default", "n1"))["allocated"] == held  # freed once
