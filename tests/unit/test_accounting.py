import zlib

import pytest

from drivers import protocol
from drivers.accounting import SequenceTracker, merge_exports, reconcile
from orchestrator.run.accounting import account
from tests.unit.test_controller import scenario


def tracker_of(pairs):
    t = SequenceTracker()
    for producer_id, seq in pairs:
        t.record(producer_id, seq)
    return t


@pytest.mark.parametrize(
    ("seqs", "received", "duplicates", "out_of_order"),
    [
        ([], 0, 0, 0),
        ([0, 1, 2, 3], 4, 0, 0),
        ([0, 2, 5], 3, 0, 0),
        ([0, 0], 2, 1, 0),
        ([3, 3, 3], 3, 2, 0),
        ([2, 1, 0], 3, 0, 2),
        ([0, 5, 3, 4, 6], 5, 0, 2),
        ([0, 5, 3, 5, 3], 5, 2, 1),
        ([100_000, 7, 100_000], 3, 1, 1),
    ],
)
def test_local_counters(seqs, received, duplicates, out_of_order):
    t = tracker_of((1, s) for s in seqs)
    assert (t.received, t.duplicates, t.out_of_order) == (received, duplicates, out_of_order)
    assert t.unique == received - duplicates


def test_order_is_tracked_per_producer():
    t = tracker_of([(1, 10), (2, 0), (2, 1), (1, 11)])
    assert t.out_of_order == 0
    t.record(2, 0)
    assert t.duplicates == 1
    t.record(1, 0)
    assert t.out_of_order == 1


def test_round_robin_split_merges_to_zero_missing():
    a, b = SequenceTracker(), SequenceTracker()
    for seq in range(1000):
        (a if seq % 2 == 0 else b).record(7, seq)
    merged = merge_exports([a.export(), b.export()])
    assert merged.unique == 1000
    assert merged.cross_duplicates == 0
    assert merged.per_producer_unique == {7: 1000}
    assert merged.missing(7, 1000) == 0


def test_dropped_seq_shows_as_missing():
    a, b, c = SequenceTracker(), SequenceTracker(), SequenceTracker()
    trackers = [a, b, c]
    for seq in range(10_000):
        if seq != 4321:
            trackers[seq % 3].record(1, seq)
    merged = merge_exports(t.export() for t in trackers)
    assert merged.missing(1, 10_000) == 1
    assert merged.unique == 9_999


@pytest.mark.parametrize(
    ("seen", "sent", "missing"),
    [
        ([], 10, 10),
        ([0, 1, 2], 3, 0),
        ([0, 1, 2], 5, 2),
        ([0, 2, 4], 5, 2),
        ([0, 1, 2, 50], 3, 0),
        ([5], 0, 0),
        ([9], 10, 9),
        (list(range(8)), 8, 0),
        (list(range(8)), 9, 1),
    ],
)
def test_missing_counts_only_seqs_below_sent(seen, sent, missing):
    merged = merge_exports([tracker_of((3, s) for s in seen).export()])
    assert merged.missing(3, sent) == missing


def test_missing_for_unknown_producer_is_everything():
    merged = merge_exports([tracker_of([(1, 0)]).export()])
    assert merged.missing(2, 25) == 25


def test_same_seq_in_two_trackers_is_cross_duplicate():
    a = tracker_of([(1, 0), (1, 1), (1, 2)])
    b = tracker_of([(1, 2), (1, 3)])
    merged = merge_exports([a.export(), b.export()])
    assert merged.unique == 4
    assert merged.cross_duplicates == 1
    assert merged.missing(1, 4) == 0
    assert a.duplicates == b.duplicates == 0


def test_local_duplicate_is_not_a_cross_duplicate():
    a = tracker_of([(1, 0), (1, 0), (1, 1)])
    merged = merge_exports([a.export()])
    assert a.duplicates == 1
    assert merged.unique == 2
    assert merged.cross_duplicates == 0


