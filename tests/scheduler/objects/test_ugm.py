"""User and group limits through the public API (YuniKorn 1.3+'s user/group manager)."""

from __future__ import annotations

from typing import Any

import pytest

import scheduler
from scheduler import si
from scheduler.testing import ManualClock

from ..conftest import RM, Driver, ask, node
from ..gangs.test_gang import REPLACED, confirm, placeholders, reals, released

pytestmark = pytest.mark.asyncio


@pytest.fixture
def driver(core: scheduler.Core, clock: ManualClock) -> Driver:
    """An RM that registers with the test's own configuration (``start``)."""
    return Driver(core, clock)


def config(limits: str = "", *, partition_limits: str = "") -> str:
    """Queues ``root.a``, ``root.b`` and ``root.parent.{x,y}``; ``limits`` maps a queue name
    (``a``, ``parent``, ``x``, ...) to its ``limits`` entries, one flow-style entry a line:
    ``"a: {users: [alice], maxapplications: 1}"``."""
    per_queue: dict[str, list[str]] = {}
    for line in filter(None, limits.splitlines()):
        name, entry = line.strip().split(": ", 1)
        per_queue.setdefault(name, []).append(entry)

    def block(name: str, indent: int) -> str:
        entries = per_queue.get(name, [])
        if not entries:
            return ""
        pad = " " * indent
        return f"{pad}limits:\n" + "".join(f"{pad}  - {e}\n" for e in entries)

    text = "partitions:\n  - name: default\n"
    if partition_limits:
        text += "    limits:\n" + "".join(
            f"      - {e.strip()}\n" for e in partition_limits.splitlines() if e.strip()
        )
    text += "    queues:\n      - name: root\n        submitacl: '*'\n" + block("root", 8)
    text += "        queues:\n"
    for leaf in ("a", "b"):
        text += f"          - name: {leaf}\n" + block(leaf, 12)
    text += "          - name: parent\n" + block("parent", 12) + "            queues:\n"
    for leaf in ("x", "y"):
        text += f"              - name: {leaf}\n" + block(leaf, 16)
    return text


def user_app(
    app_id: str, queue: str = "root.a", user: str = "alice", groups: tuple[str, ...] = ()
) -> si.AddApplicationRequest:
    return si.AddApplicationRequest(
        application_id=app_id,
        queue_name=queue,
        partition_name="default",
        ugi=si.UserGroupInformation(user=user, groups=list(groups)),
    )


async def start(driver: Driver, text: str) -> None:
    await driver.register(text)
    await driver.nodes(node("n1", memory=1000, vcore=100))
    await driver.settle()


async def reload(driver: Driver, text: str) -> None:
    await driver.core.update_configuration(si.UpdateConfigurationRequest(rm_id=RM, config=text))
    await driver.settle()


async def state(driver: Driver, app_id: str) -> str:
    info = await driver.core.get_application("default", app_id)
    return str(info["applicationState"])


def allocated(driver: Driver) -> dict[str, int]:
    out: dict[str, int] = {}
    for alloc in driver.allocs():
        out[alloc.application_id] = out.get(alloc.application_id, 0) + 1
    return out


# ========================================================================= maxapplications
async def test_user_maxapplications_keeps_a_second_app_accepted(driver: Driver) -> None:
    await start(driver, config("a: {users: [alice], maxapplications: 1}"))
    await driver.apps(user_app("a1"), user_app("a2"), user_app("b1", user="bob"))
    await driver.asks(ask("k1", "a1"), ask("k2", "a2"), ask("k3", "b1"))
    await driver.settle()
    assert allocated(driver) == {"a1": 1, "b1": 1}
    assert await state(driver, "a2") == "Accepted"
    # a1 holds nothing any more: alice runs no application, a2 starts
    await driver.release(*driver.allocs("a1"))
    await driver.settle()
    assert allocated(driver) == {"a1": 1, "a2": 1, "b1": 1}
    assert await state(driver, "a2") == "Starting"


async def test_a_running_app_of_a_user_at_its_limit_still_gets_more(driver: Driver) -> None:
    await start(driver, config("a: {users: [alice], maxapplications: 1}"))
    await driver.apps(user_app("a1"), user_app("a2"))
    await driver.asks(ask("k1", "a1"), ask("k2", "a2"))
    await driver.settle()
    await driver.asks(ask("k1b", "a1", count=2))
    await driver.settle()
    assert allocated(driver) == {"a1": 3}


