"""Fixtures: a core on a manual clock, a recording RM, and factories for SI messages."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

import scheduler
from scheduler import si
from scheduler.testing import ManualClock, RecordingCallback

RM = "rm-1"

QUEUES = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: "*"
        queues:
          - name: a
            resources:
              guaranteed: {memory: 500, vcore: 50}
              max: {memory: 1000, vcore: 100}
          - name: b
            resources:
              guaranteed: {memory: 500, vcore: 50}
          - name: fair
            properties:
              application.sort.policy: fair
          - name: parent
            queues:
              - name: child
"""


#: Applications name their queue, which is made when missing: for tests whose applications
#: carry no ``namespace`` tag, which YuniKorn's built-in default places by.
PROVIDED = """
partitions:
  - name: default
    placementrules:
      - name: provided
        create: true
    queues:
      - name: root
        submitacl: '*'
"""


def node(node_id: str, memory: int = 100, vcore: int = 10, **kw: Any) -> si.NodeInfo:
    return si.NodeInfo(
        node_id=node_id,
        action=si.ActionFromRM.CREATE,
        schedulable_resource=si.Resource.of(memory=memory, vcore=vcore),
        **kw,
    )


def app(
    app_id: str, queue: str = "root.a", user: str = "alice", **kw: Any
) -> si.AddApplicationRequest:
    kw.setdefault("partition_name", "default")
    return si.AddApplicationRequest(
        application_id=app_id, queue_name=queue, ugi=si.UserGroupInformation(user=user), **kw
    )


def ask(
    key: str, app_id: str, memory: int = 10, vcore: int = 1, count: int = 1, **kw: Any
) -> si.AllocationAsk:
    return si.AllocationAsk(
        allocation_key=key,
        application_id=app_id,
        partition_name="default",
        resource_ask=si.Resource.of(memory=memory, vcore=vcore),
        max_allocations=count,
        **kw,
    )


class Driver:
    """One RM driving a core: the SI calls with the rm_id filled in, and what came back."""

    def __init__(self, core: scheduler.Core, clock: ManualClock) -> None:
        self.core = core
        self.clock = clock
        self.rm = RecordingCallback()

    async def register(self, config: str = QUEUES) -> None:
        await self.core.register_resource_manager(
            si.RegisterResourceManagerRequest(
                rm_id=RM, policy_group="default", version="1", config=config
            ),
            self.rm,
        )

    async def nodes(self, *infos: si.NodeInfo) -> None:
        await self.core.update_node(si.NodeRequest(rm_id=RM, nodes=list(infos)))

    async def apps(self, *apps: si.AddApplicationRequest) -> None:
        await self.core.update_application(si.ApplicationRequest(rm_id=RM, new=list(apps)))

    async def remove_apps(self, *app_ids: str) -> None:
        await self.core.update_application(
            si.ApplicationRequest(
                rm_id=RM,
                remove=[
                    si.RemoveApplicationRequest(application_id=a, partition_name="default")
                    for a in app_ids
                ],
            )
        )

    async def asks(self, *asks: si.AllocationAsk) -> None:
        await self.core.update_allocation(si.AllocationRequest(rm_id=RM, asks=list(asks)))

    async def release(
        self,
        *allocs: si.Allocation,
        termination: si.TerminationType = si.TerminationType.STOPPED_BY_RM,
    ) -> None:
        await self.core.update_allocation(
            si.AllocationRequest(
                rm_id=RM,
                releases=si.AllocationReleasesRequest(
                    allocations_to_release=[
                        si.AllocationRelease(
                            partition_name="default",
                            application_id=a.application_id,
                            uuid=a.uuid,
                            termination_type=termination,
                        )
                        for a in allocs
                    ]
                ),
            )
        )

    async def release_asks(self, app_id: str, *keys: str) -> None:
        await self.core.update_allocation(
            si.AllocationRequest(
                rm_id=RM,
                releases=si.AllocationReleasesRequest(
                    allocation_asks_to_release=[
                        si.AllocationAskRelease(
                            partition_name="default",
                            application_id=app_id,
                            allocation_key=k,
                            termination_type=si.TerminationType.STOPPED_BY_RM,
                        )
                        for k in keys or ("",)
                    ]
                ),
            )
        )

    async def settle(self) -> None:
        await self.core.settle()

    def allocs(self, app_id: str | None = None) -> list[si.Allocation]:
        return [a for a in self.rm.allocations if app_id is None or a.application_id == app_id]


@pytest.fixture
def scheduler_config() -> str:
    """The queues ``scheduler_scenario`` (the package's pytest plugin) registers with."""
    return QUEUES


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest_asyncio.fixture
async def core(clock: ManualClock) -> AsyncIterator[scheduler.Core]:
    async with scheduler.start_scheduler(clock=clock) as core:
        yield core


@pytest_asyncio.fixture
async def driver(core: scheduler.Core, clock: ManualClock) -> Driver:
    d = Driver(core, clock)
    await d.register()
    return d
