"""Every task trains: the CNN on Fashion-MNIST and the char-LM on the KJV text reduce their loss."""
from __future__ import annotations

import numpy as np

from kfsim.train import loop, tasks
from kfsim.train.config import RunConfig


def test_cnn_learns(fmnist_small):
    task = fmnist_small._replace(name="fmnist-cnn", model="cnn")
    res = loop.run(RunConfig(task="fmnist-cnn", compressor="ef(topk(ratio=0.1))", workers=2, batch=32, steps=25,
                             eval_every=25, lr=0.1), task=task)
    losses = [s.loss for s in res.steps]
    assert np.mean(losses[-5:]) < np.mean(losses[:5])


def test_charlm_learns(kjv_available):
    task = tasks.load("kjv-charlm", limit_train=4096, limit_test=512)
    assert task.x_train.shape[1] == 16 and task.x_train.dtype == np.int32
    res = loop.run(RunConfig(task="kjv-charlm", compressor="powersgd(rank=2)", workers=2, batch=64, steps=20,
                             eval_every=20, lr=0.5), task=task)
    losses = [s.loss for s in res.steps]
    assert np.mean(losses[-5:]) < np.mean(losses[:5]) - 0.3
    assert res.summary["final_accuracy"] > 1 / 73
