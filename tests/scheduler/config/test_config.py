"""Queue configuration parsing and validation (YuniKorn v1.2 ``queues.yaml`` semantics)."""

from __future__ import annotations

import hashlib
import textwrap

import pytest

from scheduler._errors import SchedulerError
from scheduler.config._parser import (
    DEFAULT_SCHEDULER_CONFIG,
    ConfigError,
    Filter,
    PlacementRule,
    QueueConfig,
    SchedulerConfig,
    config_checksum,
    parse_config,
    queue_paths,
)
from scheduler.config._quantity import (
    QuantityError,
    parse_quantity,
    parse_resource_conf,
    parse_vcore,
)


def _parse(text: str) -> SchedulerConfig:
    return parse_config(textwrap.dedent(text))


def _queues(body: str) -> str:
    """A one-partition config whose ``queues:`` list is ``body`` (indented YAML list)."""
    return "partitions:\n  - name: default\n    queues:\n" + textwrap.indent(
        textwrap.dedent(body), "      "
    )


# ============================================================================ quantities
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0", 0),
        ("7", 7),
        ("+5", 5),
        ("150M", 150_000_000),
        ("10Gi", 10_737_418_240),
        ("1k", 1_000),
        ("3G", 3_000_000_000),
        ("2T", 2 * 10**12),
        ("1P", 10**15),
        ("2E", 2 * 10**18),
        ("1Ki", 1024),
        ("512Mi", 512 * 2**20),
        ("1Ti", 2**40),
        ("1Pi", 2**50),
        ("7Ei", 7 * 2**60),
        (" 10 Gi ", 10_737_418_240),
        ("9223372036854775807", 2**63 - 1),
    ],
)
def test_parse_quantity(text: str, expected: int) -> None:
    assert parse_quantity(text) == expected


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("1.5G", "expected an integer"),
        ("0.5", "expected an integer"),
        ("-1", "negative"),
        ("-10Gi", "negative"),
        ("10K", "unknown suffix 'K'"),
        ("10m", "unknown suffix 'm'"),
        ("10Gb", "unknown suffix 'Gb'"),
        ("1e3", "expected an integer"),
        ("abc", "expected an integer"),
        ("", "expected an integer"),
        ("Gi", "expected an integer"),
        ("8Ei", "overflow"),
        ("9223372036854775808", "overflow"),
    ],
)
def test_parse_quantity_rejects(text: str, reason: str) -> None:
    with pytest.raises(QuantityError, match=reason):
        parse_quantity(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1", 1000),
        ("0", 0),
        ("250m", 250),
        ("1500m", 1500),
        ("2k", 2_000_000),
        ("1Ki", 1_024_000),
        ("9223372036854775807m", 2**63 - 1),
    ],
)
def test_parse_vcore(text: str, expected: int) -> None:
    assert parse_vcore(text) == expected


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("1.5", "expected an integer"),
        ("-1m", "negative"),
        ("10M m", "unknown suffix 'Mm'"),
        ("9223372036854776", "overflow"),
        ("5mi", "unknown suffix 'mi'"),
    ],
)
def test_parse_vcore_rejects(text: str, reason: str) -> None:
    with pytest.raises(QuantityError, match=reason):
        parse_vcore(text)


def test_parse_resource_conf() -> None:
    conf = {"memory": "150M", "vcore": 2, "nvidia.com/gpu": "4", "pods": 0, "ephemeral": "1Gi"}
    assert parse_resource_conf(conf) == {
        "memory": 150_000_000,
        "vcore": 2000,
        "nvidia.com/gpu": 4,
        "pods": 0,
        "ephemeral": 2**30,
    }
    assert parse_resource_conf({"vcore": "250m"}) == {"vcore": 250}


@pytest.mark.parametrize(
    ("conf", "fragments"),
    [
        ({"vcore": True}, ["'vcore'", "True"]),
        ({"memory": 1.5}, ["'memory'", "1.5"]),
        ({"memory": None}, ["'memory'", "None"]),
        ({"memory": -1}, ["'memory'", "'-1'", "negative"]),
        ({"memory": "lots"}, ["'memory'", "'lots'"]),
        ({"memory": "500m"}, ["'memory'", "'500m'", "suffix"]),
        ({"memory": [1]}, ["'memory'", "[1]"]),
    ],
)
def test_parse_resource_conf_rejects(conf: dict[str, object], fragments: list[str]) -> None:
    with pytest.raises(QuantityError) as info:
        parse_resource_conf(conf)
    for fragment in fragments:
        assert fragment in str(info.value)


