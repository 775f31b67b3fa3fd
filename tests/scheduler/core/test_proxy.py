"""The RM proxy in isolation: validation, rejection and routing, with recording fake refs."""

from __future__ import annotations

from typing import Any, cast

import pytest

from actors import ActorRef
from scheduler import si
from scheduler._errors import SchedulerError
from scheduler.core._events import (
    AllocationsReleased,
    ApplicationsAdded,
    ApplicationsRemoved,
    AsksReleased,
    AsksUpdated,
    NodesUpdated,
    Outbound,
)
from scheduler.core._proxy import RMProxy, RMRecord, _plain_ask
from scheduler.objects._gang_tags import TAG_MIN_AVAILABLE, TAG_NAME

RM = "rm-1"


# ============================================================================ fakes and factories
class FakeRef:
    """Stands in for an actor ref: records every message told."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.told: list[Any] = []
        self.alive = True

    def tell(self, msg: Any) -> None:
        self.told.append(msg)


class Env:
    def __init__(self) -> None:
        self.proxy = RMProxy()
        self.callback = FakeRef("callback")
        self.default = FakeRef("default")
        self.other = FakeRef("other")
        record = self.proxy.rms[RM] = RMRecord(RM, cast(ActorRef, self.callback))
        self.apps: dict[str, ActorRef] = {}  # the default partition's published app actors
        record.add_partition("default", cast(ActorRef, self.default), self.apps)
        record.add_partition("other", cast(ActorRef, self.other), {})

    def nothing_sent(self) -> bool:
        return not (self.callback.told or self.default.told or self.other.told)

    def outbound(self) -> list[Outbound]:
        assert all(isinstance(m, Outbound) for m in self.callback.told)
        return self.callback.told


@pytest.fixture
def env() -> Env:
    return Env()


def ask(
    key: str = "k1",
    app_id: str = "app-1",
    *,
    partition: str = "default",
    resource: si.Resource | None = None,
    count: Any = 1,
    **kw: Any,
) -> si.AllocationAsk:
    return si.AllocationAsk(
        allocation_key=key,
        application_id=app_id,
        partition_name=partition,
        resource_ask=si.Resource.of(memory=10, vcore=1) if resource is None else resource,
        max_allocations=count,
        **kw,
    )


def asks_request(
    *asks: si.AllocationAsk, rm_id: str = RM, releases: si.AllocationReleasesRequest | None = None
) -> si.AllocationRequest:
    return si.AllocationRequest(rm_id=rm_id, asks=list(asks), releases=releases)


def node(
    node_id: Any = "n1",
    action: Any = si.ActionFromRM.CREATE,
    resource: si.Resource | None = None,
    **kw: Any,
) -> si.NodeInfo:
    return si.NodeInfo(
        node_id=node_id,
        action=action,
        schedulable_resource=resource or si.Resource.of(memory=100, vcore=10),
        **kw,
    )


def routed_asks(ref: FakeRef) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for msg in ref.told:
        assert isinstance(msg, AsksUpdated)
        assert msg.application_id not in out, "one AsksUpdated per application"
        out[msg.application_id] = [a.allocation_key for a in msg.asks]
    return out


# ============================================================================ whole-request errors
REQUESTS: list[tuple[str, Any]] = [
    ("update_allocation", si.AllocationRequest(rm_id=RM, asks=[ask()])),
    (
        "update_application",
        si.ApplicationRequest(
            rm_id=RM, new=[si.AddApplicationRequest(application_id="a", queue_name="root.a")]
        ),
    ),
    ("update_node", si.NodeRequest(rm_id=RM, nodes=[node()])),
]


@pytest.mark.parametrize(("method", "request_"), REQUESTS, ids=[m for m, _ in REQUESTS])
def test_wrong_request_type_raises_and_routes_nothing(env: Env, method: str, request_: Any) -> None:
    wrong = next(r for m, r in REQUESTS if m != method)
    with pytest.raises(SchedulerError, match="expected si"):
        getattr(env.proxy, method)(wrong)
    assert env.nothing_sent()


@pytest.mark.parametrize(("method", "request_"), REQUESTS, ids=[m for m, _ in REQUESTS])
@pytest.mark.parametrize(
    ("rm_id", "match"),
    [
        ("", "rm_id"),
        ("nobody", "not registered"),
        (None, "rm_id"),
    ],
)
def test_missing_or_unknown_rm_raises_and_routes_nothing(
    env: Env, method: str, request_: Any, rm_id: Any, match: str
) -> None:
    request_ = type(request_)(
        **{**{f: getattr(request_, f) for f in request_.__struct_fields__}, "rm_id": rm_id}
    )
    with pytest.raises(SchedulerError, match=match):
        getattr(env.proxy, method)(request_)
    assert env.nothing_sent()


def test_a_good_request_is_routed(env: Env) -> None:
    env.proxy.update_allocation(asks_request(ask()))
    assert env.callback.told == []
    assert routed_asks(env.default) == {"app-1": ["k1"]}


def test_an_ask_list_that_is_not_a_list_raises(env: Env) -> None:
    request_ = si.AllocationRequest(rm_id=RM, asks=cast(Any, (ask(),)))
    with pytest.raises(SchedulerError):
        env.proxy.update_allocation(request_)
    assert env.nothing_sent()


def test_a_non_ask_in_the_list_raises(env: Env) -> None:
    with pytest.raises(SchedulerError, match="asks holds"):
        env.proxy.update_allocation(asks_request(ask(), cast(Any, "not an ask")))
    assert env.nothing_sent()


# ============================================================================ asks
BAD_ASKS = [
    pytest.param(ask("bad", resource=si.Resource.of(memory=-1)), "negative", id="negative"),
    pytest.param(
        ask("bad", resource=si.Resource.of(memory=10, vcore=2**63)), "64-bit", id="int64-overflow"
    ),
    pytest.param(
        ask("bad", resource=si.Resource(resources=cast(Any, {5: si.Quantity(value=1)}))),
        "not a string",
        id="int-resource-name",
    ),
    pytest.param(
        ask("bad", resource=si.Resource(resources=cast(Any, {"memory": 5}))),
        "si.Quantity",
        id="bare-int-quantity",
    ),
    pytest.param(ask("bad", resource=si.Resource()), "empty", id="empty-resource"),
    pytest.param(ask("bad", resource=si.Resource.of(memory=0, vcore=0)), "empty", id="all-zero"),
    pytest.param(
        si.AllocationAsk(allocation_key="bad", application_id="app-1", partition_name="default"),
        "empty",
        id="no-resource",
    ),
    pytest.param(ask(""), "allocation key is missing", id="missing-key"),
    pytest.param(ask("bad", ""), "application id is missing", id="missing-app-id"),
    pytest.param(
        ask("bad", resource=si.Resource(resources={"memory": si.Quantity(value=cast(Any, 1.5))})),
        "integer",
        id="float-quantity",
    ),
    pytest.param(
        ask("bad", resource=si.Resource(resources={"memory": si.Quantity(value=cast(Any, "10"))})),
        "integer",
        id="str-quantity",
    ),
    pytest.param(ask("bad", count=-1), "max allocations", id="negative-count"),
    pytest.param(ask("bad", count=cast(Any, "2")), "max allocations", id="str-count"),
    pytest.param(ask("bad", partition="nope"), "does not exist", id="unknown-partition"),
]


@pytest.mark.parametrize(("bad", "reason"), BAD_ASKS)
def test_bad_ask_is_rejected_and_the_good_ones_go_on(
    env: Env, bad: si.AllocationAsk, reason: str
) -> None:
    env.proxy.update_allocation(
        asks_request(ask("g1", "app-1"), ask("g2", "app-2"), bad, ask("g3", "app-1"))
    )
    [out] = env.outbound()
    assert out.kind == "allocation"
    assert isinstance(out.payload, si.AllocationResponse)
    assert out.payload.new == [] and out.payload.released == []
    [rejected] = out.payload.rejected
    assert isinstance(rejected, si.RejectedAllocationAsk)
    assert rejected.allocation_key == bad.allocation_key
    assert rejected.application_id == bad.application_id
    assert reason in rejected.reason
    assert routed_asks(env.default) == {"app-1": ["g1", "g3"], "app-2": ["g2"]}
    assert env.other.told == []


def test_several_bad_asks_are_rejected_in_one_response(env: Env) -> None:
    env.proxy.update_allocation(asks_request(ask("b1", count=-1), ask("g1"), ask("")))
    [out] = env.outbound()
    assert [r.allocation_key for r in out.payload.rejected] == ["b1", ""]
    assert routed_asks(env.default) == {"app-1": ["g1"]}


@pytest.mark.parametrize(
    ("partition", "target"), [("", "default"), ("default", "default"), ("other", "other")]
)
def test_asks_route_to_their_partition(env: Env, partition: str, target: str) -> None:
    env.proxy.update_allocation(asks_request(ask("k1", partition=partition)))
    ref = env.default if target == "default" else env.other
    quiet = env.other if target == "default" else env.default
    assert routed_asks(ref) == {"app-1": ["k1"]}
    assert quiet.told == [] and env.callback.told == []


def test_asks_of_one_request_split_by_partition_and_application(env: Env) -> None:
    env.proxy.update_allocation(
        asks_request(
            ask("a", "app-1"),
            ask("b", "app-1", partition="other"),
            ask("c", "app-2", partition=""),
            ask("d", "app-1"),
        )
    )
    assert routed_asks(env.default) == {"app-1": ["a", "d"], "app-2": ["c"]}
    assert routed_asks(env.other) == {"app-1": ["b"]}


def release_request(app_id: str) -> si.AllocationRequest:
    return si.AllocationRequest(
        rm_id=RM,
        releases=si.AllocationReleasesRequest(
            allocations_to_release=[si.AllocationRelease(application_id=app_id, uuid="u-1")],
            allocation_asks_to_release=[
                si.AllocationAskRelease(application_id=app_id, allocation_key="k1")
            ],
        ),
    )


def test_asks_and_releases_go_straight_to_a_published_application_actor(env: Env) -> None:
    app_ref = FakeRef("app-1")
    env.apps["app-1"] = cast(ActorRef, app_ref)
    env.proxy.update_allocation(asks_request(ask("k1", "app-1"), ask("k2", "app-2")))
    env.proxy.update_allocation(release_request("app-1"))
    assert routed_asks(env.default) == {"app-2": ["k2"]}  # not published: via the partition
    kinds = [type(m) for m in app_ref.told]
    assert kinds == [AsksUpdated, AsksReleased, AllocationsReleased]


def test_a_stopped_application_actor_is_bypassed(env: Env) -> None:
    app_ref = FakeRef("app-1")
    app_ref.alive = False
    env.apps["app-1"] = cast(ActorRef, app_ref)
    env.proxy.update_allocation(asks_request(ask("k1", "app-1")))
    assert app_ref.told == []
    assert routed_asks(env.default) == {"app-1": ["k1"]}


def test_adding_an_application_sends_what_follows_through_the_partition(env: Env) -> None:
    """An add may replace the application's actor: until the partition publishes the one
    it settles on, messages for the id queue up behind the add, in the RM's order."""
    app_ref = FakeRef("app-1")
    env.apps["app-1"] = cast(ActorRef, app_ref)
    env.proxy.update_application(
        si.ApplicationRequest(
            rm_id=RM, new=[si.AddApplicationRequest(application_id="app-1", queue_name="a")]
        )
    )
    env.proxy.update_allocation(asks_request(ask("k1", "app-1")))
    assert "app-1" not in env.apps and app_ref.told == []
    assert [type(m) for m in env.default.told] == [ApplicationsAdded, AsksUpdated]


