"""The RM's callback actor answers ``CheckPreemptionPredicates`` (SI 1.3's preemption
predicates) for the core: the RM's own answer, the default's when the RM has no
``preemption_predicates`` of its own, a refusal when the RM raises or is Paused."""

from __future__ import annotations

import pytest

import scheduler
from scheduler import si
from scheduler.core._events import CheckPreemptionPredicates
from scheduler.si._callback import check_callback, overrides
from scheduler.testing import RecordingCallback

QUESTION = CheckPreemptionPredicates(
    allocation_key="ask-1",
    node_id="n1",
    preempt_allocation_keys=("v-0", "v-1", "v-2", "v-3"),
    start_index=1,
)


async def ask_preemption(
    core: scheduler.Core, rm_id: str = "rm", question: CheckPreemptionPredicates = QUESTION
) -> si.PreemptionPredicatesResponse:
    """What the registered RM ``rm_id``'s callback actor answers ``question``."""
    answer = await core.proxy.rms[rm_id].callback.ask(question)
    assert isinstance(answer, si.PreemptionPredicatesResponse)
    return answer


class Checking(RecordingCallback):
    """Checks preemption: the ask fits once the victims up to index 2 are gone."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[si.PreemptionPredicatesArgs] = []

    async def preemption_predicates(
        self, args: si.PreemptionPredicatesArgs
    ) -> si.PreemptionPredicatesResponse:
        self.asked.append(args)
        return si.PreemptionPredicatesResponse(success=True, index=2)


async def register(core: scheduler.Core, callback: object) -> None:
    request = si.RegisterResourceManagerRequest(rm_id="rm")
    await core.register_resource_manager(request, callback)  # type: ignore[arg-type]


# ================================================================= the default answer
@pytest.mark.asyncio
async def test_the_default_callback_accepts_the_victims_the_core_picked() -> None:
    args = si.PreemptionPredicatesArgs(
        allocation_key="a", node_id="n", preempt_allocation_keys=["x", "y", "z"], start_index=2
    )
    answer = await scheduler.ResourceManagerCallback().preemption_predicates(args)
    assert answer == si.PreemptionPredicatesResponse(success=True, index=2)


@pytest.mark.asyncio
async def test_an_rm_that_keeps_the_default_accepts(core: scheduler.Core) -> None:
    rm = RecordingCallback()
    await register(core, rm)
    assert not overrides(rm, "preemption_predicates")
    assert await ask_preemption(core) == si.PreemptionPredicatesResponse(success=True, index=1)


@pytest.mark.asyncio
async def test_an_rm_written_before_preemption_predicates_is_accepted_and_accepts(
    core: scheduler.Core,
) -> None:
    """A duck-typed callback without the method still registers; it is taken to accept."""

    class Old:
        async def update_allocation(self, response: si.AllocationResponse) -> None: ...
        async def update_application(self, response: si.ApplicationResponse) -> None: ...
        async def update_node(self, response: si.NodeResponse) -> None: ...
        async def predicates(self, args: si.PredicatesArgs) -> bool:
            return True

        async def send_event(self, events: list[si.EventRecord]) -> None: ...
        async def update_container_scheduling_state(
            self, request: si.UpdateContainerSchedulingStateRequest
        ) -> None: ...

    old = Old()
    check_callback(old)
    assert not overrides(old, "preemption_predicates")
    await register(core, old)
    assert await ask_preemption(core) == si.PreemptionPredicatesResponse(success=True, index=1)


def test_a_preemption_predicates_that_is_not_a_coroutine_is_refused() -> None:
    class Sync(RecordingCallback):
        def preemption_predicates(  # type: ignore[override]
            self, args: si.PreemptionPredicatesArgs
        ) -> si.PreemptionPredicatesResponse:
            return si.PreemptionPredicatesResponse(success=True)

    with pytest.raises(scheduler.SchedulerError, match=r"Sync lacks .*preemption_predicates"):
        check_callback(Sync())


# ==================================================================== the RM's answer
@pytest.mark.asyncio
async def test_the_rm_is_asked_and_its_answer_is_the_reply(core: scheduler.Core) -> None:
    rm = Checking()
    await register(core, rm)
    assert await ask_preemption(core) == si.PreemptionPredicatesResponse(success=True, index=2)
    assert rm.asked == [
        si.PreemptionPredicatesArgs(
            allocation_key="ask-1",
            node_id="n1",
            preempt_allocation_keys=["v-0", "v-1", "v-2", "v-3"],
            start_index=1,
        )
    ]


@pytest.mark.asyncio
async def test_a_refusal_of_the_rm_is_the_reply(core: scheduler.Core) -> None:
    class Refusing(RecordingCallback):
        async def preemption_predicates(
            self, args: si.PreemptionPredicatesArgs
        ) -> si.PreemptionPredicatesResponse:
            return si.PreemptionPredicatesResponse(success=False, index=-1)

    await register(core, Refusing())
    assert await ask_preemption(core) == si.PreemptionPredicatesResponse(success=False, index=-1)


@pytest.mark.asyncio
@pytest.mark.logs_errors("RM preemption_predicates raised")
async def test_an_rm_that_raises_refuses(core: scheduler.Core) -> None:
    class Broken(RecordingCallback):
        async def preemption_predicates(
            self, args: si.PreemptionPredicatesArgs
        ) -> si.PreemptionPredicatesResponse:
            raise RuntimeError("no node info")

    await register(core, Broken())
    answer = await ask_preemption(core)
    assert answer == si.PreemptionPredicatesResponse(success=False, index=-1)
    # the actor goes on: the next question is answered too
    assert (await ask_preemption(core)).success is False


@pytest.mark.asyncio
@pytest.mark.logs_errors("RM preemption_predicates raised")
async def test_an_answer_that_is_not_a_response_refuses(core: scheduler.Core) -> None:
    class Sloppy(RecordingCallback):
        async def preemption_predicates(  # type: ignore[override]
            self, args: si.PreemptionPredicatesArgs
        ) -> bool:
            return True

    await register(core, Sloppy())
    assert await ask_preemption(core) == si.PreemptionPredicatesResponse(success=False, index=-1)


@pytest.mark.asyncio
async def test_a_paused_rm_is_not_asked_and_refuses(core: scheduler.Core) -> None:
    rm = Checking()
    await register(core, rm)
    core.rm_disconnected("rm")
    assert await ask_preemption(core) == si.PreemptionPredicatesResponse(success=False, index=-1)
    assert rm.asked == []
    [record] = await core.get_resource_managers()
    assert record["droppedCallbacks"] == 0  # refused, not lost
