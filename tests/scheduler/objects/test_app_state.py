"""The application lifecycle: every (state, event) pair against YuniKorn's table."""

from __future__ import annotations

import itertools

import pytest

from scheduler.objects._application import (
    TERMINAL_STATES,
    AppEvent,
    Application,
    AppState,
    InvalidTransition,
    next_state,
)

S, E = AppState, AppEvent

# YuniKorn's application_state.go (v1.2), written out by hand: every legal edge, nothing else.
EXPECTED: dict[tuple[AppState, AppEvent], AppState] = {
    (S.NEW, E.REJECT): S.REJECTED,
    (S.NEW, E.RUN): S.ACCEPTED,
    (S.RESUMING, E.RUN): S.ACCEPTED,
    (S.ACCEPTED, E.RUN): S.STARTING,
    (S.STARTING, E.RUN): S.RUNNING,
    (S.RUNNING, E.RUN): S.RUNNING,
    (S.COMPLETING, E.RUN): S.RUNNING,
    (S.ACCEPTED, E.COMPLETE): S.COMPLETING,
    (S.STARTING, E.COMPLETE): S.COMPLETING,
    (S.RUNNING, E.COMPLETE): S.COMPLETING,
    (S.COMPLETING, E.COMPLETE): S.COMPLETED,
    (S.NEW, E.FAIL): S.FAILING,
    (S.ACCEPTED, E.FAIL): S.FAILING,
    (S.STARTING, E.FAIL): S.FAILING,
    (S.RUNNING, E.FAIL): S.FAILING,
    (S.FAILING, E.FAIL): S.FAILED,
    (S.NEW, E.RESUME): S.RESUMING,
    (S.ACCEPTED, E.RESUME): S.RESUMING,
    (S.COMPLETED, E.EXPIRE): S.EXPIRED,
    (S.FAILED, E.EXPIRE): S.EXPIRED,
    (S.REJECTED, E.EXPIRE): S.EXPIRED,
    # The one documented addition: an application removed while New completes at once.
    (S.NEW, E.COMPLETE): S.COMPLETED,
}

ALL_PAIRS = list(itertools.product(AppState, AppEvent))
LEGAL = [(s, e, EXPECTED[(s, e)]) for s, e in ALL_PAIRS if (s, e) in EXPECTED]
ILLEGAL = [(s, e) for s, e in ALL_PAIRS if (s, e) not in EXPECTED]

# A way to reach each state from New by firing events (so hooks ran as in real use).
PATH_TO: dict[AppState, tuple[AppEvent, ...]] = {
    S.NEW: (),
    S.ACCEPTED: (E.RUN,),
    S.STARTING: (E.RUN, E.RUN),
    S.RUNNING: (E.RUN, E.RUN, E.RUN),
    S.COMPLETING: (E.RUN, E.COMPLETE),
    S.COMPLETED: (E.RUN, E.COMPLETE, E.COMPLETE),
    S.REJECTED: (E.REJECT,),
    S.FAILING: (E.FAIL,),
    S.FAILED: (E.FAIL, E.FAIL),
    S.EXPIRED: (E.REJECT, E.EXPIRE),
    S.RESUMING: (E.RESUME,),
}


def make_app(state: AppState = S.NEW, *, submit_time: float = 0.0) -> Application:
    """An application brought to ``state`` along ``PATH_TO``, one second per event."""
    app = Application(
        application_id="app-1", partition="default", queue_name="root.a", submit_time=submit_time
    )
    now = submit_time
    for event in PATH_TO[state]:
        now += 1.0
        app.fire(event, now)
    assert app.state is state
    return app


def test_names_are_the_ones_the_rm_and_rest_see() -> None:
    assert [s.value for s in AppState] == [
        "New",
        "Accepted",
        "Starting",
        "Running",
        "Rejected",
        "Completing",
        "Completed",
        "Failing",
        "Failed",
        "Expired",
        "Resuming",
    ]
    assert [e.value for e in AppEvent] == [
        "runApplication",
        "rejectApplication",
        "completeApplication",
        "failApplication",
        "expireApplication",
        "resumeApplication",
    ]