async def test_wildcard_user_limit_applies_to_users_without_their_own(driver: Driver) -> None:
    await start(
        driver,
        config("x: {users: [vip], maxapplications: 3}\nx: {users: ['*'], maxapplications: 1}"),
    )
    users = {"vip": 3, "alice": 2, "bob": 2}
    for user, count in users.items():
        await driver.apps(*(user_app(f"{user}{i}", "root.parent.x", user) for i in range(count)))
        await driver.asks(*(ask(f"k-{user}{i}", f"{user}{i}") for i in range(count)))
    await driver.settle()
    # the wildcard counts each user on its own: one application each; vip has its own limit
    assert allocated(driver) == {"vip0": 1, "vip1": 1, "vip2": 1, "alice0": 1, "bob0": 1}
    # the wildcard limit is the queue's, not its children's or parents': root.a is free
    await driver.apps(user_app("free", "root.a", "alice"))
    await driver.asks(ask("k-free", "free"))
    await driver.settle()
    assert allocated(driver)["free"] == 1


async def test_group_maxapplications_on_a_parent_counts_both_leaves(driver: Driver) -> None:
    await start(driver, config("parent: {groups: [dev], maxapplications: 2}"))
    await driver.apps(
        user_app("a1", "root.parent.x", "alice", ("dev",)),
        user_app("b1", "root.parent.y", "bob", ("dev",)),
        user_app("c1", "root.parent.y", "carol", ("dev",)),
        user_app("o1", "root.parent.y", "olga", ("ops",)),
    )
    await driver.asks(ask("k1", "a1"), ask("k2", "b1"), ask("k3", "c1"), ask("k4", "o1"))
    await driver.settle()
    assert set(allocated(driver)) == {"a1", "b1", "o1"}
    assert await state(driver, "c1") == "Accepted"


# ========================================================================== maxresources
async def test_group_maxresources_on_a_parent_caps_two_leaves(driver: Driver) -> None:
    await start(driver, config("parent: {groups: [dev], maxresources: {memory: 100}}"))
    await driver.apps(
        user_app("a1", "root.parent.x", "alice", ("dev",)),
        user_app("b1", "root.parent.y", "bob", ("dev",)),
        user_app("o1", "root.parent.y", "olga", ("ops",)),
    )
    await driver.asks(
        ask("k1", "a1", memory=40, count=2),
        ask("k2", "b1", memory=40),
        ask("k3", "o1", memory=40, count=3),
    )
    await driver.settle()
    counts = allocated(driver)
    assert counts.get("a1", 0) + counts.get("b1", 0) == 2  # 80 of 100; a third is 120
    assert counts["o1"] == 3  # another group is not limited
    # releasing one dev allocation makes room for the last one
    dev = [a for a in driver.allocs() if a.application_id in ("a1", "b1")]
    await driver.release(dev[0])
    await driver.settle()
    counts = allocated(driver)
    assert counts.get("a1", 0) + counts.get("b1", 0) == 3


async def test_user_maxresources_on_a_leaf_limits_only_that_user(driver: Driver) -> None:
    await start(driver, config("a: {users: [alice], maxresources: {memory: 50, vcore: 100}}"))
    await driver.apps(user_app("a1"), user_app("b1", user="bob"))
    await driver.asks(ask("k1", "a1", memory=20, count=5), ask("k2", "b1", memory=20, count=5))
    await driver.settle()
    assert allocated(driver) == {"a1": 2, "b1": 5}
    info = await driver.core.get_application("default", "a1")
    assert info["pendingResource"]["memory"] == 60


async def test_partition_limits_apply_at_the_root(driver: Driver) -> None:
    await start(driver, config(partition_limits="{users: [alice], maxresources: {memory: 50}}"))
    await driver.apps(user_app("a1", "root.a"), user_app("a2", "root.b"))
    await driver.apps(user_app("b1", "root.b", "bob"))
    await driver.asks(
        ask("k1", "a1", memory=30), ask("k2", "a2", memory=30), ask("k3", "b1", memory=30)
    )
    await driver.settle()
    counts = allocated(driver)
    assert counts.get("a1", 0) + counts.get("a2", 0) == 1  # 60 > 50 across both leaves
    assert counts["b1"] == 1


