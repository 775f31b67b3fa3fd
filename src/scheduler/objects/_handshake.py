"""The release handshakes with the RM in flight: a placeholder replacement, a preemption.

The application keeps its open replacements (``Application.replacing``: one is work, so
the application is not idle); the gang flows (``scheduler.gangs._placeholders``) start,
await and end them. A preemption is kept by the partition (``Preemptions``) and awaited by
the preemptor's application actor (``scheduler.core._preempt``).

This module stays out of the compiled build: the record is a ``msgspec``
struct whose ``Promise`` is named for type checking only, and a compiled module would look
that name up when it builds the class.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

if TYPE_CHECKING:
    from actors import Promise
    from scheduler.objects._asks import Allocation, Ask
    from scheduler.objects._nodes import Node
    from scheduler.objects._queue import Queue

__all__ = ["Preemption", "Replacement"]


class Replacement(msgspec.Struct, gc=False):
    """A handshake in flight: ``placeholder`` was released to the RM for real ``ask``.

    ``confirmed`` settles True when the RM confirms the release, False when the
    placeholder went some other way; ``cancelled`` is set when the application no longer
    wants the real allocation (a Hard timeout). Not tracked by the garbage collector: it
    is dropped when its handshake ends.
    """

    placeholder: Allocation
    ask: Ask
    confirmed: Promise[bool]
    started: float
    cancelled: bool = False
    overdue: bool = False
    # The real allocation, on another node than the placeholder's (the RM's predicates
    # refused the node of every placeholder): on that node already, to keep its room,
    # and ``tentative`` (the RM hears of it when the handshake completes). None: the real
    # allocation takes the placeholder's place on its node.
    held: Allocation | None = None
    real_uuid: str = ""  # the real allocation's, named in the placeholder's release

    def __repr__(self) -> str:
        return f"<Replacement {self.placeholder.uuid} for {self.ask.allocation_key}>"


class Preemption(msgspec.Struct, gc=False):
    """A preemption in flight: ``victims`` were released to the RM with
    ``PREEMPTED_BY_SCHEDULER`` so that ``ask`` (of ``application_id``, in the leaf queue
    whose chain is ``chain``) can run on ``node``, which is reserved for it meanwhile.

    ``victims`` holds those the RM has not confirmed yet, and ``chains`` the queue chain of
    each (what they count against until they go). ``done`` settles with how the wait
    ended: ``"confirmed"`` (the last victim went), ``"timeout"`` (the RM took too long) or
    ``"cancelled"`` (the reservation went another way: the ask left, was placed
    elsewhere, the node went). ``required_node``: the DaemonSet case, the ask must run on
    ``node``.
    """

    application_id: str
    ask: Ask
    node: Node
    chain: tuple[Queue, ...]
    victims: dict[str, Allocation]
    chains: dict[str, tuple[Queue, ...]]
    done: Promise[str]
    started: float
    required_node: bool = False
    total: int = 0  # the number of victims released

    def __repr__(self) -> str:
        return (
            f"<Preemption for {self.application_id}/{self.ask.allocation_key} on "
            f"{self.node.node_id}: {len(self.victims)} of {self.total} victims left>"
        )