def test_several_producers_and_trackers():
    a = tracker_of([(1, 0), (1, 1), (2, 0), (3, 200)])
    b = tracker_of([(2, 1), (2, 0), (1, 2)])
    c = tracker_of([(3, 200), (2, 0)])
    merged = merge_exports([a.export(), b.export(), c.export()])
    assert merged.per_producer_unique == {1: 3, 2: 2, 3: 1}
    assert merged.unique == 6
    assert merged.cross_duplicates == 3
    assert merged.missing(1, 3) == 0
    assert merged.missing(2, 3) == 1
    assert merged.missing(3, 201) == 200


def test_merge_of_nothing():
    merged = merge_exports([])
    assert (merged.unique, merged.cross_duplicates, merged.per_producer_unique) == (0, 0, {})
    assert merged.missing(1, 5) == 5


def test_export_is_compressed_little_endian_bitmap():
    t = tracker_of([(4, 0), (4, 9), (4, 5000)])
    export = t.export()
    assert set(export) == {4}
    bits = int.from_bytes(zlib.decompress(export[4]), "little")
    assert bits == (1 << 0) | (1 << 9) | (1 << 5000)
    assert len(export[4]) < 5000 // 8


_HEAD = "sent 1000 = received {0} + queued {1} + lost {2} (nacked {3}, not republished {3})"


# inputs: (sent, confirmed, nacked, received_unique, duplicates, still_queued)
# expected: (lost, unexplained, balanced)
@pytest.mark.parametrize(
    ("inputs", "expected", "explain"),
    [
        (
            (1000, 1000, 0, 1000, 0, 0),
            (0, 0, True),
            _HEAD.format(1000, 0, 0, 0) + ": balanced",
        ),
        (
            (1000, None, 0, 990, 0, 5),
            (5, 5, False),
            _HEAD.format(990, 5, 5, 0) + ": 5 messages unaccounted for",
        ),
        (
            (1000, 995, 5, 990, 0, 5),
            (5, 0, True),
            _HEAD.format(990, 5, 5, 5) + ": balanced",
        ),
        (
            (1000, None, 2, 990, 0, 0),
            (10, 8, False),
            _HEAD.format(990, 0, 10, 2) + ": 8 messages unaccounted for",
        ),
        (
            (1000, None, 5, 998, 0, 0),
            (2, 3, False),
            _HEAD.format(998, 0, 2, 5) + ": 3 nacked messages were received or queued anyway",
        ),
        (
            (1000, None, 0, 1000, 0, 3),
            (0, 3, False),
            "sent 1000 < received 1000 + queued 3 (nacked 0, not republished 0): "
            "3 more messages received or queued than sent and not nacked",
        ),
        (
            (1000, None, 0, 1000, 7, 0),
            (0, 0, False),
            _HEAD.format(1000, 0, 0, 0) + ": 7 duplicate deliveries",
        ),
        (
            (1000, 990, 0, 1000, 0, 0),
            (0, 0, True),
            _HEAD.format(1000, 0, 0, 0) + ": 10 sends neither confirmed nor nacked",
        ),
        (
            (1000, 1000, 5, 995, 0, 0),
            (5, 0, True),
            _HEAD.format(995, 0, 5, 5) + ": confirms + nacks exceed sends by 5",
        ),
        (
            (0, 0, 0, 0, 0, 0),
            (0, 0, True),
            "sent 0 = received 0 + queued 0 + lost 0 (nacked 0, not republished 0): balanced",
        ),
    ],
)
def test_reconcile(inputs, expected, explain):
    sent, confirmed, nacked, received, duplicates, queued = inputs
    r = reconcile(sent, confirmed, nacked, received, duplicates, queued)
    assert (r.lost, r.unexplained, r.balanced) == expected
    assert (r.sent, r.confirmed, r.nacked, r.received, r.duplicates, r.still_queued) == inputs
    assert r.explain() == explain


