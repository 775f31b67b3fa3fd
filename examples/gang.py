"""A gang application: placeholders reserve room for the whole gang, then real asks replace
them through a release handshake with the RM.

Run it: ``python examples/gang.py``.

1. The application declares its gang: ``placeholder_ask`` is the total of its placeholders.
2. The RM asks for one placeholder per member (``placeholder=True``, a ``task_group_name``);
   the core places them all or, in time, times them out.
3. The RM asks for the real members, in the same task group. For each, the core releases a
   placeholder with ``PLACEHOLDER_REPLACED`` and waits: the RM stops the placeholder and
   confirms with an ``AllocationRelease`` of the same uuid and termination type. Only then
   does the real allocation arrive, on the placeholder's node.
"""

from __future__ import annotations

import asyncio

import scheduler
from scheduler import si

RM = "rm-1"
GI = 1024**3
MEMBERS = 3
GROUP = "workers"
MEMBER = {"memory": 2 * GI, "vcore": 1000}  # what each member of the task group needs

QUEUES_YAML = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: "*"
        queues:
          - name: jobs
"""


class GangRM(scheduler.ResourceManagerCallback):
    """An RM that confirms every placeholder the core releases for replacement."""

    def __init__(self) -> None:
        self.core: scheduler.Core | None = None
        self.key_of: dict[str, str] = {}  # allocation uuid -> allocation key, for printing

    async def update_application(self, response: si.ApplicationResponse) -> None:
        for bad_app in response.rejected:
            print(f"application REJECTED: {bad_app.application_id}: {bad_app.reason}")
        for change in response.updated:
            print(f"application {change.application_id} is {change.state}")

    async def update_allocation(self, response: si.AllocationResponse) -> None:
        for alloc in response.new:
            self.key_of[alloc.uuid] = alloc.allocation_key
            kind = "placeholder" if alloc.placeholder else "real"
            print(f"allocated {kind} {alloc.allocation_key} on {alloc.node_id}")
        for ask in response.rejected:
            print(f"ask REJECTED: {ask.allocation_key}: {ask.reason}")
        replaced = si.TerminationType.PLACEHOLDER_REPLACED
        confirmations = []
        for release in response.released:
            key = self.key_of.get(release.uuid, release.uuid)
            if release.termination_type == si.TerminationType.STOPPED_BY_RM:
                # As YuniKorn does, the core answers each release of the RM's, confirmations too
                print(f"core confirms the RM's release of {key} (STOPPED_BY_RM)")
                continue
            print(f"core releases {key} ({release.termination_type.name})")
            if release.termination_type == replaced:
                # A real RM stops the placeholder's pod here, then confirms.
                print(f"  RM confirms the release of {key}")
                confirmations.append(
                    si.AllocationRelease(
                        partition_name=release.partition_name,
                        application_id=release.application_id,
                        uuid=release.uuid,
                        termination_type=replaced,
                    )
                )
        if confirmations and self.core is not None:
            await self.core.update_allocation(
                si.AllocationRequest(
                    rm_id=RM,
                    releases=si.AllocationReleasesRequest(allocations_to_release=confirmations),
                )
            )


def member_ask(key: str, *, placeholder: bool) -> si.AllocationAsk:
    return si.AllocationAsk(
        allocation_key=key,
        application_id="gang-app",
        partition_name="default",
        resource_ask=si.Resource.of(**MEMBER),
        max_allocations=1,
        task_group_name=GROUP,
        placeholder=placeholder,
    )


async def main() -> None:
    rm = GangRM()
    async with scheduler.start_scheduler() as core:
        rm.core = core
        await core.register_resource_manager(
            si.RegisterResourceManagerRequest(
                rm_id=RM, policy_group="default", version="1", config=QUEUES_YAML
            ),
            rm,
        )
        await core.update_node(
            si.NodeRequest(
                rm_id=RM,
                nodes=[
                    si.NodeInfo(
                        node_id=f"node-{i}",
                        action=si.ActionFromRM.CREATE,
                        schedulable_resource=si.Resource.of(memory=4 * GI, vcore=2000),
                    )
                    for i in (1, 2)
                ],
            )
        )
        await core.update_application(
            si.ApplicationRequest(
                rm_id=RM,
                new=[
                    si.AddApplicationRequest(
                        application_id="gang-app",
                        queue_name="root.jobs",
                        partition_name="default",
                        ugi=si.UserGroupInformation(user="alice"),
                        placeholder_ask=si.Resource.of(
                            **{name: MEMBERS * value for name, value in MEMBER.items()}
                        ),
                        gang_scheduling_style="Hard",
                        execution_timeout_milliseconds=60_000,  # placeholder timeout
                    )
                ],
            )
        )
        print("--- placeholders")
        placeholders = [member_ask(f"ph-{i}", placeholder=True) for i in range(MEMBERS)]
        await core.update_allocation(si.AllocationRequest(rm_id=RM, asks=placeholders))
        await core.settle()

        print("--- real members replace them")
        reals = [member_ask(f"worker-{i}", placeholder=False) for i in range(MEMBERS)]
        await core.update_allocation(si.AllocationRequest(rm_id=RM, asks=reals))
        await core.settle()  # returns once every handshake the RM confirmed has completed

        app = await core.get_application("default", "gang-app")
        print("--- result")
        print(f"applicationState: {app['applicationState']}")
        for entry in app["placeholderData"]:
            print(f"placeholderData: {entry}")


if __name__ == "__main__":
    asyncio.run(main())
