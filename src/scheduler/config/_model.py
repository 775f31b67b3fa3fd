"""The configuration's model: the frozen structs :func:`scheduler.config._parser.parse_config`
builds, and the names and patterns YuniKorn v1.2 gives its configuration.

``scheduler.config._parser`` re-exports all of it; import from there.
"""

from __future__ import annotations

import re
from typing import Final, Literal

import msgspec

from scheduler.config._properties import (
    APPLICATION_SORT_POLICY,
    SortPolicyName,
    application_sort_policy,
    read_or_default,
)

ROOT_QUEUE: Final = "root"
DEFAULT_PARTITION: Final = "default"

#: Placement rules known to YuniKorn v1.2 (``pkg/scheduler/placement/rule.go``).
PLACEMENT_RULE_NAMES: Final = ("provided", "user", "fixed", "tag")

#: YuniKorn core's built-in configuration, used when no configuration text is given:
#: ``configs.DefaultSchedulerConfig`` (pkg/common/configs/config.go, the same text in v1.2.0
#: and v1.8.0). It places an application by its ``namespace`` tag only, which a Kubernetes
#: shim always sets: an application without that tag is rejected, whatever queue it names.
DEFAULT_SCHEDULER_CONFIG: Final = """
partitions:
  - name: default
    placementrules:
      - name: tag
        value: namespace
        create: true
    queues:
      - name: root
        submitacl: '*'
"""

NodeSortType = Literal["fair", "binpacking"]

_DEFAULT_RESOURCE_WEIGHTS: Final = {"vcore": 1.0, "memory": 1.0}

QUEUE_NAME_RE: Final = re.compile(r"[a-zA-Z0-9_-]{1,64}")
USER_NAME_RE: Final = re.compile(r"[_a-zA-Z][a-zA-Z0-9_.@-]*[$]?")
GROUP_NAME_RE: Final = re.compile(r"[_a-zA-Z][a-zA-Z0-9_-]*")
SPECIAL_RE: Final = re.compile(r"[\^$*+?()\[{}|]")


# ============================================================================ the model
class NodeSortPolicy(msgspec.Struct, frozen=True, kw_only=True):
    """``nodesortpolicy`` of a partition."""

    type: NodeSortType = "fair"
    resource_weights: dict[str, float] = {}

    @property
    def weights(self) -> dict[str, float]:
        """The weights in force: the configured ones, or vcore and memory at 1.0 if none."""
        return dict(self.resource_weights or _DEFAULT_RESOURCE_WEIGHTS)


class Filter(msgspec.Struct, frozen=True, kw_only=True):
    """A placement rule's user/group filter; ``type`` is ``allow`` (also when empty) or ``deny``.

    A list of exactly one entry that is not a plain user/group name is a regular expression.
    """

    type: Literal["allow", "deny"] = "allow"
    users: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()


class PlacementRule(msgspec.Struct, frozen=True, kw_only=True):
    """One placement rule; ``name`` is lowercased, ``value`` too for ``fixed`` and ``tag``."""

    name: str
    create: bool = False
    value: str = ""
    parent: PlacementRule | None = None
    filter: Filter = msgspec.field(default_factory=Filter)


class Limit(msgspec.Struct, frozen=True, kw_only=True):
    """A user/group limit (``limits`` entry) on a partition or queue."""

    limit: str = ""
    users: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    max_resources: dict[str, int] = {}
    max_applications: int = 0


class ChildTemplate(msgspec.Struct, frozen=True, kw_only=True):
    """``childtemplate``: settings for dynamic leaf queues created below a parent."""

    max_applications: int = 0
    properties: dict[str, str] = {}
    max_resources: dict[str, int] = {}
    guaranteed: dict[str, int] = {}


class QueueConfig(msgspec.Struct, frozen=True, kw_only=True):
    """One configured queue; ``name`` is lowercased, ``parent`` is true for queues with
    children (and ``root``). Resource maps are in YuniKorn units (bytes, milli-vcores,
    counts); a resource missing from ``max_resources`` is unlimited. Treat dicts as
    read-only.
    """

    name: str
    parent: bool = False
    max_resources: dict[str, int] = {}
    guaranteed: dict[str, int] = {}
    properties: dict[str, str] = {}
    submit_acl: str = ""
    admin_acl: str = ""
    max_applications: int = 0
    queues: tuple[QueueConfig, ...] = ()
    child_template: ChildTemplate | None = None
    limits: tuple[Limit, ...] = ()

    @property
    def is_leaf(self) -> bool:
        return not self.parent and not self.queues

    @property
    def application_sort_policy(self) -> SortPolicyName:
        """The application sort policy YuniKorn would use for this queue.

        Parent queues always sort fair; a leaf uses its ``application.sort.policy`` if it is
        exactly ``fifo``, ``fair`` or ``stateaware``, otherwise (unset or unknown) ``fifo``.
        """
        if not self.is_leaf:
            return "fair"
        value = self.properties.get(APPLICATION_SORT_POLICY)
        return read_or_default(application_sort_policy, value, "fifo")


class PartitionConfig(msgspec.Struct, frozen=True, kw_only=True):
    """One partition: its ``root`` queue, placement rules and policies.

    ``preemption_enabled`` is ``preemption.enabled``; absent, it is true (YuniKorn 1.3+'s
    ``PartitionContext.updatePreemption``: ``Enabled == nil || *Enabled``).
    """

    name: str
    queue: QueueConfig
    placement_rules: tuple[PlacementRule, ...] = ()
    node_sort_policy: NodeSortPolicy = msgspec.field(default_factory=NodeSortPolicy)
    preemption_enabled: bool = True
    limits: tuple[Limit, ...] = ()
    state_dump_file_path: str = ""


class SchedulerConfig(msgspec.Struct, frozen=True, kw_only=True):
    """A validated configuration and YuniKorn's checksum of its text."""

    partitions: tuple[PartitionConfig, ...]
    checksum: str

    def partition(self, name: str) -> PartitionConfig | None:
        """The partition called ``name`` (case-insensitive), or ``None``."""
        wanted = name.lower()
        for partition in self.partitions:
            if partition.name.lower() == wanted:
                return partition
        return None
