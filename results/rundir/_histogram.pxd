# The compiled core of results.rundir.histogram.LatencyHistogram, for other compiled modules.

cdef class HistogramCore:
    cdef public list _counts
    cdef public long long count, total_us, _min, _max
    cdef void add(self, long long value_us)