async def test_wildcard_group_adds_up_every_unnamed_group(driver: Driver) -> None:
    await start(
        driver,
        config("a: {groups: [dev], maxapplications: 2}\na: {groups: ['*'], maxapplications: 1}"),
    )
    await driver.apps(
        user_app("q1", user="quinn", groups=("qa",)),
        user_app("o1", user="olga", groups=("ops",)),
        user_app("d1", user="dora", groups=("dev",)),
        user_app("d2", user="dan", groups=("dev", "qa")),
    )
    await driver.asks(*(ask(f"k-{a}", a) for a in ("q1", "o1", "d1", "d2")))
    await driver.settle()
    # qa and ops share the wildcard's one application; dev has its own two (dan: dev first)
    assert allocated(driver) == {"q1": 1, "d1": 1, "d2": 1}
    groups = {g["groupName"]: g["applications"] for g in await group_usage(driver)}
    assert groups == {"*": ["q1"], "dev": ["d1", "d2"]}


async def test_group_is_chosen_from_the_leaf_up_in_configured_order(driver: Driver) -> None:
    await start(
        driver,
        config(
            "parent: {groups: [ops], maxapplications: 5}\n"
            "x: {groups: [qa], maxapplications: 5}\n"
            "x: {groups: [dev], maxapplications: 5}"
        ),
    )
    await driver.apps(
        user_app("a1", "root.parent.x", "alice", ("ops", "dev", "qa")),
        user_app("b1", "root.parent.y", "bob", ("ops", "dev", "qa")),
    )
    await driver.asks(ask("k1", "a1"), ask("k2", "b1"))
    await driver.settle()
    users = {u["userName"]: u["groups"] for u in await user_usage(driver)}
    assert users == {"alice": {"a1": "qa"}, "bob": {"b1": "ops"}}


async def test_recovered_allocations_count_against_the_limits(driver: Driver) -> None:
    await driver.register(config("a: {users: [alice], maxapplications: 1}"))
    await driver.apps(user_app("a1"), user_app("a2"))
    await driver.settle()
    existing = si.Allocation(
        allocation_key="k0",
        uuid="old-1",
        application_id="a1",
        node_id="n1",
        partition_name="default",
        resource_per_alloc=si.Resource.of(memory=30, vcore=3),
    )
    await driver.nodes(node("n1", memory=1000, vcore=100, existing_allocations=[existing]))
    await driver.asks(ask("k2", "a2"))
    await driver.settle()
    assert driver.allocs() == []
    [alice] = await user_usage(driver)
    assert alice["queues"]["resourceUsage"] == {"memory": 30, "vcore": 3}


async def test_placeholders_and_their_replacements_are_charged(driver: Driver) -> None:
    await start(driver, config("a: {users: [alice], maxresources: {memory: 40}}"))
    gang = user_app("g")
    gang.placeholder_ask = si.Resource.of(memory=30, vcore=3)
    await driver.apps(gang)
    await driver.asks(*placeholders("g"))
    await driver.settle()
    assert len(driver.allocs("g")) == 3  # 30 of 40
    # smaller real asks take the placeholders' places: 3 x 5 charged instead of 3 x 10
    await driver.asks(*reals("g", memory=5))
    await driver.settle()
    await confirm(driver, released(driver, REPLACED))
    await driver.settle()
    leaf = _node(await user_usage(driver), "alice", "root.a")
    assert leaf["resourceUsage"] == {"memory": 15, "vcore": 3}
    await driver.asks(ask("big", "g", memory=25), ask("more", "g", memory=10))
    await driver.settle()
    assert [a.allocation_key for a in driver.allocs("g") if not a.placeholder][-1] == "big"
    assert "more" not in {a.allocation_key for a in driver.allocs("g")}


