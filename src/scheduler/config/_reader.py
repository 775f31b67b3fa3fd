"""Reading a YAML node tree strictly, as YuniKorn's ``yaml.UnmarshalStrict`` does.

Helpers for ``scheduler.config._parser``: each reads one node of the expected shape (mapping with
known keys, list, string, bool, unsigned int, number, resource map) or raises a
``ConfigError`` naming the key path and the line. Merge keys are resolved and duplicate keys
rejected.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Final

from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from scheduler._errors import ConfigError
from scheduler.config._quantity import QuantityError, format_resources, parse_resource_conf

__all__ = [
    "UINT64_MAX",
    "fail",
    "fmt",
    "is_null",
    "join",
    "mapping",
    "number",
    "pairs",
    "peek_name",
    "resources",
    "seq",
    "str_list",
    "str_map",
    "text",
    "truth",
    "uint",
]

UINT64_MAX: Final = (1 << 64) - 1

_TAG_NULL: Final = "tag:yaml.org,2002:null"
_TAG_BOOL: Final = "tag:yaml.org,2002:bool"
_TAG_INT: Final = "tag:yaml.org,2002:int"
_TAG_FLOAT: Final = "tag:yaml.org,2002:float"
_TAG_MERGE: Final = "tag:yaml.org,2002:merge"

_CONSTRUCTOR: Final = SafeConstructor()


def fail(path: str, node: Node | None, message: str) -> ConfigError:
    where = f"{path}: " if path else ""
    if node is not None and node.start_mark is not None:
        mark = node.start_mark
        return ConfigError(f"{where}{message} (line {mark.line + 1}, column {mark.column + 1})")
    return ConfigError(f"{where}{message}")


def join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def is_null(node: Node | None) -> bool:
    return node is None or (isinstance(node, ScalarNode) and node.tag == _TAG_NULL)


def pairs(node: MappingNode, path: str) -> dict[str, tuple[Node, Node]]:
    """The key/value nodes of a mapping, merge keys resolved, duplicate keys rejected."""
    explicit: dict[str, tuple[Node, Node]] = {}
    merged: dict[str, tuple[Node, Node]] = {}
    for key_node, value_node in node.value:
        if key_node.tag == _TAG_MERGE:
            sources = value_node.value if isinstance(value_node, SequenceNode) else [value_node]
            for source in sources:
                if not isinstance(source, MappingNode):
                    raise fail(path, source, "a merge key ('<<') must refer to a mapping")
                for key, pair in pairs(source, path).items():
                    merged.setdefault(key, pair)
            continue
        if not isinstance(key_node, ScalarNode) or is_null(key_node):
            raise fail(path, key_node, "mapping keys must be strings")
        key = key_node.value
        if key in explicit:
            raise fail(join(path, key), key_node, f"duplicate key {key!r}")
        explicit[key] = (key_node, value_node)
    for key, pair in merged.items():
        explicit.setdefault(key, pair)
    return explicit


def mapping(
    node: Node | None,
    path: str,
    allowed: frozenset[str],
    problems: list[ConfigError] | None = None,
) -> dict[str, Node]:
    """A struct-like mapping: only ``allowed`` keys; null is an empty mapping. With a
    ``problems`` list, each unknown key is recorded there and left out."""
    if node is None or is_null(node):
        return {}
    if not isinstance(node, MappingNode):
        raise fail(path, node, "expected a mapping")
    out: dict[str, Node] = {}
    for key, (key_node, value_node) in pairs(node, path).items():
        if key not in allowed:
            unknown = fail(
                join(path, key),
                key_node,
                f"unknown key {key!r} (allowed: {', '.join(sorted(allowed))})",
            )
            if problems is None:
                raise unknown
            problems.append(unknown)
            continue
        out[key] = value_node
    return out


def seq(node: Node | None, path: str) -> list[Node]:
    if node is None or is_null(node):
        return []
    if not isinstance(node, SequenceNode):
        raise fail(path, node, "expected a list")
    return list(node.value)


def text(node: Node | None, path: str) -> str:
    if node is None or is_null(node):
        return ""
    if not isinstance(node, ScalarNode):
        raise fail(path, node, "expected a string")
    return str(node.value)


def truth(node: Node | None, path: str) -> bool:
    if node is None or is_null(node):
        return False
    if not isinstance(node, ScalarNode) or node.tag != _TAG_BOOL:
        raise fail(path, node, "expected true or false")
    return bool(_CONSTRUCTOR.construct_yaml_bool(node))


def uint(node: Node | None, path: str) -> int:
    if node is None or is_null(node):
        return 0
    if isinstance(node, ScalarNode) and node.tag == _TAG_INT:
        value = int(_CONSTRUCTOR.construct_yaml_int(node))
        if 0 <= value <= UINT64_MAX:
            return value
    raise fail(path, node, "expected a non-negative integer")


def number(node: Node | None, path: str) -> float:
    if node is None or is_null(node):
        return 0.0
    if isinstance(node, ScalarNode) and node.tag in (_TAG_INT, _TAG_FLOAT):
        # An int in any form YAML 1.1 gives one (0x10, 0b1, 017, 1_000, 1:30) reads as
        # ``uint`` reads it; the float constructor knows only decimal digits.
        try:
            if node.tag == _TAG_INT:
                value = float(_CONSTRUCTOR.construct_yaml_int(node))
            else:
                value = float(_CONSTRUCTOR.construct_yaml_float(node))
        except (ValueError, OverflowError):
            value = math.nan
        if math.isfinite(value):
            return value
    raise fail(path, node, "expected a number")


def str_list(node: Node | None, path: str) -> tuple[str, ...]:
    return tuple(text(item, f"{path}[{i}]") for i, item in enumerate(seq(node, path)))


def str_map(node: Node | None, path: str) -> dict[str, str]:
    if node is None or is_null(node):
        return {}
    if not isinstance(node, MappingNode):
        raise fail(path, node, "expected a mapping")
    return {
        key: text(value_node, join(path, key)) for key, (_, value_node) in pairs(node, path).items()
    }


def resources(
    node: Node | None, path: str, where: str, problems: list[ConfigError] | None = None
) -> dict[str, int]:
    """A resource map; a bad quantity's error names ``where`` (the partition and queue). With
    a ``problems`` list, each bad quantity is recorded there and left out."""
    if node is None or is_null(node):
        return {}
    if not isinstance(node, MappingNode):
        raise fail(path, node, "expected a mapping of resource name to quantity")
    out: dict[str, int] = {}
    for key, (_, value_node) in pairs(node, path).items():
        try:
            out.update(_quantity(key, value_node, join(path, key), where))
        except ConfigError as exc:
            if problems is None:
                raise
            problems.append(exc)
    return out


def _quantity(key: str, node: Node, path: str, where: str) -> dict[str, int]:
    if not isinstance(node, ScalarNode):
        raise fail(path, node, f"resource {key!r}: expected a quantity")
    try:
        return parse_resource_conf({key: str(node.value)})
    except QuantityError as exc:
        raise fail(path, node, f"{where}: {exc}") from None


def peek_name(node: Node) -> str | None:
    """The ``name`` of a mapping node, for readable paths, without validating anything."""
    if isinstance(node, MappingNode):
        for key_node, value_node in node.value:
            if (
                isinstance(key_node, ScalarNode)
                and key_node.value == "name"
                and isinstance(value_node, ScalarNode)
                and not is_null(value_node)
            ):
                return str(value_node.value)
    return None


def fmt(res: Mapping[str, int]) -> str:
    """A resource map in a message: ``{memory: 8Gi, vcore: 4}`` (``format_resources``)."""
    return "{" + format_resources(res) + "}"