def test_reconcile_spec_example():
    r = reconcile(
        sent=1000, confirmed=None, nacked=0, received_unique=990, duplicates=0, still_queued=5
    )
    assert r.explain() == (
        "sent 1000 = received 990 + queued 5 + lost 5 (nacked 0, not republished 0): "
        "5 messages unaccounted for"
    )


def test_reconcile_combines_problems():
    r = reconcile(
        sent=100, confirmed=90, nacked=0, received_unique=95, duplicates=2, still_queued=0
    )
    assert r.explain() == (
        "sent 100 = received 95 + queued 0 + lost 5 (nacked 0, not republished 0): "
        "5 messages unaccounted for; 2 duplicate deliveries; 10 sends neither confirmed nor nacked"
    )


@pytest.mark.parametrize(
    "field", ["sent", "confirmed", "nacked", "received_unique", "duplicates", "still_queued"]
)
def test_reconcile_rejects_negative(field):
    args = dict(sent=1, confirmed=1, nacked=0, received_unique=1, duplicates=0, still_queued=0)
    args[field] = -1
    with pytest.raises(ValueError, match=field):
        reconcile(**args)


def test_unknown_queue_depths_leave_loss_unknown():
    r = reconcile(100, None, 0, 90, 0, None)
    assert (r.still_queued, r.lost, r.balanced) == (None, None, False)
    assert "still queued unknown" in r.explain() and "loss is unknown" in r.explain()


def _books(received: int, **counters: int):
    """The run's accounting of one producer that sent 100 messages, ``received`` of them
    arrived, with the agents' nack counters split over two snapshots."""
    tracker = SequenceTracker()
    for seq in range(received):
        tracker.record(1, seq)
    halves = [{k: v // 2 for k, v in counters.items()},
              {k: v - v // 2 for k, v in counters.items()}]
    snapshots = [protocol.Snapshot(monotonic_s=0.0, **half) for half in halves]
    spec = scenario([{"rate_per_sender": 10, "hold": "1s"}])
    return account([protocol.Accounting({1: 100}, {"": tracker.export()})], snapshots, spec, 0)


def test_nacked_counts_messages_once_and_the_balance_uses_those_never_published_again():
    # 10 messages nacked, 4 of them nacked again after their republish, all 14 republishes
    # made: every nacked message was published again, so nothing is lost
    books = _books(100, confirmed=100, nacked=10, nacks_repeated=4, nacks_republished=14,
                   republished=20)
    assert (books.result.nacked, books.result.not_republished) == (10, 0)
    assert books.result.lost == 0 and books.result.unexplained == 0
    assert books.extras["republished"] == 20 and books.extras["nacks_repeated"] == 4
    assert "(nacked 10, not republished 0)" in books.result.explain()
    # 3 of them nacked last and never published again: lost, and explained by the nacks
    books = _books(97, confirmed=97, nacked=10, nacks_repeated=4, nacks_republished=11)
    assert (books.result.nacked, books.result.not_republished) == (10, 3)
    assert books.result.lost == 3 and books.result.unexplained == 0
    assert "(nacked 10, not republished 3)" in books.result.explain()


def test_with_an_agent_lost_no_producer_is_said_missing_what_its_receivers_may_have_had():
    from orchestrator.run.agentloss import LostAgent
    tracker = SequenceTracker()
    for seq in range(60):  # the live agent's receiver got 60 of producer 1's 100
        tracker.record(1, seq)
    gone = LostAgent(1, "h", "refused", 5.0, 4.0, protocol.Snapshot(0.0, sent=0, received=40),
                     0, 1)
    spec = scenario([{"rate_per_sender": 10, "hold": "1s"}])
    report = protocol.Accounting({1: 100}, {"": tracker.export()})
    done = account([report], [protocol.Snapshot(0.0)], spec, 0, [gone])
    assert done.missing == {} and done.result.lost is None
    assert account([report], [protocol.Snapshot(0.0)], spec, 0).missing == {1: 40}
