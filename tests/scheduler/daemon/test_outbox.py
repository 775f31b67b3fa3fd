"""The outbox of an RM registration: what it was sent, kept until it says it has it, and
handed to the connection it resumes on; past its limit, no resume."""

from __future__ import annotations

import pytest

from scheduler import NotFoundError
from scheduler.daemon._outbox import Outbox


def test_what_is_pushed_is_kept_until_acknowledged_and_sent_only_while_owned() -> None:
    box: Outbox[str] = Outbox("rm-1", limit=10)
    assert box.push(0, "a") is False  # nobody to send it to yet: kept
    session = object()
    assert box.attach(session) == [(0, "a")]  # the first connection sends it
    assert box.push(0, "b") is True
    assert box.push(0, "c") is True
    box.ack(0, 2)
    assert box.attach(session) == [(0, "c")]
    box.ack(0, 99)  # more than was sent: ignored
    assert box.attach(session) == [(0, "c")]
    box.ack(0, 3)
    assert box.attach(session) == []


def test_a_resume_sends_what_the_rm_did_not_receive_in_order_per_channel() -> None:
    box: Outbox[str] = Outbox("rm-1", limit=10)
    old = object()
    box.attach(old)
    for item in ("a1", "a2", "a3"):
        box.push(1, item)
    box.push(2, "b1")
    assert box.detach(old) is True
    box.push(1, "a4")  # while the RM is away
    box.resume(box.token, {1: 1, 2: 1})
    new = object()
    assert box.attach(new) == [(1, "a2"), (1, "a3"), (1, "a4")]
    assert box.owner is new
    assert box.detach(old) is False  # the old connection's end changes nothing now


def test_a_resume_with_a_wrong_token_or_counts_is_refused_with_a_reason() -> None:
    box: Outbox[str] = Outbox("rm-1", limit=10)
    box.push(0, "a")
    box.push(0, "b")
    box.ack(0, 1)
    with pytest.raises(NotFoundError, match=r"has no session 'nope'.*register again"):
        box.resume("nope", {0: 2})
    with pytest.raises(NotFoundError, match="received 3 on channel 0, but 2 were sent"):
        box.resume(box.token, {0: 3})
    with pytest.raises(NotFoundError, match=r"received 0 on channel 0.*the last 1 kept"):
        box.resume(box.token, {0: 0})  # what it acknowledged is gone
    with pytest.raises(NotFoundError):
        box.resume("é", {0: 2})  # any text, never a crash
    box.resume(box.token, {0: 2})


def test_past_its_limit_an_outbox_keeps_nothing_and_cannot_be_resumed() -> None:
    box: Outbox[int] = Outbox("rm-1", limit=3)
    for i in range(5):
        box.push(0, i)
    assert box.dropped == 2
    assert box.attach(object()) == []  # nothing kept: of no use any more
    with pytest.raises(NotFoundError, match=r"2 callbacks were lost.*more than the 3 kept"):
        box.resume(box.token, {0: 5})