@pytest.mark.parametrize(("count", "expected"), [(0, 1), (1, 1), (3, 3)])
def test_max_allocations_zero_becomes_one(env: Env, count: int, expected: int) -> None:
    env.proxy.update_allocation(asks_request(ask(count=count)))
    [msg] = env.default.told
    assert msg.asks[0].max_allocations == expected


def test_routed_ask_carries_the_checked_values(env: Env) -> None:
    env.proxy.update_allocation(
        asks_request(
            ask(
                resource=si.Resource.of(memory=64, vcore=0, gpu=2),
                priority=7,
                tags={si.DOMAIN_YUNIKORN + si.KEY_REQUIRED_NODE: "n9", "x": "y"},
            )
        )
    )
    [msg] = env.default.told
    [spec] = msg.asks
    assert spec.resource == {"memory": 64, "gpu": 2}  # zero entries dropped
    assert spec.priority == 7
    assert spec.required_node == "n9"
    assert spec.application_id == "app-1"


def test_placeholder_needs_a_task_group(env: Env) -> None:
    env.proxy.update_allocation(
        asks_request(
            ask("no-group", placeholder=True),
            ask("grouped", placeholder=True, task_group_name="tg"),
            ask("plain", task_group_name="tg"),  # a task group without placeholder is fine
        )
    )
    [out] = env.outbound()
    [rejected] = out.payload.rejected
    assert rejected.allocation_key == "no-group"
    assert "placeholder" in rejected.reason and "task group" in rejected.reason
    [msg] = env.default.told
    assert [(a.allocation_key, a.placeholder) for a in msg.asks] == [
        ("grouped", True),
        ("plain", False),
    ]


