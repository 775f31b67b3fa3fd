"""Conversions between the SI structs (``scheduler.si``) and the protobuf messages of
``si.proto`` (``scheduler.si.si_pb2``), in both directions, for every message.

The converters are generic: one per message pair, written once at import from the
struct's fields and the proto descriptor (the field names are the same snake_case on both
sides; enums go by number; nested messages, repeated fields and maps recurse), then
compiled, so a converter is a flat function of attribute reads and one constructor call,
with no per-field dispatch when it runs. A struct field with no proto field (or the other
way round) fails at import, so the proto and ``si.py`` cannot drift apart silently.

``to_proto(struct)`` and ``from_proto(message)`` pick the converter by type;
``to_proto_of(cls)`` / ``from_proto_of(cls)`` return it for a hot path.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any, Final, TypeVar

import msgspec
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from scheduler import si
from scheduler.si import si_pb2 as pb

__all__ = [
    "MESSAGES",
    "from_proto",
    "from_proto_of",
    "proto_class",
    "to_proto",
    "to_proto_of",
]

_S = TypeVar("_S", bound=msgspec.Struct)

_PACKAGE: Final = "si.v1."


def _si_names() -> list[str]:
    """Every SI message: the structs of ``si`` that the proto has a message for."""
    names = []
    for name in si.__all__:
        value = getattr(si, name)
        if isinstance(value, type) and issubclass(value, msgspec.Struct):
            names.append(name)
    return sorted(names)


MESSAGES: Final[list[str]] = _si_names()
"""The names of the SI messages (the same on both sides)."""


def _resolve(full_name: str) -> Any:
    """The ``si`` (or ``pb``) object for a descriptor's full name, nested types included:
    ``si.v1.NodeInfo.ActionFromRM`` is ``si.NodeInfo.ActionFromRM``."""
    if not full_name.startswith(_PACKAGE):
        raise TypeError(f"{full_name} is not in package si.v1")
    obj: Any = si
    for part in full_name[len(_PACKAGE) :].split("."):
        obj = getattr(obj, part)
    return obj


def _is_map(field: Any) -> bool:
    message = field.message_type
    return message is not None and bool(message.GetOptions().map_entry)


def _is_repeated(field: Any) -> bool:
    # ``is_repeated`` is protobuf 6.31's and later; ``label`` is deprecated there.
    return bool(field.is_repeated)


# ------------------------------------------------------------------------- the writer
class _Writer:
    """Writes the source of the converters, each named after its message."""

    def __init__(self) -> None:
        self.namespace: dict[str, Any] = {}
        self.lines: list[str] = []

    def ref(self, name: str, value: Any) -> str:
        self.namespace[name] = value
        return name

    def to_proto(self, struct: type[msgspec.Struct], descriptor: Descriptor) -> None:
        """``fill_X(m, s)``: sets on the empty message ``m`` what ``s`` holds that is not a
        default (filling in place: no message is built and then copied)."""
        name = descriptor.name
        _check_fields(struct, descriptor)
        body = []
        for field in _struct_fields(struct):
            pf: Any = descriptor.fields_by_name[field]
            body.append(f"v = s.{field}")
            if pf.type == FieldDescriptor.TYPE_MESSAGE:
                if _is_map(pf):
                    value_field = pf.message_type.fields_by_name["value"]
                    if value_field.type == FieldDescriptor.TYPE_MESSAGE:
                        inner = f"fill_{value_field.message_type.name}"
                        body.append("if v:")
                        body.append(f"    f = m.{field}")
                        body.append(f"    for k, x in v.items(): {inner}(f[k], x)")
                    else:
                        body.append(f"if v: m.{field}.update(v)")
                elif _is_repeated(pf):
                    inner = f"fill_{pf.message_type.name}"
                    body.append("if v:")
                    body.append(f"    add = m.{field}.add")
                    body.append(f"    for x in v: {inner}(add(), x)")
                else:
                    inner = f"fill_{pf.message_type.name}"
                    body.append("if v is not None:")
                    body.append(f"    f = m.{field}")
                    body.append("    f.SetInParent()")
                    body.append(f"    {inner}(f, v)")
            elif _is_repeated(pf):
                body.append(f"if v: m.{field}.extend(v)")
            else:
                body.append(f"if v: m.{field} = v")
        code = "".join(f"\n    {line}" for line in body) or "\n    pass"
        self.lines.append(f"def fill_{name}(m, s):{code}\n")
        message = self.ref(f"pb_{name}", getattr(pb, name))
        self.lines.append(
            f"def to_{name}(s):\n    m = {message}()\n    fill_{name}(m, s)\n    return m\n"
        )

    def from_proto(self, struct: type[msgspec.Struct], descriptor: Descriptor) -> None:
        name = descriptor.name
        cls = self.ref(f"si_{name}", struct)
        args = []
        for field in _struct_fields(struct):
            pf: Any = descriptor.fields_by_name[field]
            value = f"m.{field}"
            if pf.type == FieldDescriptor.TYPE_MESSAGE:
                if _is_map(pf):
                    value_field = pf.message_type.fields_by_name["value"]
                    if value_field.type == FieldDescriptor.TYPE_MESSAGE:
                        inner = f"from_{value_field.message_type.name}"
                        value = (
                            f"{{k: {inner}(v) for k, v in m.{field}.items()}} "
                            f"if m.{field} else {{}}"
                        )
                    else:
                        value = f"dict(m.{field}) if m.{field} else {{}}"
                elif _is_repeated(pf):
                    value = f"[from_{pf.message_type.name}(v) for v in m.{field}]"
                else:
                    inner = f"from_{pf.message_type.name}"
                    value = f"{inner}(m.{field}) if m.HasField({field!r}) else None"
            elif pf.type == FieldDescriptor.TYPE_ENUM:
                kind = _resolve(pf.enum_type.full_name)
                if not (isinstance(kind, type) and issubclass(kind, enum.IntEnum)):
                    raise TypeError(f"{pf.full_name}: si has no enum {pf.enum_type.full_name}")
                value = f"{self.ref(f'enum_{id(kind)}', kind)}(m.{field})"
            elif _is_repeated(pf):
                value = f"list(m.{field}) if m.{field} else []"
            args.append(f"{field}={value}")
        self.lines.append(f"def from_{name}(m):\n    return {cls}({', '.join(args)})\n")

    def compile(self) -> dict[str, Any]:
        exec(compile("\n".join(self.lines), "<scheduler.si._grpc_codec>", "exec"), self.namespace)
        return self.namespace


def _struct_fields(struct: type[msgspec.Struct]) -> tuple[str, ...]:
    return struct.__struct_fields__


def _check_fields(struct: type[msgspec.Struct], descriptor: Descriptor) -> None:
    ours = set(_struct_fields(struct))
    theirs = set(descriptor.fields_by_name)
    if ours != theirs:
        raise TypeError(
            f"si.{struct.__name__} and si.proto's {descriptor.name} differ: "
            f"only in si.py {sorted(ours - theirs)}, only in si.proto {sorted(theirs - ours)}"
        )


# ------------------------------------------------------------------ the faster path
# Reading a protobuf map costs about a microsecond an entry (upb builds a key, a wrapper of
# the value message, and reads its field), so ``Resource`` (the map of every ask and
# allocation) is read once per distinct encoding: asks of a batch mostly ask the same.
# Each call still makes a new ``Resource`` (the structs are mutable). Measured on 5,000
# asks of two quantities each, CPU time: 25.5 ms generic, 20 ms with this.
_RESOURCE_CACHE: dict[bytes, tuple[tuple[str, int], ...]] = {}
_RESOURCE_CACHE_SIZE: Final = 4096


def _from_resource(m: Any) -> si.Resource:
    key: bytes = m.SerializeToString()
    pairs = _RESOURCE_CACHE.get(key)
    if pairs is None:
        if len(_RESOURCE_CACHE) >= _RESOURCE_CACHE_SIZE:
            _RESOURCE_CACHE.clear()
        pairs = _RESOURCE_CACHE[key] = tuple((k, v.value) for k, v in m.resources.items())
    quantity = si.Quantity
    return si.Resource(resources={k: quantity(value=v) for k, v in pairs})


def _build() -> tuple[dict[type, Callable[[Any], Any]], dict[type, Callable[[Any], Any]]]:
    writer = _Writer()
    for name in MESSAGES:
        struct = getattr(si, name)
        descriptor = getattr(pb, name).DESCRIPTOR
        writer.to_proto(struct, descriptor)
        writer.from_proto(struct, descriptor)
    namespace = writer.compile()
    # The generated converters call each other by global name: this one replaces the
    # generic from_Resource everywhere.
    namespace["from_Resource"] = _from_resource
    to: dict[type, Callable[[Any], Any]] = {}
    back: dict[type, Callable[[Any], Any]] = {}
    for name in MESSAGES:
        to[getattr(si, name)] = namespace[f"to_{name}"]
        back[getattr(pb, name)] = namespace[f"from_{name}"]
    return to, back


_TO, _FROM = _build()


def proto_class(struct: type[msgspec.Struct]) -> type[Message]:
    """The protobuf class of an SI struct class."""
    cls: type[Message] = getattr(pb, struct.__name__)
    return cls


def to_proto_of(struct: type[msgspec.Struct]) -> Callable[[Any], Any]:
    """The converter of ``struct`` instances to their protobuf message."""
    return _TO[struct]


def from_proto_of(struct: type[_S]) -> Callable[[Any], _S]:
    """The converter of ``struct``'s protobuf message to ``struct``."""
    return _FROM[proto_class(struct)]


def to_proto(struct: msgspec.Struct) -> Any:
    """The protobuf message of an SI struct (a ``scheduler.si.si_pb2`` instance)."""
    convert = _TO.get(type(struct))
    if convert is None:
        raise TypeError(f"{type(struct).__name__} is not an SI message")
    return convert(struct)


def from_proto(message: Message) -> Any:
    """The SI struct of a protobuf message of ``si.proto``."""
    convert = _FROM.get(type(message))
    if convert is None:
        raise TypeError(f"{type(message).__name__} is not an SI message")
    return convert(message)
