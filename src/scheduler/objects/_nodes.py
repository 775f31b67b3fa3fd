"""Nodes, the index that orders them for a node sorting policy, and reservations.

No anyio here: plain classes, testable without an event loop (STYLE 2).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from heapq import heapify, heappop, heappush, heapreplace
from typing import TYPE_CHECKING, ClassVar

from scheduler.objects._resources import Res, Size, add_into, sub, sub_into

if TYPE_CHECKING:
    from scheduler.objects._asks import Allocation, Ask

__all__ = ["Node", "NodeIndex", "Reservation"]


class Node:
    """A node of a partition: capacity, what other schedulers occupy, and our allocations."""

    __slots__ = (
        "allocated",
        "allocations",
        "attributes",
        "available",
        "capacity",
        "index_epoch",
        "index_factors",
        "index_key",
        "index_rank",
        "node_id",
        "occupied",
        "reserved",
        "schedulable",
    )

    def __init__(
        self,
        node_id: str,
        capacity: Res,
        occupied: Res | None = None,
        attributes: Mapping[str, str] | None = None,
    ) -> None:
        self.node_id = node_id
        self.capacity = capacity
        self.occupied = occupied or {}
        self.attributes = dict(attributes) if attributes else {}
        self.allocated: Res = {}
        self.allocations: dict[str, Allocation] = {}
        self.schedulable = True
        self.available: Res = {}
        # Its live entry in the NodeIndex heap (None: not indexed) and its rank by node id.
        self.index_key: int | None = None
        self.index_rank = 0
        self.index_epoch = -1  # the NodeIndex ranking its rank is of (``NodeIndex._rank``)
        # Its NodeIndex's (resource name, weight / (capacity * total weight)) pairs.
        self.index_factors: tuple[tuple[str, float], ...] = ()
        # The one reservation on this node (a scheduler.Reservation), or None.
        self.reserved: Reservation | None = None
        self.refresh_available()

    def refresh_available(self) -> None:
        avail = sub(self.capacity, self.occupied)
        sub_into(avail, self.allocated)
        self.available = avail
        if self.reserved is not None:
            self.reserved.grew()

    def add_allocation(self, alloc: Allocation) -> None:
        self.allocations[alloc.uuid] = alloc
        allocated = self.allocated
        available = self.available
        for name, v in alloc.resource.items():
            allocated[name] = allocated.get(name, 0) + v
            left = available.get(name, 0) - v
            if left:
                available[name] = left
            else:
                available.pop(name, None)

    def overcommitted(self) -> bool:
        """It holds more of some resource than its capacity."""
        capacity = self.capacity
        for name, v in self.allocated.items():
            if v > capacity.get(name, 0):
                return True
        return False

    def swap_allocation(self, uuid: str, alloc: Allocation) -> None:
        """Put ``alloc`` in the place of allocation ``uuid`` of the same resource."""
        del self.allocations[uuid]
        self.allocations[alloc.uuid] = alloc

    def remove_allocation(self, uuid: str) -> Allocation | None:
        alloc = self.allocations.pop(uuid, None)
        if alloc is not None:
            sub_into(self.allocated, alloc.resource)
            add_into(self.available, alloc.resource)
            if self.reserved is not None:
                self.reserved.grew()
        return alloc

    def __repr__(self) -> str:
        return (
            f"<Node {self.node_id} allocations={len(self.allocations)} available={self.available}>"
        )


class Reservation:
    """A node held for one ask that fits the node but not its free room (YuniKorn's).

    While reserved the node takes no other allocation; the ask gets it as soon as enough
    frees up, or any other node that fits first.
    """

    __slots__ = ("application_id", "ask", "node", "seq", "settled", "since", "woken")

    def __init__(
        self,
        application_id: str,
        ask: Ask,
        node: Node,
        since: float,
        seq: int = 0,
        woken: list[Reservation] | None = None,
    ) -> None:
        self.application_id = application_id
        self.ask = ask
        self.node = node
        self.since = since
        self.seq = seq  # creation order among the partition's reservations
        # Known to wait for room on its node and on every other (``Reservations``): the
        # pass looks at it again only when its node or its size may have room.
        self.settled = False
        self.woken = woken  # where it goes when its node gains room (``grew``)

    def grew(self) -> None:
        """Its node gained room: the pass looks at it again."""
        if self.woken is not None:
            self.woken.append(self)

    def __repr__(self) -> str:
        return (
            f"<Reservation {self.node.node_id} for {self.application_id}/{self.ask.allocation_key}>"
        )


DEFAULT_WEIGHTS: dict[str, float] = {"vcore": 1.0, "memory": 1.0}


class NodeIndex:
    """Schedulable nodes in the order a node sorting policy prefers them.

    ``fair`` puts the least used node first; ``binpacking`` the most used; nodes of equal
    score in node id order (YuniKorn's node collection). Nodes sit in a binary heap, so
    choosing a node never scans every node and a node whose usage changes costs one
    O(log n) push (``heapq`` is C). A heap entry is one integer: the node's score, in
    steps of 2**-32, above the node's rank among the node ids (``_RANK_BITS``), so entries
    compare as fast as integers do and carry no tuple. The heap is lazy: a node's live
    entry equals ``node.index_key``; entries a node left behind (older keys, removed
    nodes) are dropped when they reach the top, and the heap is rebuilt when stale entries
    outnumber live ones.

    Ranks follow node id order: a node whose id sorts after every other takes the next
    rank; any other new node has every node ranked again (once, before the index is next
    used), which a batch of new nodes pays once.

    A size that no node has room for is remembered (``_dead``), with the nodes that may
    have gained room since (``_grown``: every node updated, refreshed or added while some
    size is remembered). Asked for it again, the index looks only at those nodes: a full
    cluster answers "no room" for a size without walking every node, and a node that frees
    up is found as the heap would find it (the fitting node with the lowest key). The size
    stays remembered when such a node is found (every node with room for it is still among
    those listed since), until a look finds none again; the memory is forgotten when it
    outgrows the nodes or the nodes are ranked again.
    """

    POLICIES: ClassVar[tuple[str, ...]] = ("fair", "binpacking")  # ClassVar: mypyc reads it

    def __init__(self, policy: str = "fair", weights: Mapping[str, float] | None = None) -> None:
        if policy not in self.POLICIES:
            raise ValueError(f"unknown node sorting policy {policy!r}")
        self.policy = policy
        self.weights = dict(weights) if weights else dict(DEFAULT_WEIGHTS)
        self._binpacking = policy == "binpacking"
        self._heap: list[int] = []
        self.by_id: dict[str, Node] = {}  # the indexed nodes (read-only outside)
        self._by_rank: dict[int, Node] = {}
        self._next_rank = 0
        self._last_id = ""  # the greatest node id ranked so far
        self._rerank = False  # a node came in out of id order: rank them all again
        # Sizes no indexed node had room for, each with the position in ``_grown`` from
        # which the nodes that may have gained room since are listed.
        self._dead: dict[Size, int] = {}
        self._grown: list[Node] = []
        self._epoch = 0  # how often every node was ranked anew (``_rank_all``)

    def _set_factors(self, node: Node) -> None:
        weights = [(n, w, node.capacity.get(n, 0)) for n, w in self.weights.items()]
        present = [(n, w, c) for n, w, c in weights if c > 0]
        total = sum(w for _, w, _ in present)
        # (resource name, weight / (capacity * total weight)) for the weighted resources
        # the node has, kept on the node, so a score is one short sum.
        node.index_factors = tuple((n, w / (c * total)) for n, w, c in present)

    def _key(self, node: Node) -> int:
        allocated = node.allocated
        used = 0.0
        for name, factor in node.index_factors:
            used += allocated.get(name, 0) * factor
        score = int((1.0 - used if self._binpacking else used) * _SCORE_STEPS)
        return (score << _RANK_BITS) + node.index_rank

    def _push(self, node: Node, key: int) -> None:
        node.index_key = key
        heap = self._heap
        heappush(heap, key)
        if len(heap) > 2 * len(self.by_id) + 64:
            self._rebuild()

    def _rebuild(self) -> None:
        self._heap = [n.index_key for n in self.by_id.values() if n.index_key is not None]
        heapify(self._heap)

    def _rank(self, node: Node) -> None:
        rank = node.index_rank
        if node.index_epoch == self._epoch and rank not in self._by_rank:
            # Back in the index (a reservation ended): its rank of this epoch is still
            # its place among the others by id, and no other node took it.
            self._by_rank[rank] = node
        elif node.node_id > self._last_id and self._next_rank < _MAX_RANK:
            node.index_rank = self._next_rank
            node.index_epoch = self._epoch
            self._next_rank += 1
            self._last_id = node.node_id
            self._by_rank[node.index_rank] = node
        else:
            self._rerank = True

    def _rank_all(self) -> None:
        """Rank every node by id again and rebuild the heap (a node came in out of order)."""
        self._rerank = False
        self._forget_dead()  # every key is made again
        self._epoch += 1
        by_rank: dict[int, Node] = {}
        for rank, node_id in enumerate(sorted(self.by_id)):
            node = self.by_id[node_id]
            node.index_rank = rank
            node.index_epoch = self._epoch
            node.index_key = self._key(node)
            by_rank[rank] = node
        self._by_rank = by_rank
        self._next_rank = len(by_rank)
        self._last_id = max(self.by_id, default="")
        self._rebuild()

    def refresh(self, node: Node) -> None:
        """Re-sort ``node`` after its capacity changed."""
        if node.index_key is not None:
            if self._dead:
                self._may_have_grown(node)
            self._set_factors(node)
            if not self._rerank:
                self._push(node, self._key(node))

    def add(self, node: Node) -> None:
        if node.node_id in self.by_id:
            self.update(node)
            return
        self.by_id[node.node_id] = node
        if self._dead:
            self._may_have_grown(node)
        self._set_factors(node)
        self._rank(node)
        if self._rerank:
            node.index_key = 0  # indexed; its key comes with the ranking
        else:
            self._push(node, self._key(node))

    def discard(self, node: Node) -> None:
        if self.by_id.pop(node.node_id, None) is not None:
            node.index_key = None
            node.index_factors = ()
            if self._by_rank.get(node.index_rank) is node:
                del self._by_rank[node.index_rank]

    def update(self, node: Node) -> None:
        """Re-sort ``node`` after its usage changed."""
        old = node.index_key
        if old is None:
            return  # not indexed
        if self._dead:
            self._may_have_grown(node)
        if self._rerank:
            return  # every key is made again before the next use
        key = self._key(node)
        if key != old:
            heap = self._heap
            if heap and heap[0] == old:
                # Usually the node just allocated to is the top: one sift instead of a push
                # now and a pop of the stale entry later.
                node.index_key = key
                heapreplace(heap, key)
            else:
                self._push(node, key)

    def __iter__(self) -> Iterator[Node]:
        if self._rerank:
            self._rank_all()
        by_rank = self._by_rank
        for key in sorted(n.index_key for n in self.by_id.values() if n.index_key is not None):
            yield by_rank[key & _RANK_MASK]

    def first_fit(
        self, size: Size, exclude: set[str] | frozenset[str] = frozenset()
    ) -> Node | None:
        """The first node in policy order, not in ``exclude``, with ``size`` (a resource as
        ``Ask.size`` holds it: name and quantity pairs) available."""
        if self._rerank:
            self._rank_all()
        dead = self._dead
        if dead and not exclude:
            since = dead.get(size)
            if since is not None:
                found = self._first_grown(size, since)
                if found is None:
                    dead[size] = len(self._grown)  # no room still: look from here next
                # Found or not, every node with room for ``size`` is still among those
                # listed from ``dead[size]`` on: the next ask of the size looks there.
                return found
        heap = self._heap
        by_rank = self._by_rank
        held: list[int] = []
        found = None
        while heap:
            key = heap[0]
            node = by_rank.get(key & _RANK_MASK)
            if node is None or node.index_key != key:
                heappop(heap)  # left behind by a move or a removal
                continue
            if not (exclude and node.node_id in exclude):
                available = node.available
                for name, v in size:
                    if v > available.get(name, 0):
                        break
                else:
                    found = node
                    break
            held.append(heappop(heap))
        for key in held:
            heappush(heap, key)
        if found is None and not exclude:
            dead[size] = len(self._grown)  # no node has room: remember it
        return found

    def _first_grown(self, size: Size, since: int) -> Node | None:
        """Of the nodes that may have gained room since ``size`` found none, the one with
        room and the lowest key (the one the heap would give: no other node has room)."""
        best: Node | None = None
        best_key = 0
        grown = self._grown
        for i in range(since, len(grown)):
            node = grown[i]
            key = node.index_key
            if key is None or (best is not None and key >= best_key):
                continue  # no longer indexed, or after the best so far
            available = node.available
            for name, v in size:
                if v > available.get(name, 0):
                    break
            else:
                best, best_key = node, key
        return best

    def _may_have_grown(self, node: Node) -> None:
        grown = self._grown
        grown.append(node)
        if len(grown) > 2 * len(self.by_id) + 64:
            self._forget_dead()  # cheaper to walk the heap again than to read all these

    def _forget_dead(self) -> None:
        self._dead.clear()
        self._grown.clear()

    def nodes(self) -> Iterable[Node]:
        """The indexed nodes in no particular order."""
        return self.by_id.values()

    def __len__(self) -> int:
        return len(self.by_id)

    def __contains__(self, node_id: object) -> bool:
        return node_id in self.by_id


_SCORE_STEPS = 1 << 32  # a score (a fraction of the node used) in steps of 2**-32
_RANK_BITS = 32
_MAX_RANK = 1 << _RANK_BITS
_RANK_MASK = _MAX_RANK - 1