# ================================================================================ reload
async def test_tightening_reload_stops_new_allocations_and_keeps_running_ones(
    driver: Driver,
) -> None:
    await start(driver, config("a: {users: [alice], maxresources: {memory: 100}}"))
    await driver.apps(user_app("a1"))
    await driver.asks(ask("k1", "a1", memory=30, count=3))
    await driver.settle()
    assert allocated(driver) == {"a1": 3}
    await reload(driver, config("a: {users: [alice], maxresources: {memory: 50}}"))
    await driver.asks(ask("k2", "a1", memory=30))
    await driver.settle()
    assert allocated(driver) == {"a1": 3}  # no new allocation ...
    assert driver.rm.released == []  # ... and none taken back
    leaf = _node(await user_usage(driver), "alice", "root.a")
    assert leaf["resourceUsage"] == {"memory": 90, "vcore": 3}
    assert leaf["maxResources"] == {"memory": 50}
    # usage has to come down under the new limit before k2 fits: 30 + 30 > 50, 0 + 30 fits
    first, second, third = driver.allocs("a1")
    await driver.release(first, second)
    await driver.settle()
    assert allocated(driver) == {"a1": 3}
    await driver.release(third)
    await driver.settle()
    assert allocated(driver) == {"a1": 4}
    assert [a.allocation_key for a in driver.allocs("a1")][-1] == "k2"


async def test_loosening_reload_wakes_the_waiting_application(driver: Driver) -> None:
    await start(driver, config("a: {users: [alice], maxapplications: 1}"))
    await driver.apps(user_app("a1"), user_app("a2"))
    await driver.asks(ask("k1", "a1"), ask("k2", "a2"))
    await driver.settle()
    assert allocated(driver) == {"a1": 1}
    await reload(driver, config("a: {users: [alice], maxapplications: 2}"))
    assert allocated(driver) == {"a1": 1, "a2": 1}


async def test_reload_that_removes_every_limit_frees_everyone(driver: Driver) -> None:
    await start(driver, config("a: {users: [alice], maxapplications: 1}"))
    await driver.apps(user_app("a1"), user_app("a2"))
    await driver.asks(ask("k1", "a1"), ask("k2", "a2"))
    await driver.settle()
    await reload(driver, config())
    assert allocated(driver) == {"a1": 1, "a2": 1}
    assert await group_usage(driver) == []
    # and limits set again count what already runs
    await reload(driver, config("a: {users: [alice], maxapplications: 2}"))
    await driver.apps(user_app("a3"))
    await driver.asks(ask("k3", "a3"))
    await driver.settle()
    assert allocated(driver) == {"a1": 1, "a2": 1}
    assert _node(await user_usage(driver), "alice", "root.a")["runningApplications"] == [
        "a1",
        "a2",
    ]


# ================================================================================ usage
async def user_usage(driver: Driver) -> list[dict[str, Any]]:
    return await driver.core.get_user_usage("default")


async def group_usage(driver: Driver) -> list[dict[str, Any]]:
    return await driver.core.get_group_usage("default")


def _node(entries: list[dict[str, Any]], name: str, path: str) -> dict[str, Any]:
    [entry] = [e for e in entries if e.get("userName", e.get("groupName")) == name]
    tree: dict[str, Any] = entry["queues"]
    while tree["queuePath"] != path:
        [tree] = [c for c in tree["children"] if path.startswith(c["queuePath"])]
    return tree


def usage_node(
    path: str,
    resources: dict[str, int] | None = None,
    apps: list[str] | None = None,
    children: list[dict[str, Any]] | None = None,
    max_resources: dict[str, int] | None = None,
    max_apps: int = 0,
) -> dict[str, Any]:
    return {
        "queuePath": path,
        "resourceUsage": resources or {},
        "runningApplications": apps or [],
        "maxResources": max_resources or {},
        "maxApplications": max_apps,
        "children": children or [],
    }


