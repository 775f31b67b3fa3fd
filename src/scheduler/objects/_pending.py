"""The pending asks of one application, in scheduling order and grouped by shape.

Scheduling order is YuniKorn's: priority (high first), then age (old first); the members of
a permit gang by the age of their gang and then its id (Koordinator's queue sort), so they
stay together (``order``). Within a priority the asks are kept in groups: one per shape (the
asks' resource) for the asks the pass may take as one of many alike, and one for the asks it
walks one by one (``one_by_one``). An ask of a shape that no node or quota can hold tells the
pass that every pending ask of that shape is held too (``scheduler.core._pass``), so it skips
the group as a whole; the leaf queue counts the shapes of its applications' groups
(``Shapes``), so it can skip all of them.

No anyio here: plain classes, testable without an event loop (STYLE 2).
"""

from __future__ import annotations

from bisect import bisect_right
from collections import deque
from collections.abc import Iterable, Iterator
from heapq import merge
from itertools import chain

from scheduler.objects._asks import Ask
from scheduler.objects._priority import MIN_PRIORITY
from scheduler.objects._resources import Size

__all__ = ["Group", "PendingAsks", "Shapes", "one_by_one", "order"]

_CHUNK = 256  # asks per chunk of a group


def order(ask: Ask) -> tuple[float, str, int]:
    """Where an ask goes among the asks of its priority: by age, a permit gang's members
    by the age of their gang and then its id, so they stay together; then by arrival."""
    gang = ask.gang
    if gang is None:
        return (ask.created, "", ask.seq)
    return (ask.gang_time, gang.gang_id, ask.seq)


def one_by_one(ask: Ask) -> bool:
    """Whether the pass looks at ``ask`` on its own, not as one of the asks of its shape: a
    member of a permit gang, a real ask of a task group (it may take a placeholder's place)
    and an ask bound to one node each decide by more than their resource."""
    return (
        ask.gang is not None
        or bool(ask.required_node)
        or (bool(ask.task_group_name) and not ask.placeholder)
    )


class Group:
    """The pending asks of one application that share a priority and a shape, in order,
    as a run of small insertion-ordered dicts (chunks of at most ``_CHUNK`` asks, oldest
    first). ``size`` is the shape, ``None`` for the asks walked one by one.

    A dict keeps the slot of a deleted entry and iterating skips such holes one by one,
    so a single dict drained from the front (as a pass places its asks) makes every walk
    scan all the asks placed so far. Here a walk scans at most the holes of one chunk
    before its first ask: a chunk that empties is dropped, and none holds more than
    ``_CHUNK`` slots. Adding and removing are O(1).
    """

    __slots__ = ("_room", "chunks", "gangs", "gid", "priority", "size", "top_seq", "where")

    def __init__(self, gid: int, priority: int, size: Size | None) -> None:
        self.gid = gid
        self.priority = priority
        self.size = size
        # The highest ``Ask.seq`` it took (of an ask still here or not), and whether it took
        # a permit gang's member: without one, an ask's place by age is its place by number
        # (asks are numbered as they arrive, on a clock that never goes back).
        self.top_seq = 0
        self.gangs = False
        self.chunks: deque[dict[str, Ask]] = deque()
        self.where: dict[str, dict[str, Ask]] = {}  # allocation key -> its chunk
        self._room = 0  # slots left in the last chunk

    def append(self, ask: Ask) -> None:
        if not self._room:
            self.chunks.append({})
            self._room = _CHUNK
        chunk = self.chunks[-1]
        chunk[ask.allocation_key] = ask
        self.where[ask.allocation_key] = chunk
        self._room -= 1

    def remove(self, key: str) -> None:
        """Remove the ask of ``key`` (KeyError if there is none)."""
        chunk = self.where.pop(key)
        del chunk[key]
        if chunk:
            return
        chunks = self.chunks
        if chunk is chunks[-1]:
            self._room = 0  # the chunks left are full: the next ask starts one
        if chunk is chunks[0]:
            chunks.popleft()
        else:
            for i, c in enumerate(chunks):
                if c is chunk:
                    del chunks[i]
                    break

    def insert(self, ask: Ask) -> None:
        """Put ``ask`` in its place (``order``; after the asks it ties with): the group is
        made again. For an ask that comes late: a member of an older gang, or an ask given
        back after its replacement fell through."""
        asks = list(self.values())
        at = bisect_right([order(a) for a in asks], order(ask))
        asks.insert(at, ask)
        self.chunks = deque()
        self.where = {}
        self._room = 0
        for a in asks:
            self.append(a)

    def first(self) -> Ask:
        for ask in self.chunks[0].values():  # a chunk that empties is dropped
            return ask
        raise IndexError("an empty group")  # pragma: no cover - groups that empty go

    def last(self) -> Ask:
        return next(reversed(self.chunks[-1].values()))

    def values(self) -> Iterable[Ask]:
        chunks = self.chunks
        if len(chunks) == 1:
            return chunks[0].values()
        return chain.from_iterable(map(dict.values, chunks))

    def first_due_after(self, now: float, delay: float) -> Ask | None:
        """The first ask not ``delay`` old at ``now`` (the asks are in age order), found by
        halving over the chunks and then within one: no walk of the asks before it."""
        chunks = self.chunks
        lo, hi = 0, len(chunks)
        while lo < hi:  # the first chunk whose last ask is too young
            mid = (lo + hi) // 2
            if now < next(reversed(chunks[mid].values())).created + delay:
                hi = mid
            else:
                lo = mid + 1
        if lo < len(chunks):
            for ask in chunks[lo].values():
                if now < ask.created + delay:
                    return ask
        return None

    def __len__(self) -> int:
        return len(self.where)

    def __repr__(self) -> str:
        shape = "one by one" if self.size is None else dict(self.size)
        return f"<Group priority={self.priority} {shape} asks={len(self.where)}>"


