"""Application placement through the public API: YuniKorn v1.2's placement rules and ACLs.

``AppPlacementManager.PlaceApplication`` (placement/placement.go), the rules' filters
(placement/filter.go), ``Queue.CheckSubmitAccess`` (objects/queue.go) and
``PartitionContext.createQueue`` with child templates.
"""

from __future__ import annotations

import pytest

import scheduler
from scheduler import si
from scheduler.testing import ManualClock

from ..conftest import Driver

pytestmark = pytest.mark.asyncio

NO_RULE = "application rejected: no placement rule matched"


def request(
    app_id: str,
    queue: str = "",
    user: str = "alice",
    groups: tuple[str, ...] = (),
    tags: dict[str, str] | None = None,
) -> si.AddApplicationRequest:
    return si.AddApplicationRequest(
        application_id=app_id,
        queue_name=queue,
        partition_name="default",
        ugi=si.UserGroupInformation(user=user, groups=list(groups)),
        tags=tags or {},
    )


async def placed(
    core: scheduler.Core, clock: ManualClock, config: str, *apps: si.AddApplicationRequest
) -> Driver:
    d = Driver(core, clock)
    await d.register(config)
    await d.apps(*apps)
    await d.settle()
    return d


async def queue_exists(d: Driver, path: str) -> bool:
    try:
        await d.core.get_queue("default", path)
    except scheduler.NotFoundError:
        return False
    return True


# ============================================================================ 1. admin ACL
ADMIN = """
partitions:
  - name: default
    queues:
      - name: root
        adminacl: " admins"
        queues:
          - name: team
            adminacl: carol
            queues:
              - name: jobs
                submitacl: bob
"""


@pytest.mark.parametrize(
    ("user", "groups", "allowed"),
    [
        ("bob", (), True),  # the submit ACL
        ("carol", (), True),  # the admin ACL of the parent
        ("dave", ("admins",), True),  # root's admin ACL, by group
        ("mallory", (), False),
    ],
)
async def test_an_admin_acl_up_the_chain_lets_a_user_submit(
    core: scheduler.Core, clock: ManualClock, user: str, groups: tuple[str, ...], allowed: bool
) -> None:
    d = await placed(core, clock, ADMIN, request("app-1", "root.team.jobs", user, groups))
    assert (d.rm.accepted_apps == ["app-1"]) is allowed


# ============================================================================ 2. next rule
NEXT_RULE = """
partitions:
  - name: default
    placementrules:
      - name: provided
      - name: user
        create: true
        parent:
          name: fixed
          value: users
      - name: fixed
        value: root.fallback
    queues:
      - name: root
        queues:
          - name: closed
            submitacl: bob
          - name: parent
            submitacl: "*"
            queues:
              - name: child
          - name: users
            parent: true
            submitacl: " devs"
          - name: fallback
            submitacl: "*"
"""


@pytest.mark.parametrize(
    ("queue", "user", "groups", "expected"),
    [
        ("root.closed", "alice", ("devs",), "root.users.alice"),  # ACL denies: next rule
        ("root.parent", "alice", ("devs",), "root.users.alice"),  # a parent: next rule
        ("root.missing", "alice", ("devs",), "root.users.alice"),  # may not create: next
        ("root.closed", "alice", (), "root.fallback"),  # users' ACL denies creating too
        ("root.closed", "bob", (), "root.closed"),  # the first rule places it
    ],
)
async def test_a_rule_whose_queue_does_not_fit_passes_to_the_next(
    core: scheduler.Core,
    clock: ManualClock,
    queue: str,
    user: str,
    groups: tuple[str, ...],
    expected: str,
) -> None:
    d = await placed(core, clock, NEXT_RULE, request("app-1", queue, user, groups))
    assert d.rm.accepted_apps == ["app-1"]
    info = await d.core.get_application("default", "app-1")
    assert info["queueName"] == expected


NO_FALLBACK = NEXT_RULE.replace("      - name: fixed\n        value: root.fallback\n", "")


async def test_no_rule_placing_it_rejects_with_yunikorns_reason_and_leaves_no_queue(
    core: scheduler.Core, clock: ManualClock
) -> None:
    d = await placed(
        core,
        clock,
        NO_FALLBACK,
        request("app-1", "", "mallory"),  # only the user rule names a queue
        request("app-2", "root.closed", "mallory"),
    )
    assert d.rm.accepted_apps == []
    assert [r.reason for r in d.rm.rejected_apps] == [
        f"failed to place application app-1: {NO_RULE}",
        f"failed to place application app-2: {NO_RULE}",
    ]
    # 3. the user rule would have made root.users.mallory: root.users' ACL said no first
    assert not await queue_exists(d, "root.users.mallory")
    assert (await d.core.get_queue("default", "root.users"))["children"] == []
    # 4. a rejected application shows no queue
    for app_id in ("app-1", "app-2"):
        info = await d.core.get_application("default", app_id)
        assert info["applicationState"] == "Rejected"
        assert info["queueName"] == ""


