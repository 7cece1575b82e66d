"""``run_steps(model=...)``: the testbed's worker trains the named model (the plan benchmark runs the
Fashion-MNIST MLP on it); ``--hidden`` goes only with the wide benchmark MLP."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from kfsim.testbed import compressed


class Stop(Exception):
    pass


@pytest.mark.parametrize("model, hidden", [("mlp", None), ("wide", "64")])
def test_run_steps_hands_the_model_to_the_worker(tmp_path, monkeypatch, model, hidden):
    seen = []

    def fake_run_job(tb, script, args=(), **kw):
        seen.append(list(args))
        raise Stop

    monkeypatch.setattr(compressed, "run_job", fake_run_job)
    tb = SimpleNamespace(shape=SimpleNamespace(rate_mbit=50.0))
    with pytest.raises(Stop):
        compressed.run_steps(tb, 4, "fp16()", hidden=64, batch=8, log_root=tmp_path, model=model)
    args = seen[0]
    assert args[args.index("--model") + 1] == model
    assert (args[args.index("--hidden") + 1] if "--hidden" in args else None) == hidden
    assert (model if model != "wide" else "h64") in args[args.index("--run-dir") + 1]