def test_quantity_and_config_errors_are_scheduler_errors() -> None:
    assert issubclass(QuantityError, SchedulerError)
    assert issubclass(ConfigError, SchedulerError)
    assert issubclass(ConfigError, ValueError)


# ============================================================================ default
@pytest.mark.parametrize("text", ["", "   \n\t\n"])
def test_empty_text_is_yunikorn_default(text: str) -> None:
    """YuniKorn's ``configs.DefaultSchedulerConfig`` (pkg/common/configs/config.go, v1.2.0
    to v1.8.0): one ``tag`` rule on ``namespace``, no ``provided`` rule. It sets no
    ``preemption``, which YuniKorn 1.3+ reads as enabled
    (``PartitionContext.updatePreemption``)."""
    config = parse_config(text)
    assert len(config.partitions) == 1
    partition = config.partitions[0]
    assert partition.name == "default"
    assert partition.queue == QueueConfig(name="root", parent=True, submit_acl="*")
    assert partition.placement_rules == (PlacementRule(name="tag", value="namespace", create=True),)
    assert partition.node_sort_policy.type == "fair"
    assert partition.preemption_enabled
    expected = hashlib.sha256(DEFAULT_SCHEDULER_CONFIG.encode()).hexdigest().upper()
    assert config.checksum == expected
    assert parse_config(DEFAULT_SCHEDULER_CONFIG) == config


@pytest.mark.parametrize(
    ("preemption", "enabled"),
    [
        ("", True),
        ("    preemption: {}\n", True),
        ("    preemption:\n", True),
        ("    preemption: {enabled: }\n", True),
        ("    preemption: {enabled: true}\n", True),
        ("    preemption: {enabled: false}\n", False),
    ],
)
def test_preemption_is_enabled_unless_the_partition_says_false(
    preemption: str, enabled: bool
) -> None:
    """YuniKorn 1.3+ (``PartitionContext.updatePreemption``, partition.go):
    ``preemptionEnabled = conf.Preemption.Enabled == nil || *conf.Preemption.Enabled``."""
    (partition,) = parse_config(_queues("- name: root\n") + preemption).partitions
    assert partition.preemption_enabled is enabled


# ============================================================================ a full config
REALISTIC = """
partitions:
  - name: default
    nodesortpolicy:
      type: binpacking
      resourceweights:
        vcore: 4.0
        memory: 1
    preemption:
      enabled: true
    statedumpfilepath: /tmp/ignored
    limits:
      - limit: everyone
        users: ["*"]
        maxapplications: 10
    placementrules:
      - name: Provided
        create: true
        parent:
          name: user
          create: true
          filter:
            type: deny
            users: [root]
      - name: tag
        value: Namespace
        create: true
        parent:
          name: fixed
          value: root.namespaces
      - name: fixed
        value: root.default
        filter:
          groups: ["^dev-.*$"]
    queues:
      - name: root
        submitacl: '*'
        adminacl: "admin admins"
        properties:
          application.sort.priority: enabled
        queues:
          - name: Production
            submitacl: "alice,bob devs"
            resources:
              guaranteed: {memory: 150M, vcore: 10}
              max: {memory: 10Gi, vcore: "20"}
            properties:
              application.sort.policy: fair
              priority.offset: 100
          - name: namespaces
            parent: true
            maxapplications: 12
            resources:
              max: {memory: 20Gi, vcore: 40}
            childtemplate:
              maxapplications: 5
              properties:
                application.sort.policy: fifo
              resources:
                guaranteed: {vcore: 1}
                max: {vcore: 2, memory: 1Gi}
            queues:
              - name: team-a
                maxapplications: 8
                resources:
                  guaranteed: {vcore: 500m}
                limits:
                  - users: [alice, bob]
                    groups: [devs]
                    maxresources: {memory: 1Gi}
          - name: default
  - name: GPU
    queues:
      - name: a
      - name: b
        parent: true
        resources:
          max: {nvidia.com/gpu: 4}
"""


