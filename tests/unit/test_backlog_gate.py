"""The credit an unlimited sender gets from readings of its queue's depth."""

import pytest

from drivers.backlog import BacklogGate


def test_no_credit_before_the_first_reading():
    gate = BacklogGate(100)
    assert gate.allow(64) == 0
    assert gate.wants_reading(now=1.0)


def test_credit_is_the_bound_less_the_depth_and_what_was_published_since_asking():
    gate = BacklogGate(100)
    gate.asked(published=0)
    assert not gate.wants_reading(now=1.0)  # one reading at a time
    gate.answered(depth=30, published=10, now=1.0)
    assert gate.credit == 60
    assert gate.allow(64) == 60 and gate.allow(1) == 0


def test_asks_again_once_the_answer_came_and_the_least_interval_passed():
    gate = BacklogGate(100, min_interval_s=0.005)
    gate.asked(0)
    assert not gate.wants_reading(now=1.0)
    gate.answered(depth=0, published=0, now=1.0)
    assert not gate.wants_reading(now=1.004) and gate.wants_reading(now=1.006)
    assert gate.allow(40) == 40


def test_a_queue_over_the_bound_gives_no_credit_until_it_drains():
    gate = BacklogGate(100)
    gate.asked(0)
    gate.answered(depth=500, published=0, now=1.0)
    assert gate.allow(64) == 0 and gate.wants_reading(now=1.01)
    gate.asked(0)
    gate.answered(depth=20, published=0, now=1.0)
    assert gate.allow(64) == 64


def test_a_lost_connection_forgets_the_credit_and_the_question():
    gate = BacklogGate(100)
    gate.asked(0)
    gate.answered(depth=0, published=0, now=1.0)
    gate.asked(10)
    gate.forget()
    assert gate.allow(1) == 0 and gate.wants_reading(now=1.0)


def test_the_bound_is_at_least_one():
    with pytest.raises(ValueError, match="at least 1"):
        BacklogGate(0)
