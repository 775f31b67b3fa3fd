"""The ask tags of a permit gang (seed 001) and what they declare: Koordinator's
annotations and the scheduler-plugins PodGroup labels, in YuniKorn's SI convention for
pod annotations and labels, parsed once by the RM proxy (``parse_gang``) into the
``GangSpec`` that travels on the ``Ask``. ``scheduler.gangs._permit`` does the scheduling."""

from __future__ import annotations

import json
from collections.abc import Mapping

import msgspec

from scheduler.config._duration import parse_duration

__all__ = [
    "DEFAULT_WAITING_TIME",
    "TAG_GROUPS",
    "GangSpec",
    "GangTagError",
    "gang_tags",
    "has_gang_tags",
    "parse_gang",
    "spec_conflict",
]

# -- the tags (YuniKorn's SI convention for pod annotations and labels) ------------------
_ANNOTATION = "kubernetes.io/annotation/"
_LABEL = "kubernetes.io/label/"
_KOORD = "gang.scheduling.koordinator.sh/"
_PODGROUP = "pod-group.scheduling.sigs.k8s.io"

TAG_NAME = _ANNOTATION + _KOORD + "name"
TAG_MIN_AVAILABLE = _ANNOTATION + _KOORD + "min-available"
TAG_TOTAL_NUMBER = _ANNOTATION + _KOORD + "total-number"
TAG_MODE = _ANNOTATION + _KOORD + "mode"
TAG_WAITING_TIME = _ANNOTATION + _KOORD + "waiting-time"
TAG_GROUPS = _ANNOTATION + _KOORD + "groups"
TAG_NAMESPACE = "kubernetes.io/meta/namespace"
# The scheduler-plugins PodGroup way: the name as a label, min-available as an annotation
# or a label.
_NAME_TAGS = (TAG_NAME, _LABEL + _PODGROUP, _LABEL + _PODGROUP + "/name")
_MIN_TAGS = (
    TAG_MIN_AVAILABLE,
    _ANNOTATION + _PODGROUP + "/min-available",
    _LABEL + _PODGROUP + "/min-available",
)
_ANY_GANG_TAG = (*_NAME_TAGS, *_MIN_TAGS)

STRICT = "Strict"
NON_STRICT = "NonStrict"
DEFAULT_WAITING_TIME = 600.0
DEFAULT_NAMESPACE = "default"


class GangTagError(ValueError):
    """An ask's gang tags are invalid; the message names the tag and says why."""


class GangSpec(msgspec.Struct, frozen=True, gc=False):
    """What an ask's tags say about its permit gang. Every member of a gang says the same."""

    gang_id: str  # "<namespace>/<name>"
    min_available: int
    total_number: int
    mode: str  # STRICT or NON_STRICT
    waiting_time: float  # seconds
    groups: tuple[str, ...]  # the gang ids of its GangGroup, sorted, itself included

    @property
    def strict(self) -> bool:
        return self.mode == STRICT


def _first(tags: Mapping[str, str], names: tuple[str, ...]) -> tuple[str, str] | None:
    for name in names:
        value = tags.get(name)
        if value is not None:
            return name, value
    return None


def _count(tag: str, value: str) -> int:
    try:
        n = int(value.strip())
    except ValueError:
        raise GangTagError(f"tag {tag}: {value!r} is not an integer") from None
    return n


def parse_gang(tags: Mapping[str, str]) -> GangSpec | None:
    """The permit gang an ask's tags declare, or None when they declare none.

    Raises:
        GangTagError: A gang tag is missing or invalid; the message names the tag.
    """
    named = _first(tags, _NAME_TAGS)
    minimum = _first(tags, _MIN_TAGS)
    if named is None and minimum is None:
        return None
    if named is None or not named[1].strip():
        raise GangTagError(
            f"tag {TAG_NAME} (or label {_LABEL + _PODGROUP}) is required with "
            f"{minimum[0] if minimum else 'a gang name'}"
        )
    if minimum is None:
        raise GangTagError(f"tag {TAG_MIN_AVAILABLE} is required for gang {named[1]!r}")
    name = named[1].strip()
    namespace = tags.get(TAG_NAMESPACE, "").strip() or DEFAULT_NAMESPACE
    gang_id = f"{namespace}/{name}"
    min_available = _count(minimum[0], minimum[1])
    if min_available < 1:
        raise GangTagError(f"tag {minimum[0]}: {minimum[1]!r} must be at least 1")
    total = min_available
    raw_total = tags.get(TAG_TOTAL_NUMBER)
    if raw_total is not None and raw_total.strip():
        total = _count(TAG_TOTAL_NUMBER, raw_total)
        if total < 0:
            raise GangTagError(f"tag {TAG_TOTAL_NUMBER}: {raw_total!r} must not be negative")
        total = max(total, min_available)
    mode = NON_STRICT if tags.get(TAG_MODE, "").strip() == NON_STRICT else STRICT
    waiting = DEFAULT_WAITING_TIME
    raw_wait = tags.get(TAG_WAITING_TIME)
    if raw_wait is not None and raw_wait.strip():
        try:
            waiting = parse_duration(raw_wait.strip())
        except ValueError as exc:
            raise GangTagError(f"tag {TAG_WAITING_TIME}: {exc}") from None
        if waiting <= 0:
            raise GangTagError(f"tag {TAG_WAITING_TIME}: {raw_wait!r} must be positive")
    groups = _groups(tags.get(TAG_GROUPS), gang_id)
    return GangSpec(gang_id, min_available, total, mode, waiting, groups)