def test_realistic_config() -> None:
    config = parse_config(REALISTIC)
    assert [p.name for p in config.partitions] == ["default", "GPU"]
    assert config.partition("gpu") is config.partitions[1]
    assert config.partition("missing") is None
    assert config.checksum == hashlib.sha256(REALISTIC.encode()).hexdigest().upper()

    default = config.partitions[0]
    assert default.node_sort_policy.type == "binpacking"
    assert default.node_sort_policy.resource_weights == {"vcore": 4.0, "memory": 1.0}
    assert default.preemption_enabled
    assert config.partitions[1].preemption_enabled  # says nothing: enabled
    assert default.state_dump_file_path == "/tmp/ignored"
    assert [(limit.users, limit.max_applications) for limit in default.limits] == [(("*",), 10)]

    provided, tag, fixed = default.placement_rules
    assert provided == PlacementRule(
        name="provided",
        create=True,
        parent=PlacementRule(name="user", create=True, filter=Filter(type="deny", users=("root",))),
    )
    assert tag == PlacementRule(
        name="tag",
        value="namespace",
        create=True,
        parent=PlacementRule(name="fixed", value="root.namespaces"),
    )
    assert fixed.value == "root.default"
    assert fixed.filter == Filter(type="allow", groups=("^dev-.*$",))

    paths = queue_paths(default)
    assert list(paths) == [
        "root",
        "root.production",
        "root.namespaces",
        "root.namespaces.team-a",
        "root.default",
    ]
    root = paths["root"]
    assert root.parent and not root.is_leaf
    assert root.submit_acl == "*"
    assert root.admin_acl == "admin admins"
    assert root.properties == {"application.sort.priority": "enabled"}

    production = paths["root.production"]
    assert production.name == "production"
    assert production.is_leaf
    assert production.guaranteed == {"memory": 150_000_000, "vcore": 10_000}
    assert production.max_resources == {"memory": 10 * 2**30, "vcore": 20_000}
    assert production.properties == {"application.sort.policy": "fair", "priority.offset": "100"}
    assert production.application_sort_policy == "fair"
    assert production.submit_acl == "alice,bob devs"

    namespaces = paths["root.namespaces"]
    assert namespaces.parent and not namespaces.is_leaf
    assert namespaces.max_applications == 12
    assert namespaces.guaranteed == {}
    assert namespaces.child_template is not None
    assert namespaces.child_template.max_applications == 5
    assert namespaces.child_template.guaranteed == {"vcore": 1000}
    assert namespaces.child_template.max_resources == {"vcore": 2000, "memory": 2**30}
    assert namespaces.child_template.properties == {"application.sort.policy": "fifo"}
    assert namespaces.application_sort_policy == "fair"

    team_a = paths["root.namespaces.team-a"]
    assert team_a.guaranteed == {"vcore": 500}
    assert team_a.max_applications == 8
    (limit,) = team_a.limits
    assert limit.users == ("alice", "bob")
    assert limit.groups == ("devs",)
    assert limit.max_resources == {"memory": 2**30}

    assert paths["root.default"] == QueueConfig(name="default")
    assert paths["root.default"].application_sort_policy == "fifo"

    gpu = config.partitions[1]
    assert gpu.placement_rules == ()
    assert gpu.node_sort_policy.type == "fair"
    assert gpu.node_sort_policy.weights == {"vcore": 1.0, "memory": 1.0}
    gpu_paths = queue_paths(gpu)
    assert list(gpu_paths) == ["root", "root.a", "root.b"]
    assert gpu_paths["root.a"].is_leaf
    assert not gpu_paths["root.b"].is_leaf  # parent: true without children
    assert gpu_paths["root.b"].max_resources == {"nvidia.com/gpu": 4}


# ============================================================================ structure
@pytest.mark.parametrize(
    ("body", "expected_paths"),
    [
        # a single top-level queue that is not root: root is inserted above it
        ("- name: a\n", ["root", "root.a"]),
        # several top-level queues: root inserted
        ("- name: a\n- name: b\n", ["root", "root.a", "root.b"]),
        # several top-level queues, one of them called root: it becomes root.root
        ("- name: root\n- name: b\n", ["root", "root.root", "root.b"]),
        # no top-level queues at all: a bare root
        ("[]\n", ["root"]),
        # a single ROOT (any case) is the root queue itself
        ("- name: ROOT\n  queues:\n    - name: x\n", ["root", "root.x"]),
    ],
)
def test_root_insertion(body: str, expected_paths: list[str]) -> None:
    if body.startswith("["):
        text = "partitions:\n  - name: default\n    queues: []\n"
    else:
        text = _queues(body)
    partition = parse_config(text).partitions[0]
    assert list(queue_paths(partition)) == expected_paths
    assert partition.queue.name == "root"
    assert partition.queue.parent


