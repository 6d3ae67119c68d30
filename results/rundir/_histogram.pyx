# cython: language_level=3, boundscheck=False, wraparound=False
"""The compiled twin of :class:`results.rundir.histogram.HistogramCore`: the same buckets, sum,
min and max for the same values (``tests/unit/test_compiled.py``)."""

cdef extern from *:
    int __builtin_clzll(unsigned long long)

cdef enum:
    SUB_BITS = 5
    EXACT_LIMIT = 64
    SHIFT_BASE = 6

cdef long long MAX_VALUE_US = (1 << 40) - 1


cdef class HistogramCore:
    """Bucket counts (a list, shared with the Python methods), count, sum, min and max."""

    cdef void add(self, long long value_us):
        cdef long long index, s
        if value_us < EXACT_LIMIT:
            if value_us < 0:
                value_us = 0
            index = value_us
        else:
            if value_us > MAX_VALUE_US:
                value_us = MAX_VALUE_US
            s = (64 - __builtin_clzll(<unsigned long long>value_us)) - SHIFT_BASE
            index = (s << SUB_BITS) + (value_us >> s)
        counts = self._counts
        counts[index] += 1
        self.count += 1
        self.total_us += value_us
        if value_us < self._min:
            self._min = value_us
        if value_us > self._max:
            self._max = value_us

    def record(self, long long value_us):
        """Record one latency in integer microseconds."""
        self.add(value_us)