def _groups(raw: str | None, gang_id: str) -> tuple[str, ...]:
    if raw is None or not raw.strip() or raw.strip() in ('""', "[]"):
        return (gang_id,)
    try:
        ids = json.loads(raw)
    except ValueError:
        raise GangTagError(
            f'tag {TAG_GROUPS}: {raw!r} is not a JSON list of gang ids (["ns/name", ...])'
        ) from None
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise GangTagError(
            f'tag {TAG_GROUPS}: {raw!r} is not a JSON list of gang ids (["ns/name", ...])'
        )
    for i in ids:
        parts = i.split("/")
        if len(parts) != 2 or not all(p.strip() for p in parts):
            raise GangTagError(f"tag {TAG_GROUPS}: gang id {i!r} is not <namespace>/<name>")
    return tuple(sorted({*ids, gang_id}))


def has_gang_tags(tags: Mapping[str, str]) -> bool:
    """Cheap check before ``parse_gang``: any tag that makes an ask a gang member."""
    for name in _ANY_GANG_TAG:
        if name in tags:
            return True
    return False


def spec_conflict(old: GangSpec, new: GangSpec) -> str:
    """The tag in which ``new`` differs from the gang's ``old`` spec, if any."""
    if old.min_available != new.min_available:
        return f"{TAG_MIN_AVAILABLE} {new.min_available} (the gang's is {old.min_available})"
    if old.total_number != new.total_number:
        return f"{TAG_TOTAL_NUMBER} {new.total_number} (the gang's is {old.total_number})"
    if old.mode != new.mode:
        return f"{TAG_MODE} {new.mode} (the gang's is {old.mode})"
    if old.waiting_time != new.waiting_time:
        return f"{TAG_WAITING_TIME} {new.waiting_time:g}s (the gang's is {old.waiting_time:g}s)"
    if old.groups != new.groups:
        return f"{TAG_GROUPS} {list(new.groups)} (the gang's is {list(old.groups)})"
    return ""


def gang_tags(
    name: str,
    min_available: int,
    *,
    total_number: int | None = None,
    mode: str | None = None,
    waiting_time: str | None = None,
    groups: list[str] | None = None,
    namespace: str | None = None,
) -> dict[str, str]:
    """The ask tags that make an ask a member of a permit gang (Koordinator's annotations,
    in YuniKorn's SI convention): ``AllocationAsk(tags=scheduler.gang_tags("g1", 3,
    mode="NonStrict"), ...)``. Every member of a gang carries the same tags.

    Args:
        name: The gang's name; its id is ``<namespace>/<name>``.
        min_available: Members needed before any of them reaches the RM.
        total_number: Members in all (defaults to ``min_available``).
        mode: ``"Strict"`` (the default) or ``"NonStrict"``.
        waiting_time: A Go duration such as ``"600s"`` (the default) or ``"1h30m"``.
        groups: The gang ids of its GangGroup, ``["default/g1", "default/g2"]``.
        namespace: The namespace tag (``default`` when absent).
    """
    tags = {TAG_NAME: name, TAG_MIN_AVAILABLE: str(min_available)}
    if total_number is not None:
        tags[TAG_TOTAL_NUMBER] = str(total_number)
    if mode is not None:
        tags[TAG_MODE] = mode
    if waiting_time is not None:
        tags[TAG_WAITING_TIME] = waiting_time
    if groups is not None:
        tags[TAG_GROUPS] = json.dumps(groups)
    if namespace is not None:
        tags[TAG_NAMESPACE] = namespace
    return tags
