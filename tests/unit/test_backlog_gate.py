"""The credit an unlimited sender gets from readings of its queue's depth."""

import pytest

from drivers.backlog import BacklogGate


def test_no_credit_before_the_first_reading():
    gate = BacklogGate(100)
    assert gate.allow(64) == 0
    assert gate.wants_reading()


def test_credit_is_the_bound_less_the_depth_and_what_was_published_since_asking():
    gate = BacklogGate(100)
    gate.asked(published=0)
    assert not gate.wants_reading()  # one reading at a time
    gate.answered(depth=30, published=10)
    assert gate.credit == 60
    assert gate.allow(64) == 60 and gate.allow(1) == 0


def test_asks_again_once_half_the_credit_is_spent():
    gate = BacklogGate(100)
    gate.asked(0)
    gate.answered(depth=0, published=0)
    assert gate.allow(40) == 40 and not gate.wants_reading()
    assert gate.allow(10) == 10 and gate.wants_reading()


def test_a_queue_over_the_bound_gives_no_credit_until_it_drains():
    gate = BacklogGate(100)
    gate.asked(0)
    gate.answered(depth=500, published=0)
    assert gate.allow(64) == 0 and gate.wants_reading()
    gate.asked(0)
    gate.answered(depth=20, published=0)
    assert gate.allow(64) == 64


def test_a_lost_connection_forgets_the_credit_and_the_question():
    gate = BacklogGate(100)
    gate.asked(0)
    gate.answered(depth=0, published=0)
    gate.asked(10)
    gate.forget()
    assert gate.allow(1) == 0 and gate.wants_reading()


def test_the_bound_is_at_least_one():
    with pytest.raises(ValueError, match="at least 1"):
        BacklogGate(0)