def test_root_is_forced_to_be_a_parent() -> None:
    root = parse_config(_queues("- name: root\n  parent: false\n")).partitions[0].queue
    assert root.parent and not root.is_leaf


def test_queue_names_are_lowercased_and_parent_is_derived() -> None:
    text = _queues("""
        - name: root
          queues:
            - name: Sales
              queues:
                - name: EMEA_Team-1
    """)
    paths = queue_paths(parse_config(text).partitions[0])
    assert list(paths) == ["root", "root.sales", "root.sales.emea_team-1"]
    assert paths["root.sales"].parent  # has children, no explicit parent: true
    assert paths["root.sales.emea_team-1"].is_leaf


@pytest.mark.parametrize(
    ("name", "expected"),
    [(None, "default"), ("", "default"), ("DEFAULT", "default"), ("Sales", "Sales")],
)
def test_partition_name(name: str | None, expected: str) -> None:
    line = "  -" if name is None else f"  - name: '{name}'\n   "
    text = f"partitions:\n{line} queues: []\n"
    assert parse_config(text).partitions[0].name == expected


@pytest.mark.parametrize(
    ("properties", "leaf", "expected"),
    [
        ({}, True, "fifo"),
        ({"application.sort.policy": "fifo"}, True, "fifo"),
        ({"application.sort.policy": "fair"}, True, "fair"),
        ({"application.sort.policy": "stateaware"}, True, "stateaware"),
        ({"application.sort.policy": "FAIR"}, True, "fifo"),  # exact match only, then fifo
        ({"application.sort.policy": "bogus"}, True, "fifo"),
        ({"application.sort.policy": "fifo"}, False, "fair"),  # parents always sort fair
    ],
)
def test_application_sort_policy(properties: dict[str, str], leaf: bool, expected: str) -> None:
    queue = QueueConfig(name="q", parent=not leaf, properties=properties)
    assert queue.application_sort_policy == expected


def test_unknown_sort_policy_is_accepted_by_the_parser() -> None:
    text = _queues("- name: a\n  properties:\n    application.sort.policy: bogus\n")
    queue = parse_config(text).partitions[0].queue.queues[0]
    assert queue.properties == {"application.sort.policy": "bogus"}
    assert queue.application_sort_policy == "fifo"


def test_yaml_ints_and_strings_are_the_same_quantity() -> None:
    as_int = _queues("- name: a\n  resources:\n    max: {vcore: 2, memory: 1000}\n")
    as_str = _queues("- name: a\n  resources:\n    max: {vcore: '2', memory: '1000'}\n")
    q1 = parse_config(as_int).partitions[0].queue.queues[0]
    q2 = parse_config(as_str).partitions[0].queue.queues[0]
    assert q1.max_resources == q2.max_resources == {"vcore": 2000, "memory": 1000}


def test_merge_keys_and_anchors() -> None:
    text = """
    partitions:
      - name: default
        queues:
          - name: a
            resources: &small
              max: {memory: 1G}
          - name: b
            resources: *small
          - <<: {name: ignored, submitacl: '*'}
            name: c
    """
    paths = queue_paths(_parse(text).partitions[0])
    assert paths["root.b"].max_resources == {"memory": 10**9}
    assert paths["root.c"].submit_acl == "*"


def test_checksum_ignores_an_embedded_checksum() -> None:
    body = _queues("- name: a\n")
    digest = config_checksum(body)
    assert digest == hashlib.sha256(body.encode()).hexdigest().upper()
    # YuniKorn drops "checksum: <64 hex>" from the text, the rest (newlines too) is hashed
    trailing = f"{body}checksum: {digest}"
    assert config_checksum(trailing) == digest
    assert parse_config(trailing).checksum == digest
    leading = f"checksum: {digest}\n{body}"
    assert config_checksum(leading) == hashlib.sha256(f"\n{body}".encode()).hexdigest().upper()


