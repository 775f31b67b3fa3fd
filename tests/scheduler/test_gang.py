"""Gang scheduling through the public API: placeholders, replacement, timeouts, cleanup.

The flows of ``seeds/000`` (YuniKorn's gang scheduling design) with a recording RM and a
manual clock. ``GangDriver`` adds what a gang-aware RM does: placeholder and real asks of
a task group, and confirming the core's placeholder releases.
"""

from __future__ import annotations

from typing import Any

import pytest

from scheduler import si

from .conftest import Driver, app, ask, node

pytestmark = pytest.mark.asyncio

REPLACED = si.TerminationType.PLACEHOLDER_REPLACED
TIMEOUT = si.TerminationType.TIMEOUT


def gang_app(
    app_id: str, members: int = 3, queue: str = "root.a", **kw: Any
) -> si.AddApplicationRequest:
    """A gang application whose placeholder total is ``members`` times {memory 10, vcore 1}."""
    kw.setdefault("placeholder_ask", si.Resource.of(memory=10 * members, vcore=members))
    return app(app_id, queue, **kw)


def placeholders(
    app_id: str, members: int = 3, group: str = "tg", **kw: Any
) -> list[si.AllocationAsk]:
    return [
        ask(f"{app_id}-ph-{i}", app_id, task_group_name=group, placeholder=True, **kw)
        for i in range(members)
    ]


def reals(app_id: str, members: int = 3, group: str = "tg", **kw: Any) -> list[si.AllocationAsk]:
    return [ask(f"{app_id}-real-{i}", app_id, task_group_name=group, **kw) for i in range(members)]


def released(d: Driver, termination: si.TerminationType) -> list[si.AllocationRelease]:
    return [r for r in d.rm.released if r.termination_type == termination]


async def confirm(d: Driver, releases: list[si.AllocationRelease]) -> None:
    """The RM confirms the core's releases, with the same uuid and termination type."""
    await d.core.update_allocation(
        si.AllocationRequest(
            rm_id="rm-1",
            releases=si.AllocationReleasesRequest(
                allocations_to_release=[
                    si.AllocationRelease(
                        partition_name="default",
                        application_id=r.application_id,
                        uuid=r.uuid,
                        termination_type=r.termination_type,
                    )
                    for r in releases
                ]
            ),
        )
    )


async def placed_gang(
    d: Driver, app_id: str = "gang", members: int = 3, **kw: Any
) -> list[si.Allocation]:
    """A gang application with all its placeholders allocated (so ``Starting``)."""
    await d.apps(gang_app(app_id, members, **kw))
    await d.asks(*placeholders(app_id, members))
    await d.settle()
    phs = [a for a in d.allocs(app_id) if a.placeholder]
    assert len(phs) == members
    return phs


async def state(d: Driver, app_id: str) -> str:
    info = await d.core.get_application("default", app_id)
    return str(info["applicationState"])


async def ph_data(d: Driver, app_id: str, group: str = "tg") -> dict[str, Any]:
    info = await d.core.get_application("default", app_id)
    (entry,) = [e for e in info["placeholderData"] if e["taskGroupName"] == group]
    return dict(entry)


# ============================================================================ smoke
async def test_placeholders_then_replacement_handshake(driver: Driver) -> None:
    d = driver
    await d.nodes(node("n1"), node("n2"))
    phs = await placed_gang(d)
    assert await state(d, "gang") == "Starting"
    await d.asks(*reals("gang"))
    await d.settle()
    rel = released(d, REPLACED)
    assert sorted(r.uuid for r in rel) == sorted(p.uuid for p in phs)
    assert not [a for a in d.allocs("gang") if not a.placeholder]  # nothing before confirmation
    await confirm(d, rel)
    await d.settle()
    real = [a for a in d.allocs("gang") if not a.placeholder]
    assert len(real) == 3
    by_key = {p.uuid: p.node_id for p in phs}
    assert sorted(a.node_id for a in real) == sorted(by_key.values())
    assert await ph_data(d, "gang") == {
        "taskGroupName": "tg",
        "count": 3,
        "minResource": {"memory": 10, "vcore": 1},
        "replaced": 3,
        "timedout": 0,
    }
    assert await state(d, "gang") == "Running"
