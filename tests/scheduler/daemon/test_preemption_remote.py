"""A whole preemption over each transport, as a remote RM lives it: the victim reaches it
as a ``PREEMPTED_BY_SCHEDULER`` release, it confirms by releasing that uuid, and the ask
that waited is allocated on the victim's node; an RM that checks predicates is asked
``preemption_predicates`` over the wire first. The daemon runs in this process, on the
system clock, with a short ``preemption.delay``."""

from __future__ import annotations

from collections.abc import Callable

import anyio
import pytest

from scheduler import si
from scheduler.client import RemoteCore, connect
from scheduler.testing import RecordingCallback

from ..core.test_preemption import MAY_PREEMPT, PREEMPTED
from .test_preemption_predicates import TRANSPORTS, serving

CONFIG = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: "*"
        queues:
          - name: starved
            resources: {guaranteed: {memory: 50}}
            properties: {preemption.delay: 10ms}
          - name: greedy
"""


class Checking(RecordingCallback):
    """Checks predicates and accepts every preemption, recording the questions."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[si.PreemptionPredicatesArgs] = []

    async def predicates(self, args: si.PredicatesArgs) -> bool:
        return True

    async def preemption_predicates(
        self, args: si.PreemptionPredicatesArgs
    ) -> si.PreemptionPredicatesResponse:
        self.asked.append(args)
        return si.PreemptionPredicatesResponse(success=True, index=args.start_index)


def ask(key: str, app_id: str, policy: si.PreemptionPolicy | None = None) -> si.AllocationAsk:
    return si.AllocationAsk(
        allocation_key=key,
        application_id=app_id,
        partition_name="default",
        resource_ask=si.Resource.of(memory=10),
        preemption_policy=policy,
    )


async def until(condition: Callable[[], bool], what: str) -> None:
    """Wait (on the system clock: the daemon runs on it) for ``condition``."""
    with anyio.fail_after(10):
        while not condition():
            await anyio.sleep(0.01)
    assert condition(), what


async def drive(remote: RemoteCore, rm: RecordingCallback) -> None:
    await remote.register_resource_manager(
        si.RegisterResourceManagerRequest(rm_id="rm", config=CONFIG), rm
    )
    await remote.update_node(
        si.NodeRequest(
            rm_id="rm",
            nodes=[
                si.NodeInfo(
                    node_id="n1",
                    action=si.ActionFromRM.CREATE,
                    schedulable_resource=si.Resource.of(memory=100),
                )
            ],
        )
    )
    apps = [
        si.AddApplicationRequest(
            application_id=app_id,
            queue_name=queue,
            partition_name="default",
            ugi=si.UserGroupInformation(user="alice"),
        )
        for app_id, queue in (("g", "root.greedy"), ("s", "root.starved"))
    ]
    await remote.update_application(si.ApplicationRequest(rm_id="rm", new=apps))
    greedy = [ask(f"g-{i}", "g") for i in range(10)]
    await remote.update_allocation(si.AllocationRequest(rm_id="rm", asks=greedy))
    await until(lambda: len(rm.allocations) == 10, "the cluster full")
    await remote.update_allocation(
        si.AllocationRequest(rm_id="rm", asks=[ask("s-0", "s", MAY_PREEMPT)])
    )
    await until(lambda: any(r.termination_type == PREEMPTED for r in rm.released), "a victim")
    (victim,) = [r for r in rm.released if r.termination_type == PREEMPTED]
    assert victim.application_id == "g"
    await remote.update_allocation(
        si.AllocationRequest(
            rm_id="rm",
            releases=si.AllocationReleasesRequest(
                allocations_to_release=[
                    si.AllocationRelease(
                        partition_name="default",
                        application_id="g",
                        uuid=victim.uuid,
                        termination_type=PREEMPTED,
                    )
                ]
            ),
        )
    )
    await until(lambda: any(a.application_id == "s" for a in rm.allocations), "the preemptor")
    (placed,) = [a for a in rm.allocations if a.application_id == "s"]
    assert placed.node_id == "n1" and placed.allocation_key == "s-0"


@pytest.mark.asyncio
@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("checks", [False, True], ids=["plain", "predicates"])
async def test_a_preemption_over_the_wire(transport: str, checks: bool) -> None:
    rm: RecordingCallback = Checking() if checks else RecordingCallback()
    async with serving() as (_core, targets), connect(targets[transport]) as remote:
        await drive(remote, rm)
    if isinstance(rm, Checking):
        (question,) = rm.asked
        assert question.allocation_key == "s-0" and question.node_id == "n1"