def test_resource_checks_follow_effective_max() -> None:
    # the parent has no max of its own: the grandparent's max applies to the grandchild
    text = _queues("""
        - name: a
          resources:
            max: {memory: 100}
          queues:
            - name: b
              queues:
                - name: c
                  resources:
                    max: {memory: 200}
    """)
    with pytest.raises(ConfigError, match=r"queue 'root\.a\.b\.c'.*of its parent"):
        parse_config(text)


def test_children_without_guaranteed_count_their_own_children() -> None:
    # root.a.b has no guaranteed of its own; its children's sum (60) counts against a (50)
    text = _queues("""
        - name: a
          resources:
            guaranteed: {vcore: 50}
          queues:
            - name: b
              queues:
                - name: c
                  resources: {guaranteed: {vcore: 30}}
                - name: d
                  resources: {guaranteed: {vcore: 30}}
    """)
    with pytest.raises(ConfigError, match=r"queue 'root\.a'.*smaller than the sum"):
        parse_config(text)


def test_guaranteed_types_not_set_on_the_parent_are_not_limited() -> None:
    text = _queues("""
        - name: a
          resources:
            guaranteed: {memory: 100}
          queues:
            - name: b
              resources: {guaranteed: {memory: 60, vcore: 5}}
            - name: c
              resources: {guaranteed: {memory: 40}}
    """)
    assert parse_config(text).partitions[0].queue.queues[0].guaranteed == {"memory": 100}


def test_a_resource_weight_reads_every_form_yaml_gives_an_int() -> None:
    # resourceweights go through the reader's number(): hex, binary, octal, underscores
    # and sexagesimal ints are numbers (the float constructor alone fails on them).
    config = parse_config(
        P
        + "    nodesortpolicy:\n      type: fair\n      resourceweights:\n"
        + "        vcore: 0x10\n        memory: 0b11\n        gpu: 017\n"
        + "        disk: 1_000\n        net: 1:30\n"
    )
    weights = config.partitions[0].node_sort_policy.resource_weights
    assert weights == {"vcore": 16.0, "memory": 3.0, "gpu": 15.0, "disk": 1000.0, "net": 90.0}
    with pytest.raises(ConfigError, match=r"resourceweights.vcore: expected a number"):
        parse_config(P + "    nodesortpolicy: {resourceweights: {vcore: 0x" + "f" * 300 + "}}\n")


def test_placement_rule_names_are_case_insensitive() -> None:
    text = "partitions:\n  - queues: []\n    placementrules:\n      - name: USER\n"
    assert parse_config(text).partitions[0].placement_rules == (PlacementRule(name="user"),)


def _limits_config(partition: str = "", root: str = "", leaf: str = "") -> str:
    """A config with ``limits`` lists (flow-style entries, one a line) on the partition,
    on ``root`` and on its leaf ``root.a.b``."""

    def block(entries: str, indent: int) -> str:
        if not entries:
            return ""
        lines = "".join(f"{' ' * (indent + 2)}- {line}\n" for line in entries.split("\n"))
        return f"{' ' * indent}limits:\n{lines}"

    return (
        "partitions:\n  - name: default\n"
        + block(partition, 4)
        + "    queues:\n      - name: root\n"
        + block(root, 8)
        + "        queues:\n          - name: a\n            queues:\n"
        + "              - name: b\n"
        + block(leaf, 16)
    )


def test_partition_limits_are_the_root_queues() -> None:
    alice = "{users: [alice], maxapplications: 2}"
    config = parse_config(_limits_config(partition=alice)).partitions[0]
    assert config.queue.limits == config.limits
    assert [(lim.users, lim.max_applications) for lim in config.queue.limits] == [(("alice",), 2)]
    # the same limits on both are allowed; different ones are not
    both = parse_config(_limits_config(partition=alice, root=alice)).partitions[0]
    assert both.queue.limits == config.limits
    with pytest.raises(ConfigError, match="partition limits and root queue limits"):
        parse_config(_limits_config(partition=alice, root=alice.replace("2", "3")))


