"""Temporary provisioning errors are tried again after a pause; permanent ones are not."""

import pytest

from orchestrator.errors import ProvisionError
from orchestrator.retry import retrying
from tests.fakes import FakeClock


def flaky(*errors):
    calls = []

    def action():
        calls.append(1)
        if len(calls) <= len(errors):
            raise errors[len(calls) - 1]
        return "up"
    return action, calls


def test_a_temporary_error_is_tried_again_after_a_pause():
    clock, heard = FakeClock(0.0), []
    action, calls = flaky(ProvisionError("booting", temporary=True))
    assert retrying(action, clock=clock, pause_s=5.0,
                    said=lambda attempt, error: heard.append(attempt)) == "up"
    assert len(calls) == 2 and heard == [1] and clock.monotonic() == 5.0


def test_a_permanent_error_and_the_last_temporary_one_are_raised():
    action, calls = flaky(ProvisionError("port 5672 in use"))
    with pytest.raises(ProvisionError, match="in use"):
        retrying(action, clock=FakeClock())
    assert len(calls) == 1
    action, calls = flaky(*[ProvisionError("503", temporary=True)] * 3)
    with pytest.raises(ProvisionError, match="503"):
        retrying(action, attempts=3, clock=FakeClock())
    assert len(calls) == 3
