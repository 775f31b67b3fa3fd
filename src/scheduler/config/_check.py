"""``scheduler check-config``: every problem of a ``queues.yaml`` the parser can find, with
its line and column.

The parser (``scheduler.config._parser``) collects problems here instead of stopping at the
first: each partition is parsed on its own, and within it each field of a queue, placement
rule, child template or the partition is checked on its own (every unknown key, every bad
quantity), and the queues below a broken one too. A queue entry with a problem of its own
is then left out of the checks across queues (quota sums, limits), which would judge it by
values it does not have. Those checks report every queue that breaks them, not the first
(a sum over a child with a problem is not checked); such a problem names a queue but no
line, and is placed at that queue's entry. Problems are listed in file order. The
final word is always :func:`scheduler.config._parser.parse_config`'s: a file is valid only
when the core would take it. A YAML syntax error stops the check: it is the one problem, in
plain words (``scheduler.config._syntax``). A queue property value the core takes but cannot
read (it logs it and uses the default, as YuniKorn does: ``scheduler.config._properties``) is
a problem here too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from scheduler._errors import ConfigError
from scheduler.config._parser import (
    _SCHEDULER_KEYS,
    ROOT_QUEUE,
    PartitionConfig,
    _Parser,
    parse_config,
    queue_paths,
)
from scheduler.config._reader import mapping, peek_name, seq
from scheduler.config._syntax import compose, explain

__all__ = ["CheckResult", "Problem", "check_config"]

_AT: Final = re.compile(r"^(?P<message>.*) \(line (?P<line>\d+), column (?P<column>\d+)\)$", re.S)
_QUEUE: Final = re.compile(r"queue '(?P<path>[^']+)'")


@dataclass(frozen=True)
class Problem:
    """One problem; ``line`` and ``column`` count from 1, 0 when the parser gave none."""

    message: str
    line: int = 0
    column: int = 0


@dataclass
class CheckResult:
    problems: list[Problem] = field(default_factory=list)
    partitions: list[PartitionConfig] = field(default_factory=list)
    default: bool = False  # empty text: the core's built-in default configuration
    readable: bool = True  # false: a YAML syntax error stopped the check at its place

    def queues(self) -> int:
        return sum(len(queue_paths(p)) for p in self.partitions)


def check_config(text: str) -> CheckResult:
    """Check ``queues.yaml`` text with the core's parser, one partition at a time."""
    result = CheckResult(default=not text.strip())
    try:
        document = compose(text) if text.strip() else None
        partition_nodes = _partition_nodes(document)
    except yaml.YAMLError as exc:
        syntax = explain(exc, text)
        result.problems.append(Problem(f"invalid YAML: {syntax.message}", *syntax[1:]))
        result.readable = False
        return result
    except ConfigError as exc:
        result.problems.append(_problem(exc, None))
        return result
    seen: set[str] = set()
    for index, node in enumerate(partition_nodes):
        found: list[ConfigError] = []
        try:
            partition = _Parser(found).partition(node, index)
        except ConfigError as exc:
            found.append(exc)
        result.problems.extend(_problem(exc, node) for exc in found)
        if found:
            continue
        if partition.name.lower() in seen:
            mark = node.start_mark
            result.problems.append(
                Problem(
                    f"duplicate partition name {partition.name!r} (names are case-insensitive)",
                    mark.line + 1,
                    mark.column + 1,
                )
            )
        seen.add(partition.name.lower())
        result.partitions.append(partition)
    if not result.problems:
        try:
            result.partitions = list(parse_config(text).partitions)
        except ConfigError as exc:  # the whole-file parse is the final word
            result.problems.append(_problem(exc, None))
    # In file order; a problem without a place comes last (sorted() is stable).
    result.problems = sorted(result.problems, key=lambda p: (p.line == 0, p.line, p.column))
    return result


def _partition_nodes(document: Node | None) -> list[Node]:
    if document is None:
        return []  # empty text: YuniKorn's default; parse_config decides below
    top = mapping(document, "", _SCHEDULER_KEYS)
    nodes = seq(top.get("partitions"), "partitions")
    if not nodes:
        raise ConfigError("at least one partition must be defined (key 'partitions')")
    return nodes


def _problem(exc: ConfigError, partition: Node | None) -> Problem:
    text = str(exc)
    at = _AT.match(text)
    if at:
        return Problem(at["message"], int(at["line"]), int(at["column"]))
    queue = _QUEUE.search(text)
    node = _queue_node(partition, queue["path"]) if queue and partition is not None else None
    node = node or partition
    if node is None:
        return Problem(text)
    return Problem(text, node.start_mark.line + 1, node.start_mark.column + 1)


def _queue_node(partition: Node, path: str) -> Node | None:
    """The YAML entry of queue ``root.a.b`` (names compared ignoring case, as the parser does)."""
    names = path.lower().split(".")
    children = _list(partition, "queues")
    current: Node | None = None
    if len(children) == 1 and (peek_name(children[0]) or "").lower() == ROOT_QUEUE:
        current, children = children[0], _list(children[0], "queues")
    for name in names[1:]:
        current = next((c for c in children if (peek_name(c) or "").lower() == name), None)
        if current is None:
            return None
        children = _list(current, "queues")
    return current


def _list(node: Node, key: str) -> list[Node]:
    if not isinstance(node, MappingNode):
        return []
    for key_node, value_node in node.value:
        if isinstance(key_node, ScalarNode) and key_node.value == key:
            return list(value_node.value) if isinstance(value_node, SequenceNode) else []
    return []
