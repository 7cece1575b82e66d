"""Local SGD / DiLoCo as a pure definition (compressors.outer): schedule, outer step, edges, backends."""
from __future__ import annotations

import numpy as np
import pytest

import compressors as C
from compressors import outer
from compressors.state import named_leaves
from tests.backends.ops_backends import OPS_BACKENDS, get_ops, same_bits, to_numpy


def test_schedule_syncs_every_fragment_once_per_period_staggered():
    algo = outer.LocalSGD(8, fragments=2, delay=1)
    starts = [algo.starts(t) for t in range(16)]
    assert starts == [None, None, None, 0, None, None, None, 1] * 2
    lands = [algo.lands(t) for t in range(16)]
    assert lands == [None] * 4 + [0] + [None] * 3 + [1] + [None] * 3 + [0, None, None, None]
    # the documented rule: fragment f starts where (t // (H/F)) % F == f, at the block's last step
    assert all(f == (t // 4) % 2 for t, f in enumerate(starts) if f is not None)
    plain = outer.LocalSGD(1)
    assert [plain.starts(t) for t in range(3)] == [0, 0, 0] == [plain.lands(t) for t in range(3)]


@pytest.mark.parametrize("kw,mention", [
    (dict(local_steps=0), "local steps"), (dict(local_steps=True), "local steps"),
    (dict(local_steps=8, fragments=3), "multiple of fragments"), (dict(fragments=0), "fragments"),
    (dict(local_steps=4, delay=4), "below"), (dict(delay=-1), "delay"),
    (dict(outer_lr=0.0), "outer lr"), (dict(outer_lr=float("inf")), "outer lr"),
    (dict(outer_momentum=1.0), "outer momentum"), (dict(outer_momentum=-0.1), "outer momentum"),
])
def test_bad_hyper_parameters_are_one_line_errors(kw, mention):
    with pytest.raises(ValueError, match=mention) as e:
        outer.LocalSGD(**kw).check()
    assert "\n" not in str(e.value)


def test_fragments_are_contiguous_and_cover_every_tensor():
    names = ["a", "b", "c", "d", "e"]
    assert outer.fragments_of(names, 1) == (tuple(names),)
    assert outer.fragments_of(names, 2) == (("a", "b", "c"), ("d", "e"))
    assert outer.fragments_of(names, 5) == tuple((n,) for n in names)
    assert outer.fragments_of(["only"], 1) == (("only",),)
    with pytest.raises(ValueError, match="fragments"):
        outer.fragments_of(names, 6)
    with pytest.raises(ValueError, match="exceeds"):
        outer.LocalSGD(6, fragments=6).check(tensors=5)


def _params(ops, scale=1.0):
    rng = np.random.default_rng(1)
    return {"w": ops.asarray((scale * rng.standard_normal((6, 5))).astype(np.float32)),
            "s": ops.asarray(np.float32(scale * 0.5)),                 # a scalar tensor
            "e": ops.asarray(np.zeros((0,), np.float32)),              # an empty tensor
            "one": ops.asarray(np.float32([scale * 2.0]))}             # length 1


def _round(ops, comp, algo, lr=0.1, scale=1.0, n=3):
    """Two inner directions per worker, one exchange of every tensor, the outer update."""
    p = _params(ops, scale)
    o = outer.init_outer(ops, p)
    ws = [outer.init_worker(ops, comp, p) for _ in range(n)]
    rng = np.random.default_rng(2)
    for _ in range(2):
        ws = [outer.accumulate(ops, w, {k: ops.asarray((scale * rng.standard_normal(np.shape(v)))
                                                       .astype(np.float32)) for k, v in p.items()}, ())
              for w in ws]
    sent = [{k: to_numpy(w.accum[k]) for k in p} for w in ws]
    keys = [C.make_keys(ops, 0, 1, r) for r in range(n)]
    o, ws, res = outer.start(ops, comp, o, ws, keys, list(p))
    return p, sent, o, ws, outer.land(ops, algo, lr, o, ws, list(p))


def test_outer_nesterov_step_matches_the_formula():
    ops = get_ops("numpy")
    algo = outer.LocalSGD(2, outer_lr=0.7, outer_momentum=0.9)
    p, sent, mid, ws_mid, (o, ws) = _round(ops, C.parse("none()"), algo)
    for k in p:
        d = (sent[0][k] + sent[1][k] + sent[2][k]) / np.float32(3)
        np.testing.assert_allclose(to_numpy(mid.inflight[k]), d, rtol=1e-6, atol=0)
        m = d                                   # m0 = 0: m = 0.9 * 0 + d
        u = d + np.float32(0.9) * m
        want = to_numpy(p[k]) - np.float32(0.7 * 0.1) * u
        np.testing.assert_allclose(to_numpy(o.anchor[k]), want, rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(to_numpy(o.momentum[k]), m, rtol=1e-6)
        assert not np.any(to_numpy(o.inflight[k]))
        for w, s in zip(ws_mid, sent):
            assert np.array_equal(to_numpy(w.pending[k]), s[k]) and not np.any(to_numpy(w.accum[k]))
        for w in ws:  # landed: every worker's parameters are the new anchor
            assert not np.any(to_numpy(w.pending[k])) and not np.any(to_numpy(w.accum[k]))
            assert np.array_equal(to_numpy(outer.local_params(ops, 0.1, o, w)[k]), to_numpy(o.anchor[k]))


def test_without_momentum_nesterov_flag_is_irrelevant_and_plain_outer_step_is_averaging():
    ops = get_ops("numpy")
    a = _round(ops, C.parse("none()"), outer.LocalSGD(2, nesterov=True))[4][0]
    b = _round(ops, C.parse("none()"), outer.LocalSGD(2, nesterov=False))[4][0]
    assert all(np.array_equal(to_numpy(a.anchor[k]), to_numpy(b.anchor[k])) for k in a.anchor)
    assert not any(np.any(to_numpy(v)) for v in a.momentum.values())  # mu = 0 leaves the buffer alone


def test_error_feedback_is_kept_per_worker_and_state_is_named():
    ops = get_ops("numpy")
    _, sent, _, ws, _ = _round(ops, C.parse("ef(topk(ratio=0.2))"), outer.LocalSGD(2))
    res = [to_numpy(w.comp["w"].residual) for w in ws]
    assert not np.array_equal(res[0], res[1])       # each worker's own residual
    assert all(np.any(r) for r in res)
    names = [n for n, _ in named_leaves(ws[0])]
    assert {"accum/w", "pending/w", "accum/e", "comp/w/residual", "comp/s/residual"} <= set(names)
    assert not any(n.startswith("comp/e") for n in names)  # an empty tensor sends nothing, keeps no state
    assert [n for n, _ in named_leaves(outer.init_outer(ops, _params(ops)))][:3] == \
        ["anchor/e", "anchor/one", "anchor/s"]


@pytest.mark.parametrize("scale", [1.0, 1e-20, 1e-38, 1e38])
@pytest.mark.parametrize("spec", ["none()", "ef(topk(ratio=0.2))", "sumquant(bits=4, workers=16)"])
def test_backends_agree_bit_for_bit_at_extreme_magnitudes(spec, scale):
    algo = outer.LocalSGD(2, outer_lr=0.7, outer_momentum=0.9)
    outs = {}
    for b in OPS_BACKENDS:
        ops = get_ops(b)
        _, _, mid, _, (o, ws) = _round(ops, C.parse(spec), algo, scale=scale)
        outs[b] = [to_numpy(x) for _, x in named_leaves((mid.inflight, o, ws))]
    ref = outs[OPS_BACKENDS[0]]
    for b in OPS_BACKENDS[1:]:
        if scale < 1e-30:  # XLA on CPU flushes subnormal results to zero, NumPy keeps them
            tiny = np.finfo(np.float32).tiny
            assert all(np.allclose(x, y, rtol=0, atol=4 * tiny) for x, y in zip(ref, outs[b])), b
        else:
            assert all(same_bits(x, y) for x, y in zip(ref, outs[b])), b


def test_rank_deficient_zero_pseudo_gradients_leave_the_anchor():
    ops = get_ops("numpy")
    p = _params(ops)
    comp = C.parse("ef(topk(ratio=0.2))")
    o = outer.init_outer(ops, p)
    ws = [outer.init_worker(ops, comp, p) for _ in range(2)]
    o, ws, _ = outer.start(ops, comp, o, ws, [C.make_keys(ops, 0, 0, r) for r in range(2)], list(p))
    o, ws = outer.land(ops, outer.LocalSGD(1, outer_momentum=0.5), 0.1, o, ws, list(p))
    assert all(np.array_equal(to_numpy(o.anchor[k]), to_numpy(p[k])) for k in p)