Level = dict[Size | None, Group]  # the groups of one priority, by shape


class Shapes:
    """The shapes of the pending asks of a leaf queue's applications: how many groups of
    each (``None``: the asks walked one by one), and per shape a lower bound of the age of
    its asks (the oldest ask of the shape since it last had none here). The pass reads it
    to skip the leaf as a whole (``scheduler.core._pass``). ``preempting`` counts their
    asks that allow preempting others: a preemption round passes over a leaf without."""

    __slots__ = ("count", "preempting", "since")

    def __init__(self) -> None:
        self.count: dict[Size | None, int] = {}
        self.since: dict[Size, float] = {}
        self.preempting = 0

    def came(self, size: Size | None, created: float, *, again: bool = False) -> None:
        """An application here has a new group of ``size``, its oldest ask ``created``
        (``again``: an older ask joined a group it has)."""
        count = self.count
        if not again:
            count[size] = count.get(size, 0) + 1
        if size is not None:
            since = self.since.get(size)
            if since is None or created < since:
                self.since[size] = created

    def gone(self, size: Size | None) -> None:
        """A group of ``size`` of an application here emptied."""
        count = self.count
        left = count[size] - 1
        if left:
            count[size] = left
        else:
            del count[size]
            if size is not None:
                del self.since[size]

    def __repr__(self) -> str:
        return f"<Shapes {len(self.count)}>"


