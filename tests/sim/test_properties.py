"""Properties of the pipeline and the closed forms (hypothesis)."""
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kfsim.sim import collectives as cf
from kfsim.sim.pipeline import schedule

times = st.lists(st.floats(0.0, 1.0), min_size=1, max_size=20)


@settings(max_examples=60, deadline=None)
@given(comm=times, fwd=st.floats(0, 1), bwd=st.floats(0, 2), opt=st.floats(0, 0.1), data=st.data())
def test_overlap_never_slower_and_bounded_below(comm, fwd, bwd, opt, data):
    B = len(comm)
    enc = data.draw(st.lists(st.floats(0, 0.1), min_size=B, max_size=B))
    dec = data.draw(st.lists(st.floats(0, 0.1), min_size=B, max_size=B))
    frac = np.sort(data.draw(st.lists(st.floats(0, 1), min_size=B, max_size=B)))
    frac[-1] = 1.0
    ov = schedule(fwd, bwd, opt, frac, enc, comm, dec, overlap=True)
    no = schedule(fwd, bwd, opt, frac, enc, comm, dec, overlap=False)
    assert ov.total_s <= no.total_s + 1e-9
    assert ov.total_s >= fwd + bwd + opt + sum(enc) + sum(dec) - 1e-9
    assert ov.total_s >= fwd + sum(comm) + opt - 1e-9
    assert abs(ov.total_s - (ov.compute_s + ov.codec_s + ov.exposed_comm_s + ov.idle_s)) < 1e-9


@settings(max_examples=60, deadline=None)
@given(p=st.integers(2, 4096), n=st.floats(1.0, 1e10), a=st.floats(0, 1e-3), b=st.floats(1e-12, 1e-7))
def test_collective_orderings(p, n, a, b):
    ring = cf.ring_allreduce(p, n, a, b)
    # bandwidth term never below the 2(p−1)/p·nβ lower bound; all-gather of n/p each = half an all-reduce
    assert ring >= 2 * (p - 1) / p * n * b * (1 - 1e-12)
    assert cf.ring_allgather(p, n / p, a, b) <= ring
    # more bandwidth never hurts
    assert cf.ring_allreduce(p, n, a, b / 2) <= ring
    # the echo ring is exactly twice the textbook ring without reduction cost
    assert np.isclose(cf.mccl_allreduce(p, n, a, b), 2 * ring)
