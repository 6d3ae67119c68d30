import json
import math
import random

import pytest

from results.rundir.histogram import (
    MAX_VALUE_US,
    NUM_BUCKETS,
    LatencyHistogram,
    bucket_bounds,
    bucket_index,
)


def exact_percentile(sorted_values, q):
    """Nearest-rank percentile, the definition LatencyHistogram.percentile follows."""
    if q == 0:
        return sorted_values[0]
    rank = max(1, math.ceil(q * len(sorted_values) / 100))
    return sorted_values[rank - 1]


def hist_of(values):
    h = LatencyHistogram()
    for v in values:
        h.record(v)
    return h


@pytest.mark.parametrize(
    ("value", "index"),
    [
        (-5, 0),
        (0, 0),
        (1, 1),
        (63, 63),
        (64, 64),
        (65, 64),
        (66, 65),
        (127, 95),
        (128, 96),
        (131, 96),
        (132, 97),
        (2**20, (15 << 5) + 32),
        (MAX_VALUE_US, NUM_BUCKETS - 1),
        (2**50, NUM_BUCKETS - 1),
    ],
)
def test_bucket_index_table(value, index):
    assert bucket_index(value) == index


def _interesting_values():
    values = set(range(0, 5000))
    for e in range(6, 41):
        p = 2**e
        values.update({p - 1, p, p + 1, p + p // 3})
    values.update({2**20, MAX_VALUE_US})
    rng = random.Random(1)
    values.update(rng.randrange(MAX_VALUE_US) for _ in range(5000))
    return sorted(v for v in values if v <= MAX_VALUE_US)


def test_index_monotonic_and_bounds_contain_value():
    prev = -1
    for v in _interesting_values():
        idx = bucket_index(v)
        assert idx >= prev, v
        prev = idx
        low, high = bucket_bounds(idx)
        assert low <= v < high, (v, idx, low, high)


def test_buckets_are_contiguous_and_narrow():
    assert bucket_bounds(0) == (0, 1)
    for idx in range(NUM_BUCKETS):
        low, high = bucket_bounds(idx)
        assert bucket_index(low) == idx
        assert bucket_index(high - 1) == idx
        if idx < 64:
            assert (low, high) == (idx, idx + 1)
        else:
            assert (high - low) / low <= 1 / 32
        if idx + 1 < NUM_BUCKETS:
            assert bucket_bounds(idx + 1)[0] == high
    assert bucket_bounds(NUM_BUCKETS - 1)[1] == MAX_VALUE_US + 1


@pytest.mark.parametrize("index", [-1, NUM_BUCKETS, NUM_BUCKETS + 10])
def test_bucket_bounds_rejects_bad_index(index):
    with pytest.raises(ValueError):
        bucket_bounds(index)


def _uniform(rng):
    return [rng.randrange(0, 10_000) for _ in range(20_000)]


def _lognormal(rng):
    return [int(rng.lognormvariate(7, 1.5)) for _ in range(20_000)]


def _small(rng):
    return [rng.randrange(0, 64) for _ in range(5_000)]


def _wide(rng):
    return [rng.randrange(0, 2 ** rng.randrange(1, 40)) for _ in range(20_000)]


def _few(rng):
    return [rng.randrange(100, 1_000_000) for _ in range(7)]


@pytest.mark.parametrize("make", [_uniform, _lognormal, _small, _wide, _few])
def test_percentiles_match_exact_within_bucket_width(make):
    values = make(random.Random(42))
    h = hist_of(values)
    ordered = sorted(values)
    for q in [0, 0.1, 1, 10, 25, 50, 75, 90, 95, 99, 99.9, 99.99, 100]:
        exact = exact_percentile(ordered, q)
        got = h.percentile(q)
        assert abs(got - exact) <= 0.032 * exact, (q, exact, got)


def test_small_values_are_exact():
    h = hist_of([5, 5, 10, 63])
    assert [h.percentile(q) for q in (0, 25, 50, 75, 100)] == [5, 5, 5, 10, 63]


def test_exact_stats():
    values = [100, 7, 123_456, 9_999, 0]
    h = hist_of(values)
    assert h.count == 5
    assert h.total_us == sum(values)
    assert h.min_us == 0
    assert h.max_us == 123_456
    assert h.mean_us() == pytest.approx(sum(values) / 5)
    assert h.percentile(0) == 0.0
    assert h.percentile(100) == 123_456.0


def test_single_value_percentiles_are_that_value():
    h = hist_of([1_000_003])
    for q in (0, 1, 50, 99.9, 100):
        assert h.percentile(q) == 1_000_003


def test_empty():
    h = LatencyHistogram()
    assert h.count == 0
    assert h.percentile(50) == 0.0
    assert h.mean_us() == 0.0
    assert (h.min_us, h.max_us) == (0, 0)
    assert h.to_sparse() == {}


@pytest.mark.parametrize("q", [-0.1, 100.1, float("nan")])
def test_percentile_rejects_out_of_range(q):
    with pytest.raises(ValueError):
        hist_of([1]).percentile(q)


@pytest.mark.parametrize(
    ("value", "stored"),
    [(-1, 0), (-(10**9), 0), (MAX_VALUE_US + 1, MAX_VALUE_US), (2**60, MAX_VALUE_US)],
)
def test_out_of_range_values_clamp(value, stored):
    h = hist_of([value])
    assert (h.min_us, h.max_us, h.total_us) == (stored, stored, stored)
    assert h.to_sparse() == {bucket_index(stored): 1}


@pytest.mark.parametrize(("value", "n"), [(0, 3), (70, 1), (12_345, 1000), (-4, 2), (2**45, 2)])
def test_record_many_equals_repeated_record(value, n):
    many = LatencyHistogram()
    many.record(500)
    many.record_many(value, n)
    single = hist_of([500] + [value] * n)
    assert many.to_dict() == single.to_dict()


def test_record_many_zero_is_noop_and_negative_rejected():
    h = LatencyHistogram()
    h.record_many(10, 0)
    assert h.count == 0
    assert h.to_dict() == LatencyHistogram().to_dict()
    with pytest.raises(ValueError):
        h.record_many(10, -1)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ([1, 2, 3], [1000, 2000]),
        ([], [5, 500, 50_000]),
        ([5, 500, 50_000], []),
        ([], []),
        ([10**9], [0]),
    ],
)
def test_merge_equals_recording_all_into_one(a, b):
    ha, hb = hist_of(a), hist_of(b)
    ha.merge(hb)
    assert ha.to_dict() == hist_of(a + b).to_dict()
    assert hb.to_dict() == hist_of(b).to_dict()