async def test_the_built_in_default_places_by_namespace_and_rejects_an_app_without_it(
    core: scheduler.Core, clock: ManualClock
) -> None:
    """An empty configuration is YuniKorn's ``DefaultSchedulerConfig`` (configs/config.go),
    whose one rule is ``tag`` on ``namespace``: without the tag ``tagRule.placeApplication``
    (placement/tag_rule.go, v1.2.0) names no queue, so ``PlaceApplication``
    (placement/placement.go) rejects the application, whichever queue it names, and
    ``PartitionContext.AddApplication`` (partition.go) prefixes the reason."""
    d = await placed(
        core,
        clock,
        "",
        request("app-1", "root.default"),
        request("app-2", "root.default", tags={"namespace": "team"}),
    )
    assert d.rm.accepted_apps == ["app-2"]
    assert [(r.application_id, r.reason) for r in d.rm.rejected_apps] == [
        ("app-1", f"failed to place application app-1: {NO_RULE}")
    ]
    assert (await d.core.get_application("default", "app-2"))["queueName"] == "root.team"
    assert not await queue_exists(d, "root.default")  # the named queue was not made


async def test_a_parent_rule_naming_a_leaf_rejects_at_once(
    core: scheduler.Core, clock: ManualClock
) -> None:
    config = """
partitions:
  - name: default
    placementrules:
      - name: user
        create: true
        parent:
          name: fixed
          value: leafy
      - name: fixed
        value: root.fallback
    queues:
      - name: root
        submitacl: "*"
        queues:
          - name: leafy
          - name: fallback
"""
    d = await placed(core, clock, config, request("app-1", user="alice"))
    [rejected] = d.rm.rejected_apps
    assert rejected.reason == (
        "failed to place application app-1: parent rule returned a leaf queue: root.leafy"
    )


# ============================================================================ 5. filters
FILTERED = """
partitions:
  - name: default
    placementrules:
      - name: user
        create: true
        filter:
          type: deny
          users: ["^sys-"]
      - name: tag
        value: namespace
        create: true
        filter:
          groups: [devs, ops]
      - name: fixed
        value: root.other
    queues:
      - name: root
        submitacl: "*"
        queues:
          - name: other
"""


@pytest.mark.parametrize(
    ("user", "groups", "expected"),
    [
        ("alice", (), "root.alice"),  # not denied by the user filter
        ("sys-batch", ("devs",), "root.team"),  # denied by regex; the tag rule allows devs
        ("sys-batch", ("qa",), "root.other"),  # the tag rule's filter does not list qa
    ],
)
async def test_placement_rule_filters(
    core: scheduler.Core,
    clock: ManualClock,
    user: str,
    groups: tuple[str, ...],
    expected: str,
) -> None:
    d = await placed(
        core,
        clock,
        FILTERED,
        request("app-1", user=user, groups=groups, tags={"namespace": "team"}),
    )
    info = await d.core.get_application("default", "app-1")
    assert info["queueName"] == expected


# ============================================================================ 5. child template
TEMPLATE = """
partitions:
  - name: default
    placementrules:
      - name: user
        create: true
        parent:
          name: fixed
          value: users
    queues:
      - name: root
        submitacl: "*"
        queues:
          - name: users
            parent: true
            childtemplate:
              maxapplications: 3
              properties:
                application.sort.policy: fair
              resources:
                guaranteed: {memory: 1G}
                max: {memory: 2G, vcore: 2}
"""


async def test_a_dynamic_leaf_takes_its_parents_child_template(
    core: scheduler.Core, clock: ManualClock
) -> None:
    d = await placed(core, clock, TEMPLATE, request("app-1", user="alice"))
    assert d.rm.accepted_apps == ["app-1"]
    queue = await d.core.get_queue("default", "root.users.alice")
    assert not queue["isManaged"]
    assert queue["maxRunningApps"] == 3
    assert queue["properties"] == {"application.sort.policy": "fair"}
    assert queue["guaranteedResource"] == {"memory": 1_000_000_000}
    assert queue["maxResource"] == {"memory": 2_000_000_000, "vcore": 2000}