async def test_usage_queries_after_allocations_and_releases(driver: Driver) -> None:
    await start(
        driver,
        config(
            "parent: {groups: [dev], maxresources: {memory: 100}}\n"
            "x: {users: [alice], maxapplications: 2}"
        ),
    )
    await driver.apps(
        user_app("a1", "root.parent.x", "alice", ("ops", "dev")),
        user_app("b1", "root.b", "bob", ("ops",)),
    )
    await driver.asks(ask("k1", "a1", memory=10, count=2), ask("k2", "b1", memory=20))
    await driver.settle()
    ten = {"memory": 20, "vcore": 2}
    alice_x = usage_node("root.parent.x", ten, ["a1"], max_apps=2)
    assert await user_usage(driver) == [
        {
            "userName": "alice",
            "groups": {"a1": "dev"},
            "queues": usage_node(
                "root", ten, ["a1"], [usage_node("root.parent", ten, ["a1"], [alice_x])]
            ),
        },
        {
            "userName": "bob",
            "groups": {},  # ops has no limit anywhere: bob is charged to no group
            "queues": usage_node(
                "root",
                {"memory": 20, "vcore": 1},
                ["b1"],
                [usage_node("root.b", {"memory": 20, "vcore": 1}, ["b1"])],
            ),
        },
    ]
    dev_parent = usage_node(
        "root.parent",
        ten,
        ["a1"],
        [usage_node("root.parent.x", ten, ["a1"])],
        max_resources={"memory": 100},
    )
    assert await group_usage(driver) == [
        {
            "groupName": "dev",
            "applications": ["a1"],
            "queues": usage_node("root", ten, ["a1"], [dev_parent]),
        }
    ]
    # everything released: users and groups without a limit of their own disappear, those
    # with one stay with their limits and nothing used (YuniKorn keeps their trackers)
    await driver.release(*driver.allocs())
    await driver.settle()
    assert await user_usage(driver) == [
        {
            "userName": "alice",
            "groups": {},
            "queues": usage_node(
                "root",
                children=[
                    usage_node("root.parent", children=[usage_node("root.parent.x", max_apps=2)])
                ],
            ),
        }
    ]
    assert await group_usage(driver) == [
        {
            "groupName": "dev",
            "applications": [],
            "queues": usage_node(
                "root", children=[usage_node("root.parent", max_resources={"memory": 100})]
            ),
        }
    ]


async def test_usage_without_limits_shows_users_and_no_groups(driver: Driver) -> None:
    await start(driver, config())
    await driver.apps(user_app("a1", groups=("dev",)), user_app("n1", "root.b", user=""))
    await driver.asks(ask("k1", "a1"), ask("k2", "n1"))
    await driver.settle()
    users = await user_usage(driver)
    assert [(u["userName"], u["groups"]) for u in users] == [("alice", {}), ("nobody", {})]
    assert users[0]["queues"]["children"][0]["queuePath"] == "root.a"
    assert await group_usage(driver) == []
    dump = await driver.core.state_dump()
    assert dump["partitions"][0]["userUsage"] == users
    assert dump["partitions"][0]["groupUsage"] == []


async def test_usage_of_an_unknown_partition_raises(driver: Driver) -> None:
    with pytest.raises(scheduler.NotFoundError):
        await driver.core.get_user_usage("nope")
    with pytest.raises(scheduler.NotFoundError):
        await driver.core.get_group_usage("nope")


async def test_asks_held_by_a_user_limit_are_skipped_for_the_autoscaler(
    driver: Driver,
) -> None:
    """An autoscaler must leave alone what a user's limits hold, as it does a queue's
    quota: those asks are ``SKIPPED``; an ask within them that no node holds is ``FAILED``."""
    await start(
        driver,
        config(
            "a: {users: [alice], maxresources: {memory: 300}}\n"
            "b: {users: [bob], maxapplications: 1}"
        ),
    )
    await driver.apps(user_app("alice-1", "root.a"), user_app("bob-1", "root.b", user="bob"))
    await driver.settle()
    await driver.asks(
        ask("fits", "alice-1", memory=200),
        ask("over-user", "alice-1", memory=200),
        ask("b1", "bob-1", memory=10),
        ask("huge", "bob-1", memory=5000),
    )
    await driver.settle()
    await driver.apps(user_app("bob-2", "root.b", user="bob"))
    await driver.settle()
    await driver.asks(ask("b2", "bob-2", memory=10))
    await driver.settle()
    await driver.clock.advance(1)
    await driver.settle()
    got = {(r.application_id, r.allocation_key): r.state for r in driver.rm.scheduling_states}
    assert got == {
        ("alice-1", "over-user"): si.SchedulingState.SKIPPED,
        ("bob-1", "huge"): si.SchedulingState.FAILED,
        ("bob-2", "b2"): si.SchedulingState.SKIPPED,
    }
    reasons = {r.allocation_key: r.reason for r in driver.rm.scheduling_states}
    assert "user alice in queue root.a" in reasons["over-user"]
    assert "user bob in queue root.b" in reasons["b2"]