# ============================================================================ releases
def _release(app_id: str, uuid: str, partition: str = "default", **kw: Any) -> si.AllocationRelease:
    return si.AllocationRelease(
        partition_name=partition,
        application_id=app_id,
        uuid=uuid,
        termination_type=si.TerminationType.STOPPED_BY_RM,
        **kw,
    )


def test_allocation_releases_are_grouped_per_application(env: Env) -> None:
    env.proxy.update_allocation(
        asks_request(
            releases=si.AllocationReleasesRequest(
                allocations_to_release=[
                    _release("app-1", "u1"),
                    _release("app-2", "u2"),
                    _release("app-1", "u3", partition=""),
                    _release("app-1", "u4", partition="other"),
                ]
            )
        )
    )
    by_app = {m.application_id: [r.uuid for r in m.releases] for m in env.default.told}
    assert all(isinstance(m, AllocationsReleased) for m in env.default.told)
    assert by_app == {"app-1": ["u1", "u3"], "app-2": ["u2"]}
    assert len(env.default.told) == 2
    [other] = env.other.told
    assert other.application_id == "app-1" and [r.uuid for r in other.releases] == ["u4"]
    assert env.callback.told == []


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (si.TerminationType.TIMEOUT, si.TerminationType.TIMEOUT),
        (si.TerminationType.UNKNOWN_TERMINATION_TYPE, si.TerminationType.STOPPED_BY_RM),
        (99, si.TerminationType.STOPPED_BY_RM),
    ],
)
def test_release_termination_type_is_normalised(
    env: Env, given: Any, expected: si.TerminationType
) -> None:
    env.proxy.update_allocation(
        asks_request(
            releases=si.AllocationReleasesRequest(
                allocations_to_release=[
                    si.AllocationRelease(
                        partition_name="default",
                        application_id="app-1",
                        uuid="u1",
                        termination_type=given,
                    )
                ]
            )
        )
    )
    [msg] = env.default.told
    assert msg.releases[0].termination == expected


