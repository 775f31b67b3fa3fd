"""A placeholder replacement in flight: the record of one release handshake with the RM.

The application keeps its open handshakes (``Application.replacing``: one is work, so the
application is not idle); the gang flows (``scheduler.gangs._placeholders``) start, await
and end them. This module stays out of the compiled build: the record is a ``msgspec``
struct whose ``Promise`` is named for type checking only, and a compiled module would look
that name up when it builds the class.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

if TYPE_CHECKING:
    from actors import Promise
    from scheduler.objects._asks import Allocation, Ask

__all__ = ["Replacement"]


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

    def __repr__(self) -> str:
        return f"<Replacement {self.placeholder.uuid} for {self.ask.allocation_key}>"