def test_limit_hierarchy_matches_names_through_queues_without_limits() -> None:
    # root.a has no limits: bob's root limit still bounds root.a.b (YuniKorn carries it on)
    root = "{users: [bob, '*'], maxresources: {memory: 100}, maxapplications: 2}"

    def leaf(who: str, memory: int, apps: int) -> str:
        return (
            parse_config(
                _limits_config(
                    root=root,
                    leaf=f"{{{who}, maxresources: {{memory: {memory}}}, maxapplications: {apps}}}",
                )
            )
            .partitions[0]
            .queue.queues[0]
            .queues[0]
            .name
        )

    assert leaf("users: [bob]", 50, 1) == "b"
    with pytest.raises(ConfigError, match=r"queue 'root\.a\.b'.*user 'bob' max resources"):
        leaf("users: [bob]", 200, 1)
    with pytest.raises(ConfigError, match="user 'bob' maxapplications 3"):
        leaf("users: [bob]", 50, 3)
    with pytest.raises(ConfigError, match=r"user '\*' maxapplications 3"):
        leaf("users: ['*']", 50, 3)
    # another user, or a group of the same name, is not matched
    assert leaf("users: [eve]", 200, 3) == "b"
    assert leaf("groups: [bob]", 200, 3) == "b"


# ============================================================================ rejections
P = "partitions:\n  - name: default\n    queues: []\n"
RULE = "partitions:\n  - name: default\n    queues: []\n    placementrules:\n"


