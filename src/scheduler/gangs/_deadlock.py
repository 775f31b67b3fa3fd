"""Permit gangs without deadlock: when a group cannot place a member and younger groups
hold tentative room that would let it, the youngest of them is rolled back and parked, so the
oldest completes instead of every group waiting out its timeout.

``DeadlockResolver`` decides which group gives way and holds the groups that did until a
group is bound. ``PermitGangs`` owns it: the scheduling pass calls
``PermitGangs.resolve_deadlock`` when a pass places nothing more, and binding a group lets the
groups that gave way go again. Plain synchronous code, in the partition's shared turn.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scheduler.objects._resources import Res, add_into, fits, fits_under_max, sub

if TYPE_CHECKING:
    from scheduler.gangs._permit import GangGroup, PermitGangs
    from scheduler.objects._asks import Ask
    from scheduler.objects._queue import Queue

__all__ = ["DeadlockResolver"]


class DeadlockResolver:
    """The groups of ``permits`` that gave way to an older one, and the choice of the next."""

    def __init__(self, permits: PermitGangs) -> None:
        self.permits = permits
        self.gave_way: dict[int, GangGroup] = {}  # parked for an older group, by id()

    def resolve(self, blocked: list[GangGroup]) -> bool:
        """After a pass: when the oldest of the ``blocked`` groups (those that could not
        place a member) is held up by tentative members of younger groups, roll the youngest
        of those back (and park it) so that the oldest can complete. True if one was
        rolled back."""
        blocked = [g for g in blocked if not g.satisfied and not g.timed_out]
        if not blocked:
            return False
        oldest = min(blocked, key=lambda g: g.key)
        assert oldest.blocked is not None
        # The younger groups holding tentative members that could make room: together
        # they must be able to free enough; the youngest of them gives way now, and the
        # next pass takes the next one if the oldest still cannot complete.
        permits = self.permits
        younger = {
            id(g): g
            for g in permits.groups.values()
            if g is not oldest
            and not g.satisfied
            and g.key > oldest.key
            and any(gang.tentative for gang in g.gangs.values())
        }
        helpful = [g for g in younger.values() if self._frees_room([g], oldest.blocked, some=True)]
        if not helpful or not self._frees_room(helpful, oldest.blocked):
            return False
        youngest = max(helpful, key=lambda g: g.key)
        permits.roll_back(
            youngest,
            "GangRolledBack",
            f"gang {youngest.name} rolled back: its tentative members held the room that the "
            f"older gang {oldest.name} needs to complete",
        )
        # The oldest tries again now (a Strict one was parked by its own rollback); the one
        # that gave way waits for a real change of the cluster, or for a group to be bound.
        # No generation bump here: that would let every group that gave way before go
        # again, and two young groups could take turns grabbing the room forever.
        oldest.parked = ""
        youngest.park("deadlock", permits.partition.generation)
        self.gave_way[id(youngest)] = youngest
        permits.partition.schedule_pending = True
        return True

    def _frees_room(
        self,
        holders: list[GangGroup],
        blocked: tuple[Ask, Queue, str, Queue | None],
        some: bool = False,
    ) -> bool:
        """Rolling ``holders`` back could let the blocked member be placed (``some``: they
        hold anything where it is blocked at all)."""
        ask, _queue, kind, where = blocked
        res = ask.resource
        members = [m for holder in holders for m in holder.members()]
        if kind == "quota" and where is not None:
            freed: Res = {}
            for member in members:
                q = member.app.queue
                if q is not None and where in q.chain:
                    add_into(freed, member.alloc.resource)
            if some:
                return bool(freed)
            return bool(freed) and fits_under_max(
                res, sub(where.allocated, freed), where.max_resources
            )
        if kind == "node":
            if some:
                return bool(members)
            by_node: dict[str, Res] = {}
            for member in members:
                add_into(by_node.setdefault(member.alloc.node_id, {}), member.alloc.resource)
            nodes = self.permits.partition.nodes
            for node_id, freed in by_node.items():
                node = nodes.get(node_id)
                if node is not None and node.schedulable:
                    room = dict(node.available)
                    add_into(room, freed)
                    if fits(res, room):
                        return True
        return False

    def let_go(self) -> None:
        """A group was bound: the groups that gave way to an older one may go again."""
        if self.gave_way:
            for other in self.gave_way.values():
                if other.parked == "deadlock":
                    other.parked = ""
            self.gave_way = {}
            self.permits.partition.schedule_pending = True