class PendingAsks:
    """Asks with pending allocations, by priority (high first), then in groups by shape,
    each in age order (``order``): one ``Group`` per priority and shape, so adding or
    removing an ask is O(1) (a new priority is the only sort, and priorities are few).

    The shapes of the leaf queue the application is in (``shapes_to``) hear when a group
    comes or goes. ``preempting`` counts the asks that allow preempting others
    (``Ask.allow_preempt_other``), here and in those shapes: a preemption round passes
    over an application, or a leaf, that has none without a walk of its asks."""

    __slots__ = (
        "_by_gid",
        "_levels",
        "_next_gid",
        "_priorities",
        "levels",
        "preempting",
        "shapes_to",
        "single",
    )

    def __init__(self) -> None:
        self._levels: dict[int, Level] = {}
        self._priorities: list[int] = []  # high first
        self.levels: list[Level] = []  # the groups of each priority, high first (walked)
        self._by_gid: dict[int, Group] = {}  # every group, by its number (``Ask.gid``)
        self.single: Group | None = None  # the only group, when there is one (the usual case)
        self._next_gid = 1
        self.shapes_to: Shapes | None = None
        self.preempting = 0  # asks here that allow preempting others

    # -- groups --------------------------------------------------------------------
    def _group(self, priority: int, size: Size | None, ask: Ask) -> tuple[Group, bool]:
        """The group of ``priority`` and ``size``, made for ``ask`` if there is none; and
        whether the priority is new here."""
        level = self._levels.get(priority)
        new_priority = level is None
        if level is None:
            level = self._levels[priority] = {}
            self._priorities.append(priority)
            self._priorities.sort(reverse=True)
            self.levels.insert(self._priorities.index(priority), level)
        else:
            group = level.get(size)
            if group is not None:
                return group, False
        gid = self._next_gid
        self._next_gid = gid + 1
        group = level[size] = self._by_gid[gid] = Group(gid, priority, size)
        self.single = group if len(self._by_gid) == 1 else None
        if self.shapes_to is not None:
            self.shapes_to.came(size, ask.created)
        return group, new_priority

    def shapes(self) -> Iterator[tuple[Size | None, float]]:
        """Each group's shape and the age of its oldest ask (what its queue counts)."""
        for group in self._by_gid.values():
            yield group.size, group.first().created

    # -- asks ----------------------------------------------------------------------
    def add(self, ask: Ask) -> bool:
        """Add ``ask`` in its place; True if its priority is new here (the highest may
        have moved)."""
        gang = ask.gang
        if gang is not None or ask.required_node or (ask.task_group_name and not ask.placeholder):
            size = None  # ``one_by_one``, inline: a placeholder comes this way
        else:
            size = ask.size
        level = self._levels.get(ask.priority)
        group = level.get(size) if level is not None else None
        new_priority = False
        if group is None:
            group, new_priority = self._group(ask.priority, size, ask)
        ask.gid = group.gid
        if ask.allow_preempt_other:
            self._preempting(1)
        if not group.where:
            late = False
        elif gang is None and not group.gangs:
            late = ask.seq < group.top_seq  # by number (a removed ask's: then placed by age)
        else:
            late = order(ask) < order(group.last())
        if ask.seq > group.top_seq:
            group.top_seq = ask.seq
        if gang is not None:
            group.gangs = True
        if late:
            group.insert(ask)
            if size is not None and self.shapes_to is not None:
                self.shapes_to.came(size, ask.created, again=True)
        else:
            group.append(ask)
        return new_priority

    def extend(self, asks: Iterable[Ask]) -> bool:
        """Add new asks (none a member of a permit gang), in order, each the youngest
        yet; True if a priority is new here."""
        moved = False
        priority: int | None = None
        size: Size | None = None
        group: Group | None = None
        seq = 0
        for ask in asks:
            shape = (
                None
                if ask.required_node or (ask.task_group_name and not ask.placeholder)
                else ask.size
            )
            if group is None or ask.priority != priority or not (shape is size or shape == size):
                if group is not None:
                    group.top_seq = seq  # the newest it took
                priority, size = ask.priority, shape
                group, new_priority = self._group(priority, shape, ask)
                moved = moved or new_priority
            ask.gid = group.gid
            group.append(ask)
            seq = ask.seq
            if ask.allow_preempt_other:
                self._preempting(1)
        if group is not None:
            group.top_seq = seq
        return moved

    def remove(self, ask: Ask) -> bool:
        """Remove ``ask`` (this very object: KeyError if it is not here); True if it was
        the last of its priority."""
        group = self._by_gid[ask.gid]
        group.remove(ask.allocation_key)
        if ask.allow_preempt_other:
            self._preempting(-1)
        if group.where:
            return False
        priority = group.priority
        by_gid = self._by_gid
        del by_gid[group.gid]
        self.single = next(iter(by_gid.values())) if len(by_gid) == 1 else None
        level = self._levels[priority]
        del level[group.size]
        if self.shapes_to is not None:
            self.shapes_to.gone(group.size)
        if level:
            return False
        del self._levels[priority]
        del self.levels[self._priorities.index(priority)]
        self._priorities.remove(priority)
        return True

    def _preempting(self, change: int) -> None:
        self.preempting += change
        if self.shapes_to is not None:
            self.shapes_to.preempting += change

    def highest(self) -> int:
        """The highest priority of the asks, ``MIN_PRIORITY`` when there are none."""
        return self._priorities[0] if self._priorities else MIN_PRIORITY

    def __iter__(self) -> Iterator[Ask]:
        for level in self.levels:
            if len(level) == 1:
                for group in level.values():
                    yield from group.values()
            else:
                yield from merge(*(g.values() for g in level.values()), key=order)

    def in_order(self) -> Iterable[Ask]:
        """``iter(self)``, cheaper when there is one group (the usual case)."""
        if self.single is not None:
            return self.single.values()
        return iter(self)

    def __len__(self) -> int:
        return sum(len(g.where) for g in self._by_gid.values())

    def __bool__(self) -> bool:
        return bool(self._priorities)
