"""The partition and queue configuration (YuniKorn v1.2 ``queues.yaml``).

:func:`parse_config` turns the YAML text into frozen :class:`SchedulerConfig` objects and
validates it the way yunikorn-core does (``pkg/common/configs/config.go`` and
``configvalidator.go``, plus the checks YuniKorn performs when it builds queues and
placement rules from the configuration). Every problem raises :class:`ConfigError` with the
path of the offending YAML key (and its line) or the partition/queue it concerns.

Parsing is strict, like YuniKorn's ``yaml.UnmarshalStrict``: unknown keys, duplicate keys
and values of the wrong type are errors. Map values typed as strings in YuniKorn
(resources, properties, ACLs, rule values) take the scalar's text, so ``vcore: 10`` and
``vcore: "10"`` are the same. YAML merge keys (``<<``) and anchors work.

Behaviour taken from YuniKorn (see the module's tests for each rule):

* empty text loads :data:`DEFAULT_SCHEDULER_CONFIG`, YuniKorn core's built-in default
  (``configs.DefaultSchedulerConfig``: partition ``default``, placement rule ``tag`` on
  ``namespace`` with ``create: true``, queue ``root`` with ``submitacl: '*'``, the same
  text in v1.2.0 and v1.8.0): an application without a ``namespace`` tag matches no rule
  and is rejected; a configuration with a ``provided`` rule lets applications name their
  queue;
* a partition without a name, or named ``default`` in any case, is ``default``; partition
  names are unique case-insensitively;
* ``queues`` is required; when the top level is not exactly one queue called ``root``
  (any case) a ``root`` parent queue is inserted above the configured queues; ``root`` is
  always a parent and may not set ``resources.guaranteed`` or ``resources.max``;
* queue names match ``[a-zA-Z0-9_-]{1,64}`` and are unique among siblings ignoring case;
  YuniKorn lowercases queue names when it creates the queues, and so does this parser;
* a queue with child queues is a parent even without ``parent: true``;
* ACLs have at most two space-separated fields (``"users groups"``);
* resources: guaranteed fits in max (per type set in max); a child's max fits in its
  parent's effective max; the children's guaranteed (a child without guaranteed counts its
  own children's sum) fits in the parent's guaranteed and in the effective max;
* ``maxapplications``: when a parent sets it, each child must set it too, no higher;
* ``nodesortpolicy.type`` is ``fair`` (also when empty) or ``binpacking``, exactly;
  resource weights may not be negative;
* placement rules are ``provided``, ``user``, ``fixed``, ``tag`` (names case-insensitive);
  ``fixed`` and ``tag`` need a ``value``; a fully qualified ``fixed`` value cannot have a
  parent rule; filter types are ``allow``/``deny``/empty;
* ``limits`` (YuniKorn 1.3+'s ``checkLimits``, ``checkLimitResource``,
  ``checkLimitMaxApplications``): each entry names users or groups (``*`` or a valid
  name, each once per list, the wildcard after every named one, a wildcard group only
  beside a named group) and sets ``maxapplications`` or a non-zero ``maxresources``, within
  its queue's ``maxapplications`` and ``max``; a user's or group's limit stays within its
  limit of the same name on every queue above. A partition's ``limits`` are its root
  queue's (YuniKorn 1.5); both may be set only when they are equal;
* queue property values are not validated: a queue logs a value it cannot read and uses
  the default, as YuniKorn does (``application.sort.policy``: ``fifo``, see
  :attr:`QueueConfig.application_sort_policy`; ``application.sort.priority``: ``enabled``;
  ``priority.policy``: ``default``; ``priority.offset``: ``0``; ``preemption.policy``:
  ``default``; ``preemption.delay``: ``30s``). ``scheduler check-config`` reports each of
  them with the core's own readers (``scheduler.config._properties``);
* ``preemption.enabled`` absent (or null) is true, as in YuniKorn 1.3+;
* ``statedumpfilepath`` is accepted and ignored (deprecated since v1.2.0).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterator
from functools import partial
from typing import Final, TypeVar

import msgspec
import yaml
from yaml.nodes import MappingNode, Node

from scheduler._errors import ConfigError
from scheduler.config._limits import (
    check_limit_hierarchy,
    fits_under_max,
    is_zero,
    min_permissive,
    parse_limits,
    partition_limits,
)
from scheduler.config._model import (
    DEFAULT_PARTITION,
    DEFAULT_SCHEDULER_CONFIG,
    GROUP_NAME_RE,
    PLACEMENT_RULE_NAMES,
    QUEUE_NAME_RE,
    ROOT_QUEUE,
    SPECIAL_RE,
    USER_NAME_RE,
    ChildTemplate,
    Filter,
    Limit,
    NodeSortPolicy,
    PartitionConfig,
    PlacementRule,
    QueueConfig,
    SchedulerConfig,
)
from scheduler.config._properties import (
    APPLICATION_SORT_POLICY,
    APPLICATION_SORT_PRIORITY,
    PREEMPTION_DELAY,
    PREEMPTION_POLICY,
    PRIORITY_OFFSET,
    PRIORITY_POLICY,
    PROPERTY_READERS,
)
from scheduler.config._reader import (
    fail as _fail,
)
from scheduler.config._reader import (
    fmt as _fmt,
)
from scheduler.config._reader import (
    is_null as _is_null,
)
from scheduler.config._reader import (
    join as _join,
)
from scheduler.config._reader import (
    mapping as _mapping,
)
from scheduler.config._reader import (
    number as _float,
)
from scheduler.config._reader import (
    pairs as _pairs,
)
from scheduler.config._reader import (
    peek_name as _peek_name,
)
from scheduler.config._reader import (
    resources as _resources,
)
from scheduler.config._reader import (
    seq as _seq,
)
from scheduler.config._reader import (
    str_list as _str_list,
)
from scheduler.config._reader import (
    str_map as _str_map,
)
from scheduler.config._reader import (
    text as _str,
)
from scheduler.config._reader import (
    truth as _bool,
)
from scheduler.config._reader import (
    uint as _uint,
)
from scheduler.config._syntax import compose, explain

_T = TypeVar("_T")

_RULE_NAME_RE: Final = re.compile(r"[_a-zA-Z][a-zA-Z0-9_]*")

__all__ = [
    "APPLICATION_SORT_POLICY",
    "APPLICATION_SORT_PRIORITY",
    "DEFAULT_PARTITION",
    "DEFAULT_SCHEDULER_CONFIG",
    "GROUP_NAME_RE",
    "PLACEMENT_RULE_NAMES",
    "PREEMPTION_DELAY",
    "PREEMPTION_POLICY",
    "PRIORITY_OFFSET",
    "PRIORITY_POLICY",
    "QUEUE_NAME_RE",
    "ROOT_QUEUE",
    "SPECIAL_RE",
    "USER_NAME_RE",
    "ChildTemplate",
    "ConfigError",
    "Filter",
    "Limit",
    "NodeSortPolicy",
    "PartitionConfig",
    "PlacementRule",
    "QueueConfig",
    "SchedulerConfig",
    "config_checksum",
    "parse_config",
    "queue_paths",
]


# ============================================================================ public API
def parse_config(text: str) -> SchedulerConfig:
    """Parse and validate ``queues.yaml`` text.

    Empty (or whitespace-only) text gives YuniKorn's built-in default configuration,
    :data:`DEFAULT_SCHEDULER_CONFIG`, whose checksum is then the checksum of that text.
    Raises :class:`ConfigError` for anything YuniKorn v1.2 would reject.
    """
    source = text if text.strip() else DEFAULT_SCHEDULER_CONFIG
    try:
        document = compose(source)
    except yaml.YAMLError as exc:
        raise ConfigError(str(explain(exc, source))) from None
    if document is None:
        raise ConfigError("at least one partition must be defined (the configuration is empty)")
    top = _mapping(document, "", _SCHEDULER_KEYS)
    _str(top.get("checksum"), "checksum")  # YuniKorn allows the key; the value is recomputed
    partition_nodes = _seq(top.get("partitions"), "partitions")
    if not partition_nodes:
        raise ConfigError("at least one partition must be defined (key 'partitions')")
    partitions: list[PartitionConfig] = []
    seen: set[str] = set()
    for index, node in enumerate(partition_nodes):
        partition = _Parser().partition(node, index)
        if partition.name.lower() in seen:
            raise _fail(
                f"partitions[{index}]",
                node,
                f"duplicate partition name found with name {partition.name!r} "
                "(partition names are case-insensitive)",
            )
        seen.add(partition.name.lower())
        partitions.append(partition)
    return SchedulerConfig(partitions=tuple(partitions), checksum=config_checksum(source))


def config_checksum(text: str) -> str:
    """YuniKorn's configuration checksum: upper-case hex SHA-256 of ``text`` without any
    ``checksum: <value>`` entry it carries (``configs.SetChecksum``)."""
    marker = "checksum: "
    if marker in text:
        entry = (marker + text.split(marker)[1]).rstrip("\n")[: len(marker) + 64]
        text = text.replace(entry, "")
    return hashlib.sha256(text.encode()).hexdigest().upper()


def queue_paths(partition: PartitionConfig) -> dict[str, QueueConfig]:
    """Every configured queue of ``partition`` by full dotted path (``root``, ``root.a.b``),
    parents before their children."""
    out: dict[str, QueueConfig] = {}
    for path, queue in _walk(partition.queue, partition.queue.name):
        out[path] = queue
    return out


def _walk(queue: QueueConfig, path: str) -> Iterator[tuple[str, QueueConfig]]:
    yield path, queue
    for child in queue.queues:
        yield from _walk(child, f"{path}.{child.name}")


# ============================================================================ YAML access
_SCHEDULER_KEYS: Final = frozenset({"partitions", "checksum"})
_PARTITION_KEYS: Final = frozenset(
    {
        "name",
        "queues",
        "placementrules",
        "limits",
        "preemption",
        "nodesortpolicy",
        "statedumpfilepath",
    }
)
_QUEUE_KEYS: Final = frozenset(
    {
        "name",
        "parent",
        "resources",
        "maxapplications",
        "properties",
        "adminacl",
        "submitacl",
        "childtemplate",
        "queues",
        "limits",
    }
)
_RESOURCES_KEYS: Final = frozenset({"guaranteed", "max"})
_TEMPLATE_KEYS: Final = frozenset({"maxapplications", "properties", "resources"})
_RULE_KEYS: Final = frozenset({"name", "create", "filter", "parent", "value"})
_FILTER_KEYS: Final = frozenset({"type", "users", "groups"})
_NODESORT_KEYS: Final = frozenset({"type", "resourceweights"})
_PREEMPTION_KEYS: Final = frozenset({"enabled"})


# ============================================================================ parsing
_ACLS: Final = ("submitacl", "adminacl")


class _BrokenEntry(Exception):
    """A queue entry whose own problems are all recorded: it is left out of the tree."""


class _Parser:
    """Builds one partition; ``self.where`` names the partition in validation messages.

    With a ``problems`` list the parser goes on after a problem (``scheduler check-config``):
    each field of a partition, queue, child template or placement rule is read on its own,
    a problem recorded and a neutral value used, and a queue's children are read even when
    it has problems. A queue entry with a problem of its own is left out of its parent
    (``_BrokenEntry``), so the checks across queues never see the neutral values; a property
    value the core would default is recorded but does not count. Without a list, the first
    problem raises.
    """

    def __init__(self, problems: list[ConfigError] | None = None) -> None:
        self.where = "partition"
        self.problems = problems
        self.values_refused = 0  # of those problems, property values the core would default

    def _found(self) -> int:
        """Problems found so far that make an entry broken: not a property value the core
        takes (and defaults)."""
        return len(self.problems) - self.values_refused if self.problems is not None else 0

    def _report(self, problem: ConfigError) -> None:
        """Raise ``problem``, or (collecting problems) record it and go on."""
        if self.problems is None:
            raise problem
        self.problems.append(problem)

    def _attempt(self, step: Callable[[], _T], fallback: _T) -> _T:
        """``step()``, or (collecting problems) ``fallback`` once its problem is recorded."""
        if self.problems is None:
            return step()
        try:
            return step()
        except ConfigError as exc:
            self.problems.append(exc)
            return fallback

    def partition(self, node: Node, index: int) -> PartitionConfig:
        peeked = _peek_name(node)
        name = peeked if peeked and peeked.lower() != DEFAULT_PARTITION else DEFAULT_PARTITION
        path = f"partitions[{name if peeked is not None else index}]"
        self.where = f"partition {name!r}"
        m = _mapping(node, path, _PARTITION_KEYS, self.problems)
        self._attempt(lambda: _str(m.get("name"), _join(path, "name")), "")
        try:
            whole = self._attempt(partial(self._partition_root, m, path, node), None)
        except _BrokenEntry:
            whole = None
        tree = whole is not None  # checks across queues: only on a tree whose root is whole
        root = whole or QueueConfig(name=ROOT_QUEUE, parent=True)
        if tree:
            self._attempt(lambda: self._check_resources(root, None, root.name), None)
        rules_path = _join(path, "placementrules")
        no_nodes: list[Node] = []
        rule_nodes = self._attempt(lambda: _seq(m.get("placementrules"), rules_path), no_nodes)
        attempts = (
            self._attempt(partial(self._rule, rule_node, f"{rules_path}[{i}]"), None)
            for i, rule_node in enumerate(rule_nodes)
        )
        rules = tuple(rule for rule in attempts if rule is not None)
        limits_path = _join(path, "limits")
        no_limits: tuple[Limit, ...] = ()
        limits = self._attempt(
            partial(parse_limits, m.get("limits"), limits_path, self.where, root), no_limits
        )
        if tree:
            root = self._attempt(
                lambda: partition_limits(
                    root, limits, limits_path, m.get("limits", node), self.where
                ),
                root,
            )
            self._attempt(lambda: check_limit_hierarchy(root, root.name, {}, self.where), None)
        node_sort = self._attempt(
            lambda: self._node_sort(m.get("nodesortpolicy"), _join(path, "nodesortpolicy")),
            NodeSortPolicy(),
        )
        enabled = self._attempt(partial(self._preemption, m, path), True)
        state_dump = self._attempt(
            lambda: _str(m.get("statedumpfilepath"), _join(path, "statedumpfilepath")), ""
        )
        if tree:
            self._attempt(lambda: self._check_max_apps(root, root.name), None)
        return PartitionConfig(
            name=name,
            queue=root,
            placement_rules=rules,
            node_sort_policy=node_sort,
            preemption_enabled=enabled,
            limits=limits,
            state_dump_file_path=state_dump,
        )

    def _partition_root(self, m: dict[str, Node], path: str, node: Node) -> QueueConfig:
        if _is_null(m.get("queues")):
            raise _fail(path, node, f"{self.where}: queue config is not set (key 'queues')")
        return self._root(_seq(m.get("queues"), _join(path, "queues")), _join(path, "queues"))

    def _preemption(self, m: dict[str, Node], path: str) -> bool:
        """``preemption.enabled``: absent (or null) is true (YuniKorn 1.3+)."""
        preemption = _mapping(
            m.get("preemption"), _join(path, "preemption"), _PREEMPTION_KEYS, self.problems
        )
        node = preemption.get("enabled")
        return _is_null(node) or _bool(node, _join(path, "preemption.enabled"))

    # ------------------------------------------------------------------------ queues
    def _root(self, nodes: list[Node], path: str) -> QueueConfig:
        names = [_peek_name(node) for node in nodes]
        if len(nodes) == 1 and (names[0] or "").lower() == ROOT_QUEUE:
            return self._queue(nodes[0], path, 0, parent_path=None)
        # YuniKorn inserts a root parent above zero, several or a non-root top-level queue
        children = self._children(nodes, path, ROOT_QUEUE)
        return QueueConfig(name=ROOT_QUEUE, parent=True, queues=children)

    def _children(self, nodes: list[Node], path: str, parent_path: str) -> tuple[QueueConfig, ...]:
        seen: dict[str, str] = {}
        children: list[QueueConfig] = []
        for index, node in enumerate(nodes):
            original = _peek_name(node) or ""
            lowered = original.lower()
            if lowered in seen:
                self._report(
                    _fail(
                        path,
                        node,
                        f"{self.where}: duplicate queue name {original!r} under queue "
                        f"{parent_path!r} (names are compared ignoring case; "
                        f"{seen[lowered]!r} is already defined)",
                    )
                )
                continue
            seen[lowered] = original
            try:
                child = self._attempt(
                    partial(self._queue, node, path, index, parent_path=parent_path), None
                )
            except _BrokenEntry:
                child = None
            if child is not None:
                children.append(child)
        return tuple(children)

    def _queue(
        self, node: Node, list_path: str, index: int, parent_path: str | None
    ) -> QueueConfig:
        """One queue entry. Collecting problems, each of its own fields is checked and the
        children too; an entry with a problem of its own is then left out (``_BrokenEntry``)."""
        peeked = _peek_name(node)
        path = f"{list_path}[{peeked if peeked is not None else index}]"
        found = self._found()
        m = _mapping(node, path, _QUEUE_KEYS, self.problems)
        raw_name = self._attempt(lambda: _str(m.get("name"), _join(path, "name")), "")
        is_root = parent_path is None
        if not is_root and not QUEUE_NAME_RE.fullmatch(raw_name):
            self._report(
                _fail(
                    _join(path, "name"),
                    m.get("name", node),
                    f"{self.where}: invalid queue name {raw_name!r} under queue "
                    f"{parent_path!r}: a name must only have alphanumeric characters, - or _, "
                    "and be 1 to 64 characters long",
                )
            )
        name = raw_name.lower()
        queue_path = name if parent_path is None else f"{parent_path}.{name}"
        where = f"{self.where}, queue {queue_path!r}"
        guaranteed, max_resources = self._queue_resources(m, path, where, is_root)
        acls = {key: self._attempt(partial(self._acl, m, path, key, where), "") for key in _ACLS}
        in_children = self._found()
        children = self._children(
            self._attempt(lambda: _seq(m.get("queues"), _join(path, "queues")), []),
            _join(path, "queues"),
            queue_path,
        )
        below = self._found() - in_children
        conf = QueueConfig(
            name=name,
            parent=is_root
            or bool(children)
            or self._attempt(lambda: _bool(m.get("parent"), _join(path, "parent")), False),
            max_resources=max_resources,
            guaranteed=guaranteed,
            properties=self._attempt(
                lambda: self._properties(m.get("properties"), _join(path, "properties"), where),
                {},
            ),
            submit_acl=acls["submitacl"],
            admin_acl=acls["adminacl"],
            max_applications=self._attempt(
                lambda: _uint(m.get("maxapplications"), _join(path, "maxapplications")), 0
            ),
            queues=children,
            child_template=self._attempt(
                lambda: self._template(
                    m.get("childtemplate"), _join(path, "childtemplate"), f"{where}, childtemplate"
                ),
                None,
            ),
        )
        no_limits: tuple[Limit, ...] = ()
        limits = self._attempt(
            partial(parse_limits, m.get("limits"), _join(path, "limits"), where, conf), no_limits
        )
        if self._found() - found > below:
            raise _BrokenEntry  # its problems are recorded; its children's too
        return msgspec.structs.replace(conf, limits=limits) if limits else conf

    def _queue_resources(
        self, m: dict[str, Node], path: str, where: str, is_root: bool
    ) -> tuple[dict[str, int], dict[str, int]]:
        """``resources.guaranteed`` and ``resources.max`` of a queue entry."""
        res_path = _join(path, "resources")
        res: dict[str, Node] = self._attempt(
            lambda: _mapping(m.get("resources"), res_path, _RESOURCES_KEYS, self.problems), {}
        )
        if is_root and not (_is_null(res.get("guaranteed")) and _is_null(res.get("max"))):
            self._report(
                _fail(
                    res_path,
                    m["resources"],
                    f"{where}: root queue must not have resource "
                    "limits set (resources.guaranteed / resources.max)",
                )
            )
        return (
            self._resources(res.get("guaranteed"), _join(res_path, "guaranteed"), where),
            self._resources(res.get("max"), _join(res_path, "max"), where),
        )

    def _resources(self, node: Node | None, path: str, where: str) -> dict[str, int]:
        return self._attempt(lambda: _resources(node, path, where, self.problems), {})

    def _acl(self, m: dict[str, Node], path: str, key: str, where: str) -> str:
        acl = _str(m.get(key), _join(path, key))
        if len(acl.split()) > 2:
            raise _fail(
                _join(path, key),
                m.get(key),
                f"{where}: invalid {key} {acl!r}: an ACL is 'users groups', multiple spaces found",
            )
        return acl

    def _template(self, node: Node | None, path: str, where: str) -> ChildTemplate | None:
        m = _mapping(node, path, _TEMPLATE_KEYS, self.problems)
        res_path = _join(path, "resources")
        res: dict[str, Node] = self._attempt(
            lambda: _mapping(m.get("resources"), res_path, _RESOURCES_KEYS, self.problems), {}
        )
        template = ChildTemplate(
            max_applications=self._attempt(
                lambda: _uint(m.get("maxapplications"), _join(path, "maxapplications")), 0
            ),
            properties=self._attempt(
                lambda: self._properties(m.get("properties"), _join(path, "properties"), where),
                {},
            ),
            max_resources=self._resources(res.get("max"), _join(res_path, "max"), where),
            guaranteed=self._resources(res.get("guaranteed"), _join(res_path, "guaranteed"), where),
        )
        if template == ChildTemplate():
            return None  # YuniKorn treats an empty template as no template
        return template

    def _properties(self, node: Node | None, path: str, where: str) -> dict[str, str]:
        """A ``properties`` map; collecting problems, each value ``PROPERTY_READERS`` cannot
        read is one (the core takes it, logs it and uses the default)."""
        properties = _str_map(node, path)
        if self.problems is None or not isinstance(node, MappingNode):
            return properties
        for key, (_, value_node) in _pairs(node, path).items():
            reader = PROPERTY_READERS.get(key)
            if reader is None:
                continue
            try:
                reader.read(properties[key])
            except ValueError as exc:
                self.values_refused += 1
                self.problems.append(
                    _fail(
                        _join(path, key),
                        value_node,
                        f"{where}: {key} {properties[key]!r} is not valid ({exc}); "
                        f"the core logs it and uses {reader.default}",
                    )
                )
        return properties

    # ------------------------------------------------------------------------ resources
    def _check_resources(
        self, queue: QueueConfig, parent_max: dict[str, int] | None, path: str
    ) -> dict[str, int] | None:
        """YuniKorn's ``checkQueueResource``; returns the guaranteed the queue claims, or
        (collecting problems) ``None`` when a problem here or below makes it unknown, so
        that no sum above is checked with it."""
        where = f"{self.where}, queue {path!r}"
        found = self._found()
        guaranteed, max_res = queue.guaranteed, queue.max_resources
        if not fits_under_max(max_res, guaranteed):
            self._report(
                ConfigError(
                    f"{where}: guaranteed resource {_fmt(guaranteed)} is larger than maximum "
                    f"resource {_fmt(max_res)}"
                )
            )
        if parent_max is not None and not fits_under_max(parent_max, max_res):
            self._report(
                ConfigError(
                    f"{where}: maximum resource {_fmt(max_res)} is larger than the maximum "
                    f"resource {_fmt(parent_max)} of its parent"
                )
            )
        effective_max = min_permissive(max_res, parent_max or {})
        children_guaranteed: dict[str, int] = {}
        complete = True
        for child in queue.queues:
            claimed = self._check_resources(child, effective_max, f"{path}.{child.name}")
            complete = complete and claimed is not None
            for key, value in (claimed or {}).items():
                children_guaranteed[key] = children_guaranteed.get(key, 0) + value
        if complete:
            self._check_children_guaranteed(where, guaranteed, effective_max, children_guaranteed)
        if self._found() > found:
            return None
        return children_guaranteed if is_zero(guaranteed) else guaranteed

    def _check_children_guaranteed(
        self,
        where: str,
        guaranteed: dict[str, int],
        effective_max: dict[str, int],
        children_guaranteed: dict[str, int],
    ) -> None:
        if not is_zero(guaranteed) and not fits_under_max(guaranteed, children_guaranteed):
            self._report(
                ConfigError(
                    f"{where}: guaranteed resource {_fmt(guaranteed)} is smaller than the sum "
                    f"of the children's guaranteed resources {_fmt(children_guaranteed)}"
                )
            )
        if not fits_under_max(effective_max, children_guaranteed):
            self._report(
                ConfigError(
                    f"{where}: maximum resource {_fmt(effective_max)} is smaller than the sum "
                    f"of the children's guaranteed resources {_fmt(children_guaranteed)}"
                )
            )

    def _check_max_apps(self, queue: QueueConfig, path: str) -> None:
        """YuniKorn's ``checkQueueMaxApplications``: below a parent that sets
        ``maxapplications`` every child sets it too, no higher than the parent."""
        for child in queue.queues:
            child_path = f"{path}.{child.name}"
            limit = queue.max_applications
            if limit and (child.max_applications == 0 or child.max_applications > limit):
                shown = child.max_applications or "unset (unlimited)"
                self._report(
                    ConfigError(
                        f"{self.where}, queue {child_path!r}: maxapplications {shown} must be "
                        f"set and not larger than the parent {path!r} maxapplications {limit}"
                    )
                )
            self._check_max_apps(child, child_path)

    # ------------------------------------------------------------------------ policies
    def _node_sort(self, node: Node | None, path: str) -> NodeSortPolicy:
        m = _mapping(node, path, _NODESORT_KEYS)
        kind = _str(m.get("type"), _join(path, "type"))
        if kind not in ("", "fair", "binpacking"):
            raise _fail(
                _join(path, "type"),
                m.get("type"),
                f"{self.where}: undefined node sort policy {kind!r} (expected fair or binpacking)",
            )
        weights_path = _join(path, "resourceweights")
        weights_node = m.get("resourceweights")
        weights: dict[str, float] = {}
        if not _is_null(weights_node):
            if not isinstance(weights_node, MappingNode):
                raise _fail(weights_path, weights_node, "expected a mapping")
            for key, (_, value_node) in _pairs(weights_node, weights_path).items():
                weight = _float(value_node, _join(weights_path, key))
                if weight < 0:
                    raise _fail(
                        _join(weights_path, key),
                        value_node,
                        f"{self.where}: negative resource weight {weight} for {key!r} "
                        "is not allowed",
                    )
                weights[key] = weight
        return NodeSortPolicy(
            type="binpacking" if kind == "binpacking" else "fair", resource_weights=weights
        )

    # ------------------------------------------------------------------------ placement
    def _rule(self, node: Node, path: str) -> PlacementRule:
        m = _mapping(node, path, _RULE_KEYS)
        raw_name = _str(m.get("name"), _join(path, "name"))
        if not _RULE_NAME_RE.fullmatch(raw_name):
            raise _fail(
                _join(path, "name"),
                m.get("name", node),
                f"{self.where}: invalid placement rule name {raw_name!r}, a name must "
                "be a valid identifier",
            )
        name = raw_name.lower()
        if name not in PLACEMENT_RULE_NAMES:
            raise _fail(
                _join(path, "name"),
                m.get("name"),
                f"{self.where}: unknown placement rule {raw_name!r} (expected one of "
                f"{', '.join(PLACEMENT_RULE_NAMES)})",
            )
        value = _str(m.get("value"), _join(path, "value"))
        parent = (
            None if _is_null(m.get("parent")) else self._rule(m["parent"], _join(path, "parent"))
        )
        if name in ("fixed", "tag"):
            value = value.lower()
            if not value:
                raise _fail(
                    path, node, f"{self.where}: a {name!r} placement rule must have a value set"
                )
        if name == "fixed":
            parts = value.split(".")
            for part in parts:
                if not QUEUE_NAME_RE.fullmatch(part):
                    raise _fail(
                        _join(path, "value"),
                        m.get("value"),
                        f"{self.where}: 'fixed' placement rule value {value!r} has an "
                        f"invalid queue name {part!r}",
                    )
            if parts[0] == ROOT_QUEUE and parent is not None:
                raise _fail(
                    path,
                    node,
                    f"{self.where}: a 'fixed' placement rule with the fully "
                    f"qualified queue {value!r} cannot have a parent rule",
                )
        return PlacementRule(
            name=name,
            create=_bool(m.get("create"), _join(path, "create")),
            value=value,
            parent=parent,
            filter=self._filter(m.get("filter"), _join(path, "filter")),
        )

    def _filter(self, node: Node | None, path: str) -> Filter:
        m = _mapping(node, path, _FILTER_KEYS)
        kind = _str(m.get("type"), _join(path, "type"))
        if kind.lower() not in ("", "allow", "deny"):
            raise _fail(
                _join(path, "type"),
                m.get("type"),
                f"{self.where}: invalid placement rule filter type {kind!r}, "
                "must be either '', allow or deny",
            )
        users = _str_list(m.get("users"), _join(path, "users"))
        groups = _str_list(m.get("groups"), _join(path, "groups"))
        for key, entries, pattern in (
            ("users", users, USER_NAME_RE),
            ("groups", groups, GROUP_NAME_RE),
        ):
            # a single entry that is not a plain name must be a regular expression
            if len(entries) == 1 and not pattern.fullmatch(entries[0]):
                entry = entries[0]
                try:
                    re.compile(entry)
                    valid = SPECIAL_RE.search(entry) is not None
                except re.error:
                    valid = False
                if not valid:
                    raise _fail(
                        _join(path, key),
                        m.get(key),
                        f"{self.where}: invalid placement rule filter {key} {entry!r}: "
                        "not a name nor a regular expression",
                    )
        return Filter(
            type="deny" if kind.lower() == "deny" else "allow", users=users, groups=groups
        )