def test_merge_random():
    rng = random.Random(7)
    a = _lognormal(rng)
    b = _wide(rng)
    ha = hist_of(a)
    ha.merge(hist_of(b))
    whole = hist_of(a + b)
    assert ha.to_dict() == whole.to_dict()
    for q in (50, 99, 99.9):
        assert ha.percentile(q) == whole.percentile(q)


@pytest.mark.parametrize("values", [[], [0], [1, 64, 65, 2**20], _wide(random.Random(3))])
def test_dict_round_trip_through_json(values):
    h = hist_of(values)
    data = json.loads(json.dumps(h.to_dict()))
    assert all(isinstance(k, str) for k in data["buckets"])
    back = LatencyHistogram.from_dict(data)
    assert back.to_dict() == h.to_dict()
    assert (back.count, back.total_us, back.min_us, back.max_us) == (
        h.count,
        h.total_us,
        h.min_us,
        h.max_us,
    )


def test_from_dict_rejects_count_mismatch():
    data = hist_of([1, 2, 3]).to_dict()
    data["count"] = 4
    with pytest.raises(ValueError, match="count"):
        LatencyHistogram.from_dict(data)


def test_sparse_round_trip_with_exact_stats():
    h = hist_of([3, 3, 700, 90_000])
    back = LatencyHistogram.from_sparse(
        h.to_sparse(), min_us=h.min_us, max_us=h.max_us, total_us=h.total_us
    )
    assert back.to_dict() == h.to_dict()


def test_from_sparse_derives_stats_from_buckets():
    idx = bucket_index(1000)
    low, high = bucket_bounds(idx)
    h = LatencyHistogram.from_sparse({3: 2, idx: 1})
    assert h.count == 3
    assert h.min_us == 3
    assert h.max_us == high - 1
    assert h.total_us == round(3 * 2 + (low + high - 1) / 2)


@pytest.mark.parametrize("sparse", [{-1: 1}, {NUM_BUCKETS: 1}, {5: -1}])
def test_from_sparse_rejects_bad_input(sparse):
    with pytest.raises(ValueError):
        LatencyHistogram.from_sparse(sparse)


def test_reset():
    h = hist_of([1, 100, 10_000])
    h.reset()
    assert h.to_dict() == LatencyHistogram().to_dict()
    h.record(42)
    assert (h.count, h.min_us, h.max_us) == (1, 42, 42)


def test_merging_a_histogram_into_itself_doubles_it():
    histogram = LatencyHistogram()
    for value in (0, 63, 64, 5_000, 5_000, 10**9):
        histogram.record(value)
    before = histogram.to_sparse()
    histogram.merge(histogram)
    assert histogram.to_sparse() == {i: 2 * c for i, c in before.items()}
    assert histogram.count == 12 and histogram.max_us == 10**9