def test_bad_releases_are_dropped_and_the_rest_routed(env: Env) -> None:
    env.proxy.update_allocation(
        asks_request(
            releases=si.AllocationReleasesRequest(
                allocations_to_release=[
                    _release("", "u1"),
                    _release("app-1", "u2", partition="nope"),
                    _release("app-1", "u3"),
                ]
            )
        )
    )
    [msg] = env.default.told
    assert [r.uuid for r in msg.releases] == ["u3"]
    assert env.other.told == []


def test_ask_releases_are_grouped_per_application(env: Env) -> None:
    def rel(app_id: str, key: str) -> si.AllocationAskRelease:
        return si.AllocationAskRelease(
            partition_name="default",
            application_id=app_id,
            allocation_key=key,
            termination_type=si.TerminationType.STOPPED_BY_RM,
        )

    env.proxy.update_allocation(
        asks_request(
            releases=si.AllocationReleasesRequest(
                allocation_asks_to_release=[
                    rel("app-1", "k1"),
                    rel("app-2", ""),
                    rel("app-1", "k2"),
                ]
            )
        )
    )
    msgs = {m.application_id: m for m in env.default.told}
    assert all(isinstance(m, AsksReleased) for m in env.default.told)
    assert len(env.default.told) == 2
    assert msgs["app-1"].allocation_keys == ("k1", "k2")
    assert msgs["app-2"].allocation_keys == ()  # every ask of the application