def test_every_state_is_reachable_by_the_helper() -> None:
    assert set(PATH_TO) == set(AppState)


@pytest.mark.parametrize(
    ("state", "event", "expected"), LEGAL, ids=[f"{s}-{e}" for s, e, _ in LEGAL]
)
def test_legal_edge_goes_where_yunikorn_says(
    state: AppState, event: AppEvent, expected: AppState
) -> None:
    app = make_app(state)
    assert app.can_fire(event)
    assert next_state(state, event) is expected
    assert app.fire(event, 100.0) is expected
    assert app.state is expected


@pytest.mark.parametrize(("state", "event"), ILLEGAL, ids=[f"{s}-{e}" for s, e in ILLEGAL])
def test_every_other_pair_raises_and_changes_nothing(state: AppState, event: AppEvent) -> None:
    app = make_app(state)
    log_before = list(app.state_log)
    finished_before = app.finished_time
    assert not app.can_fire(event)
    with pytest.raises(InvalidTransition):
        next_state(state, event)
    with pytest.raises(InvalidTransition, match=str(event)):
        app.fire(event, 100.0)
    assert app.state is state
    assert app.state_log == log_before
    assert app.finished_time == finished_before


def test_a_new_application_logs_its_submission() -> None:
    app = make_app(submit_time=5.0)
    assert app.state_log == [(5.0, S.NEW)]
    assert app.finished_time is None
    assert not app.terminated


def test_state_log_records_each_change_with_its_time() -> None:
    app = make_app(submit_time=1.0)
    for now, event in [
        (2.0, E.RUN),
        (3.0, E.RUN),
        (4.0, E.RUN),
        (5.0, E.COMPLETE),
        (6.0, E.COMPLETE),
        (7.0, E.EXPIRE),
    ]:
        app.fire(event, now)
    assert app.state_log == [
        (1.0, S.NEW),
        (2.0, S.ACCEPTED),
        (3.0, S.STARTING),
        (4.0, S.RUNNING),
        (5.0, S.COMPLETING),
        (6.0, S.COMPLETED),
        (7.0, S.EXPIRED),
    ]


def test_fire_without_a_change_does_not_log() -> None:
    app = make_app(S.RUNNING)
    log_before = list(app.state_log)
    assert app.fire(E.RUN, 50.0) is S.RUNNING
    assert app.state_log == log_before


def test_completing_back_to_running_is_logged() -> None:
    app = make_app(S.COMPLETING)
    app.fire(E.RUN, 50.0)
    assert app.state_log[-2:] == [(2.0, S.COMPLETING), (50.0, S.RUNNING)]


@pytest.mark.parametrize(
    ("state", "event"),
    [
        (S.NEW, E.REJECT),
        (S.NEW, E.COMPLETE),
        (S.COMPLETING, E.COMPLETE),
        (S.FAILING, E.FAIL),
    ],
)
def test_entering_a_terminal_state_sets_finished_time(state: AppState, event: AppEvent) -> None:
    app = make_app(state)
    assert app.finished_time is None
    new = app.fire(event, 42.0)
    assert new in TERMINAL_STATES
    assert app.terminated
    assert app.finished_time == 42.0


@pytest.mark.parametrize("state", sorted(set(AppState) - TERMINAL_STATES))
def test_non_terminal_states_leave_finished_time_unset(state: AppState) -> None:
    app = make_app(state)
    assert not app.terminated
    assert app.finished_time is None


def test_terminal_states_are_rejected_completed_failed_expired() -> None:
    assert {S.REJECTED, S.COMPLETED, S.FAILED, S.EXPIRED} == TERMINAL_STATES


@pytest.mark.parametrize("state", sorted(TERMINAL_STATES - {S.EXPIRED}))
def test_terminated_states_only_expire(state: AppState) -> None:
    app = make_app(state)
    assert [e for e in AppEvent if app.can_fire(e)] == [E.EXPIRE]


def test_expired_is_final() -> None:
    app = make_app(S.EXPIRED)
    assert not any(app.can_fire(e) for e in AppEvent)