@pytest.mark.parametrize(
    ("text", "fragments"),
    [
        # ---------------------------------------------------------------- partitions
        ("partitions: []\n", ["at least one partition"]),
        ("# only a comment\n", ["at least one partition"]),
        ("checksum: abc\n", ["at least one partition"]),
        (
            "partitions:\n  - name: Foo\n    queues: []\n  - name: foo\n    queues: []\n",
            ["duplicate partition name", "'foo'"],
        ),
        (
            "partitions:\n  - queues: []\n  - name: Default\n    queues: []\n",
            ["duplicate partition name", "'default'"],
        ),
        ("partitions:\n  - name: x\n", ["partition 'x'", "queue config is not set"]),
        ("partitions:\n  - name: x\n    queues:\n", ["queue config is not set"]),
        ("partitions: default\n", ["partitions:", "expected a list"]),
        # ---------------------------------------------------------------- strict parsing
        ("partition:\n  - name: x\n", ["unknown key 'partition'", "line 1"]),
        (
            P + "    nodesort: {type: fair}\n",
            ["partitions[default].nodesort", "unknown key 'nodesort'", "line 4"],
        ),
        (
            _queues("- name: root\n  queues:\n    - name: a\n      maxapps: 3\n"),
            ["partitions[default].queues[root].queues[a].maxapps", "unknown key 'maxapps'"],
        ),
        (
            _queues("- name: a\n  resources:\n    min: {memory: 1}\n"),
            ["queues[a].resources.min", "unknown key 'min'", "allowed: guaranteed, max"],
        ),
        (
            RULE + "      - name: user\n        filter: {kind: deny}\n",
            ["placementrules[0].filter.kind", "unknown key 'kind'"],
        ),
        (_queues("- name: a\n  name: b\n"), ["duplicate key 'name'"]),
        (_queues("- name: a\n  parent: yes please\n"), ["queues[a].parent", "true or false"]),
        (_queues("- name: a\n  maxapplications: -1\n"), ["non-negative integer"]),
        (_queues("- name: a\n  maxapplications: '5'\n"), ["non-negative integer"]),
        (_queues("- just-a-string\n"), ["queues[0]", "expected a mapping"]),
        (_queues("- name: a\n  properties: [x]\n"), ["properties", "expected a mapping"]),
        (_queues("- name: a\n  submitacl: [x]\n"), ["submitacl", "expected a string"]),
        (P + "    preemption: {enabled: maybe}\n", ["preemption.enabled", "true or false"]),
        ("partitions: [\n", ["invalid YAML"]),
        ("a: 1\n---\nb: 2\n", ["invalid YAML"]),
        # ---------------------------------------------------------------- queues
        (
            _queues("- name: root\n  resources:\n    max: {memory: 10G}\n"),
            ["queue 'root'", "root queue must not have resource limits set"],
        ),
        (
            _queues("- name: root\n  resources:\n    guaranteed: {}\n"),
            ["root queue must not have resource limits set"],
        ),
        (_queues("- name: a.b\n"), ["partition 'default'", "invalid queue name 'a.b'"]),
        (_queues("- name: a b\n"), ["invalid queue name 'a b'"]),
        (_queues("- name: " + "x" * 65 + "\n"), ["invalid queue name", "64 characters"]),
        (_queues("- submitacl: '*'\n"), ["invalid queue name ''"]),
        (
            _queues("- name: root\n  queues:\n    - name: Team\n    - name: team\n"),
            ["duplicate queue name 'team'", "under queue 'root'", "'Team' is already defined"],
        ),
        (
            _queues("- name: a\n  submitacl: 'alice bob devs'\n"),
            ["queue 'root.a'", "invalid submitacl", "multiple spaces"],
        ),
        (
            _queues("- name: a\n  adminacl: 'a b c d'\n"),
            ["queue 'root.a'", "invalid adminacl"],
        ),
        # ---------------------------------------------------------------- resources
        (
            _queues("- name: a\n  resources:\n    max: {memory: -1}\n"),
            ["queues[a].resources.max.memory", "'memory'", "'-1'", "negative"],
        ),
        (
            _queues("- name: a\n  resources:\n    guaranteed: {memory: lots}\n"),
            ["resources.guaranteed.memory", "invalid quantity 'lots'"],
        ),
        (
            _queues("- name: a\n  resources:\n    max: {vcore: 0.5}\n"),
            ["'vcore'", "invalid quantity '0.5'"],
        ),
        (
            _queues("- name: a\n  resources:\n    max: {memory: true}\n"),
            ["'memory'", "invalid quantity 'true'"],
        ),
        (
            _queues("- name: a\n  resources:\n    max: {memory: [1]}\n"),
            ["'memory'", "expected a quantity"],
        ),
        (
            _queues(
                "- name: a\n  resources:\n    guaranteed: {memory: 2k}\n    max: {memory: 1k}\n"
            ),
            [
                "partition 'default', queue 'root.a'",
                "guaranteed resource {memory: 2.0Ki} is larger than maximum resource "
                "{memory: 1000}",
            ],
        ),
        (
            _queues("""\
                - name: a
                  resources: {max: {vcore: 2}}
                  queues:
                    - name: b
                      resources: {max: {vcore: 3, memory: 5}}
            """),
            [
                "queue 'root.a.b'",
                "maximum resource {memory: 5, vcore: 3} is larger than the maximum "
                "resource {vcore: 2} of its parent",
            ],
        ),
        (
            _queues("""\
                - name: a
                  resources: {guaranteed: {memory: 100}}
                  queues:
                    - name: b
                      resources: {guaranteed: {memory: 60}}
                    - name: c
                      resources: {guaranteed: {memory: 50}}
            """),
            [
                "queue 'root.a'",
                "guaranteed resource {memory: 100} is smaller than the sum of the children's "
                "guaranteed resources {memory: 110}",
            ],
        ),
        (
            _queues("""\
                - name: a
                  resources: {max: {memory: 100}}
                  queues:
                    - name: b
                      resources: {guaranteed: {memory: 60}}
                    - name: c
                      resources: {guaranteed: {memory: 50}}
            """),
            [
                "queue 'root.a'",
                "maximum resource {memory: 100} is smaller than the sum of the children's "
                "guaranteed resources {memory: 110}",
            ],
        ),
        # ---------------------------------------------------------------- maxapplications
        (
            _queues(
                "- name: a\n  maxapplications: 5\n  queues:\n    - name: b\n"
                "      maxapplications: 10\n"
            ),
            ["queue 'root.a.b'", "maxapplications 10", "parent 'root.a' maxapplications 5"],
        ),
        (
            _queues("- name: a\n  maxapplications: 5\n  queues:\n    - name: b\n"),
            ["queue 'root.a.b'", "unset (unlimited)", "maxapplications 5"],
        ),
        # ---------------------------------------------------------------- node sorting
        (
            P + "    nodesortpolicy: {type: bogus}\n",
            ["partition 'default'", "undefined node sort policy 'bogus'"],
        ),
        (P + "    nodesortpolicy: {type: Fair}\n", ["undefined node sort policy 'Fair'"]),
        (P + "    nodesortpolicy: fair\n", ["nodesortpolicy", "expected a mapping"]),
        (
            P + "    nodesortpolicy: {type: fair, resourceweights: {vcore: -1}}\n",
            ["negative resource weight -1.0 for 'vcore'"],
        ),
        (
            P + "    nodesortpolicy: {resourceweights: {vcore: heavy}}\n",
            ["resourceweights.vcore", "expected a number"],
        ),
        # ---------------------------------------------------------------- placement rules
        (RULE + "      - name: reject\n", ["unknown placement rule 'reject'"]),
        (RULE + "      - name: primaryGroup\n", ["unknown placement rule 'primaryGroup'"]),
        (RULE + "      - name: my-rule\n", ["invalid placement rule name 'my-rule'"]),
        (RULE + "      - create: true\n", ["invalid placement rule name ''"]),
        (RULE + "      - name: fixed\n", ["placementrules[0]", "'fixed'", "must have a value"]),
        (RULE + "      - name: tag\n", ["'tag' placement rule must have a value"]),
        (
            RULE + "      - name: fixed\n        value: root.a\n        parent: {name: user}\n",
            ["fully qualified queue 'root.a' cannot have a parent rule"],
        ),
        (
            RULE + "      - name: fixed\n        value: root.a b\n",
            ["invalid queue name 'a b'"],
        ),
        (
            RULE + "      - name: user\n        parent: {name: bogus}\n",
            ["placementrules[0].parent.name", "unknown placement rule 'bogus'"],
        ),
        (
            RULE + "      - name: user\n        filter: {type: block}\n",
            ["invalid placement rule filter type 'block'"],
        ),
        (
            RULE + "      - name: user\n        filter: {users: ['[abc']}\n",
            ["filter users '[abc'"],
        ),
        (
            RULE + "      - name: user\n        filter: {groups: ['a b']}\n",
            ["filter groups 'a b'"],
        ),
        (RULE + "      - name: user\n        create: 1\n", ["create", "true or false"]),
        # ---------------------------------------------------------------- limits
        (
            P + "    limits:\n      - limit: nobody\n        maxapplications: 1\n",
            ["partitions[default].limits[0]", "empty user and group lists"],
        ),
        (
            P + "    limits:\n      - limit: nothing\n        users: [bob]\n",
            ["sets neither maxapplications nor a non-zero maxresources"],
        ),
        (
            P + "    limits:\n      - {users: ['*'], maxapplications: 1}\n"
            "      - {users: [bob], maxapplications: 1}\n",
            ["user 'bob' is set after the wildcard user limit"],
        ),
        (
            _queues("- name: a\n  limits:\n    - {users: ['9bob'], maxapplications: 1}\n"),
            ["queue 'root.a'", "invalid limit user name '9bob'"],
        ),
        (
            _queues("- name: a\n  limits:\n    - {groups: [g], maxresources: {memory: x}}\n"),
            ["limits[0].maxresources.memory", "invalid quantity 'x'"],
        ),
        (
            P + "    limits:\n      - {users: [bob, '*', eve], maxapplications: 1}\n",
            ["user 'eve' is set after the wildcard user limit"],
        ),
        (
            P + "    limits:\n      - {users: [bob], maxapplications: 1}\n"
            "      - {users: [bob], maxapplications: 2}\n",
            ["limits[1]", "duplicate limit user name 'bob'"],
        ),
        (
            P + "    limits:\n      - {groups: [dev, dev], maxapplications: 1}\n",
            ["duplicate limit group name 'dev'"],
        ),
        (
            P + "    limits:\n      - {groups: ['*'], maxapplications: 1}\n",
            ["wildcard group limit needs a limit for at least one named group"],
        ),
        (
            P + "    limits:\n      - {users: [bob], maxresources: {memory: 0, vcore: 0}}\n",
            ["every resource in maxresources is zero"],
        ),
        (
            _queues(
                "- name: a\n  maxapplications: 2\n  limits:\n"
                "    - {users: [bob], maxapplications: 3}\n"
            ),
            ["queue 'root.a'", "maxapplications 3 is larger than the queue's maxapplications 2"],
        ),
        (
            _queues(
                "- name: a\n  resources: {max: {memory: 100}}\n  limits:\n"
                "    - {groups: [dev], maxresources: {memory: 200, vcore: 5}}\n"
            ),
            ["maxresources {memory: 200, vcore: 5} are larger than the queue's max"],
        ),
        # ---------------------------------------------------------------- child template
        (
            _queues(
                "- name: a\n  parent: true\n  childtemplate:\n    resources:\n"
                "      max: {memory: 1.5G}\n"
            ),
            ["childtemplate.resources.max.memory", "invalid quantity '1.5G'"],
        ),
        (
            _queues("- name: a\n  childtemplate: {queues: []}\n"),
            ["childtemplate.queues", "unknown key 'queues'"],
        ),
    ],
)
def test_rejected_configs(text: str, fragments: list[str]) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(text)
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, message