def test_asks_are_routed_before_releases(env: Env) -> None:
    env.proxy.update_allocation(
        asks_request(
            ask("k1"),
            releases=si.AllocationReleasesRequest(
                allocations_to_release=[_release("app-1", "u1")],
                allocation_asks_to_release=[
                    si.AllocationAskRelease(
                        partition_name="default", application_id="app-1", allocation_key="k0"
                    )
                ],
            ),
        )
    )
    assert [type(m) for m in env.default.told] == [AsksUpdated, AsksReleased, AllocationsReleased]


# ============================================================================ nodes
@pytest.mark.parametrize(
    ("bad", "node_id", "reason"),
    [
        (node(""), "", "node id is missing"),
        (node("n9", action=99), "n9", "unknown action"),
        (node("n9", action=si.ActionFromRM.UNKNOWN_ACTION_FROM_RM), "n9", "not set"),
        (node("n9", resource=si.Resource.of(memory=-5)), "n9", "negative"),
        (node("n9", attributes={si.NODE_PARTITION: "nope"}), "n9", "does not exist"),
    ],
)
def test_bad_node_is_rejected_and_the_good_ones_go_on(
    env: Env, bad: si.NodeInfo, node_id: str, reason: str
) -> None:
    env.proxy.update_node(si.NodeRequest(rm_id=RM, nodes=[node("n1"), bad, node("n2")]))
    [out] = env.outbound()
    assert out.kind == "node"
    assert isinstance(out.payload, si.NodeResponse)
    assert out.payload.accepted == []
    [rejected] = out.payload.rejected
    assert isinstance(rejected, si.RejectedNode)
    assert rejected.node_id == node_id
    assert reason in rejected.reason
    [msg] = env.default.told
    assert isinstance(msg, NodesUpdated)
    assert [u.node_id for u in msg.nodes] == ["n1", "n2"]


def test_node_routes_by_its_partition_attribute(env: Env) -> None:
    env.proxy.update_node(
        si.NodeRequest(
            rm_id=RM, nodes=[node("n1"), node("n2", attributes={si.NODE_PARTITION: "other"})]
        )
    )
    [to_default] = env.default.told
    [to_other] = env.other.told
    assert [u.node_id for u in to_default.nodes] == ["n1"]
    assert [u.node_id for u in to_other.nodes] == ["n2"]


def test_node_update_carries_checked_values(env: Env) -> None:
    env.proxy.update_node(
        si.NodeRequest(
            rm_id=RM,
            nodes=[
                si.NodeInfo(
                    node_id="n1",
                    action=si.ActionFromRM.CREATE,
                    schedulable_resource=si.Resource.of(memory=100, vcore=0),
                    occupied_resource=si.Resource.of(memory=10),
                ),
                si.NodeInfo(node_id="n1", action=si.ActionFromRM.DRAIN_NODE),
            ],
        )
    )
    [msg] = env.default.told
    create, drain = msg.nodes
    assert create.action == si.ActionFromRM.CREATE
    assert create.capacity == {"memory": 100} and create.occupied == {"memory": 10}
    assert drain.action == si.ActionFromRM.DRAIN_NODE
    assert drain.capacity is None and drain.occupied is None  # nothing to change


