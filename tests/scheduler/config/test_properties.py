"""Queue property values: ``preemption.policy`` and ``preemption.delay`` read as YuniKorn 1.3+
reads them (``policies.PreemptionPolicyFromString``, ``objects.convertDelay``)."""

from __future__ import annotations

import pytest

from scheduler.config._properties import preemption_delay, preemption_policy


@pytest.mark.parametrize(
    ("value", "policy"),
    [
        ("default", "default"),
        ("fence", "fence"),
        ("disabled", "disabled"),
        ("Fence", "fence"),
        ("DISABLED", "disabled"),
        ("Default", "default"),
        ("", "default"),
    ],
)
def test_preemption_policy_is_read_in_any_case(value: str, policy: str) -> None:
    assert preemption_policy(value) == policy


@pytest.mark.parametrize("value", ["sometimes", "fenced", " fence", "none", "off"])
def test_other_preemption_policies_are_refused(value: str) -> None:
    with pytest.raises(ValueError, match="expected default, fence or disabled"):
        preemption_policy(value)


@pytest.mark.parametrize(
    ("value", "seconds"), [("30s", 30.0), ("1m30s", 90.0), ("500ms", 0.5), ("1h", 3600.0)]
)
def test_preemption_delay_is_a_go_duration(value: str, seconds: float) -> None:
    assert preemption_delay(value) == seconds


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("30", "missing unit"),
        ("abc", "invalid duration"),
        ("", "invalid duration"),
        ("0", "above zero"),
        ("0s", "above zero"),
        ("-5s", "above zero"),
    ],
)
def test_a_delay_that_is_no_duration_or_not_above_zero_is_refused(value: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        preemption_delay(value)