def test_node_existing_allocation_on_another_node_rejects_the_node(env: Env) -> None:
    alloc = si.Allocation(
        uuid="u1",
        application_id="app-1",
        node_id="elsewhere",
        resource_per_alloc=si.Resource.of(memory=1),
    )
    env.proxy.update_node(
        si.NodeRequest(rm_id=RM, nodes=[node("n1", existing_allocations=[alloc])])
    )
    [out] = env.outbound()
    assert "elsewhere" in out.payload.rejected[0].reason
    assert [u for m in env.default.told for u in m.nodes] == []  # the node is not routed


# ============================================================================ applications
def test_bad_application_is_rejected_and_the_rest_added(env: Env) -> None:
    env.proxy.update_application(
        si.ApplicationRequest(
            rm_id=RM,
            new=[
                si.AddApplicationRequest(application_id="", queue_name="root.a"),
                si.AddApplicationRequest(
                    application_id="app-2", queue_name="root.a", gang_scheduling_style="sometimes"
                ),
                si.AddApplicationRequest(application_id="app-1", queue_name="root.a"),
            ],
            remove=[si.RemoveApplicationRequest(application_id="old", partition_name="")],
        )
    )
    [out] = env.outbound()
    assert out.kind == "application"
    assert [(r.application_id, bool(r.reason)) for r in out.payload.rejected] == [
        ("", True),
        ("app-2", True),
    ]
    added, removed = env.default.told
    assert isinstance(added, ApplicationsAdded)
    assert [a.application_id for a in added.apps] == ["app-1"]
    assert isinstance(removed, ApplicationsRemoved)
    assert removed.application_ids == ("old",)


# ============================================================================ regressions
@pytest.mark.parametrize("keys", [("", "k2"), ("k2", "")])
def test_release_every_ask_wins_whatever_the_order(env: Env, keys: tuple[str, str]) -> None:
    env.proxy.update_allocation(
        asks_request(
            releases=si.AllocationReleasesRequest(
                allocation_asks_to_release=[
                    si.AllocationAskRelease(
                        partition_name="default", application_id="app-1", allocation_key=k
                    )
                    for k in keys
                ]
            )
        )
    )
    [msg] = env.default.told
    assert isinstance(msg, AsksReleased) and msg.allocation_keys == ()


def test_all_bad_requests_send_nothing_to_the_partition(env: Env) -> None:
    env.proxy.update_node(
        si.NodeRequest(
            rm_id=RM,
            nodes=[
                si.NodeInfo(
                    action=si.ActionFromRM.CREATE, schedulable_resource=si.Resource.of(memory=1)
                )
            ],
        )
    )
    env.proxy.update_application(
        si.ApplicationRequest(
            rm_id=RM,
            new=[si.AddApplicationRequest(application_id="")],
            remove=[si.RemoveApplicationRequest(application_id="")],
        )
    )
    assert env.default.told == []
    assert len(env.callback.told) == 2  # the node and the application rejections


def test_a_partition_name_of_the_wrong_type_is_a_rejection(env: Env) -> None:
    bad = si.AllocationAsk(
        allocation_key="k",
        application_id="app-1",
        partition_name=["default"],  # type: ignore[arg-type]
        resource_ask=si.Resource.of(memory=1),
    )
    env.proxy.update_allocation(si.AllocationRequest(rm_id=RM, asks=[bad]))
    [out] = env.outbound()
    assert "partition name must be a string" in out.payload.rejected[0].reason
    assert env.default.told == []


def test_a_malformed_release_list_sends_nothing_at_all(env: Env) -> None:
    bad_item: Any = "not a release"
    bad_list: Any = None
    with pytest.raises(SchedulerError):
        env.proxy.update_allocation(
            asks_request(
                ask("k1"), releases=si.AllocationReleasesRequest(allocations_to_release=[bad_item])
            )
        )
    with pytest.raises(SchedulerError, match="must be lists"):
        env.proxy.update_allocation(
            asks_request(
                ask("k1"),
                releases=si.AllocationReleasesRequest(allocation_asks_to_release=bad_list),
            )
        )
    assert env.nothing_sent()


def test_a_node_with_a_malformed_field_is_rejected_not_a_crash(env: Env) -> None:
    broken: Any = None
    env.proxy.update_node(
        si.NodeRequest(
            rm_id=RM,
            nodes=[
                si.NodeInfo(
                    node_id="n1",
                    action=si.ActionFromRM.CREATE,
                    schedulable_resource=si.Resource.of(memory=1),
                    existing_allocations=broken,
                )
            ],
        )
    )
    [out] = env.outbound()
    assert out.payload.rejected[0].node_id == "n1"
    assert "malformed" in out.payload.rejected[0].reason
    assert env.default.told == []


@pytest.mark.parametrize("node_id", ["{", "}", "{0}", "n{}"])
def test_braces_in_an_id_do_not_break_the_rejection(env: Env, node_id: str) -> None:
    bad = si.NodeInfo(
        node_id=node_id,
        action=si.ActionFromRM.CREATE,
        occupied_resource=False,  # type: ignore[arg-type]
    )
    env.proxy.update_node(si.NodeRequest(rm_id=RM, nodes=[bad]))
    [out] = env.outbound()
    (rejected,) = out.payload.rejected
    assert rejected.node_id == node_id and "must be an si.Resource" in rejected.reason
    assert env.default.told == []


# ============================================================================ the one-pass ask
ONE_PASS_ASKS: list[si.AllocationAsk] = [
    ask(),
    ask(count=0),
    ask(count=5, priority=-3),
    ask(resource=si.Resource.of(memory=64, vcore=0, gpu=2)),
    ask(tags={si.DOMAIN_YUNIKORN + si.KEY_REQUIRED_NODE: "n9", "x": "y"}),
    ask(task_group_name="tg", placeholder=True, execution_timeout_milliseconds=5),
    ask(task_group_name="tg", originator=True),
    ask(tags=cast(Any, None)),
    ask(tags=cast(Any, None), priority=2),
    ask(tags={TAG_NAME: "g", TAG_MIN_AVAILABLE: "2"}),
    # what only the step-by-step check takes, or rejects
    ask(placeholder=True),
    ask(key=""),
    ask(app_id=""),
    ask(resource=si.Resource.of(memory=0)),
    ask(resource=si.Resource.of(memory=-1)),
    ask(resource=si.Resource(resources={"memory": cast(Any, 5)})),
    ask(count=-1),
    ask(priority=1 << 40),
    ask(placeholder=cast(Any, 1), task_group_name="tg"),
    ask(tags=cast(Any, [("a", "b")])),
]


@pytest.mark.parametrize("item", ONE_PASS_ASKS)
def test_the_one_pass_ask_is_the_checked_ask(env: Env, item: si.AllocationAsk) -> None:
    """``_plain_ask`` builds what ``_ask`` builds, or leaves the ask to it."""
    plain = _plain_ask(item, {})
    try:
        checked = env.proxy._ask(item)
    except Exception:
        assert plain is None
        return
    assert plain is None or plain == checked


def test_asks_of_one_resource_share_its_map(env: Env) -> None:
    env.proxy.update_allocation(asks_request(ask("a"), ask("b"), ask("c", count=2)))
    [msg] = env.default.told
    first, *rest = msg.asks
    assert [a.allocation_key for a in msg.asks] == ["a", "b", "c"]
    assert all(a.resource is first.resource and a.size is first.size for a in rest)
    assert first.resource == {"memory": 10, "vcore": 1}
