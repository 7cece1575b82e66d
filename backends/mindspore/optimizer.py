"""``DistributedOptimizer``: any MindSpore optimizer, its gradients exchanged through a kfsim compressor.

    from backends.mindspore import DistributedOptimizer   # importing it is the only set-up

    init()                                                 # mindspore.communication, under msrun
    opt = DistributedOptimizer(nn.Momentum(net.trainable_params(), 0.1, 0.9),
                               compression="ef(topk(ratio=0.01))")
    grad_fn = ms.value_and_grad(forward, None, opt.parameters)

    @ms.jit
    def train_step(x, y):
        loss, grads = grad_fn(x, y)
        opt(grads)                                         # exchange, decode, then the wrapped update
        return loss

In the spirit of Horovod's ``hvd.DistributedOptimizer(opt, compression=...)``:
``opt(grads)`` runs :func:`~backends.mindspore.data_parallel.kfsim_reducer`'s
graph (encode every gradient, one collective per bucket and round, decode the
mean) and hands the decoded mean to the wrapped optimizer. It is also an
optimizer to ``nn.TrainOneStepCell`` (``parameters`` is the wrapped one's), so
the ``grad_reducer`` line of :mod:`backends.mindspore.data_parallel` and this
wrapper are two spellings of one graph.

kfsim does the data parallelism, so MindSpore's own must stay off: with
``parallel_mode`` set to data or hybrid parallel, ``TrainOneStepCell`` would
all-reduce the gradients a second time (dense), which this refuses at
construction. Compressor state (EF residuals, PowerSGD's Q) and the step
counter are Parameters of ``opt.reducer``, so a checkpoint of the training
Cell holds them beside the optimizer's moments.
"""
from __future__ import annotations

from mindspore import nn

from backends.mindspore.data_parallel import kfsim_reducer

DP_MODES = ("data_parallel", "hybrid_parallel")


class DistributedOptimizer(nn.Cell):
    """``optimizer`` applying the mean gradient a kfsim compressor's exchange decodes.

    ``compression``: a spec string or a :class:`compressors.Compressor`; every other
    keyword (``n``, ``rank``, ``seed``, ``rng``, ``collective``, ``bucket_bytes``, ``step``,
    ``horizon``) is :func:`kfsim_reducer`'s. ValueError, before anything compiles, for a
    bad spec or option, an ``optimizer`` that is not an ``nn.Optimizer``, or MindSpore's
    own data parallelism switched on.
    """

    def __init__(self, optimizer, compression="none()", **reducer_opts):
        super().__init__(auto_prefix=False)
        import mindspore as ms

        if not isinstance(optimizer, nn.Optimizer):
            raise ValueError(f"DistributedOptimizer wraps a mindspore.nn.Optimizer, got {type(optimizer).__name__}")
        mode = ms.get_auto_parallel_context("parallel_mode")
        if mode in DP_MODES:
            raise ValueError(f"parallel_mode is {mode!r}: kfsim exchanges the gradients itself, and "
                             "TrainOneStepCell would all-reduce them a second time; leave parallel_mode "
                             "at 'stand_alone' (mindspore.reset_auto_parallel_context())")
        self.optimizer = optimizer
        self.reducer = kfsim_reducer(compression, optimizer.parameters, **reducer_opts)

    @property
    def parameters(self):
        """The wrapped optimizer's parameters, in gradient order (what ``TrainOneStepCell`` differentiates)."""
        return self.optimizer.parameters

    @property
    def learning_rate(self):
        return self.optimizer.learning_rate

    def accounting(self, step: int) -> dict:
        """The reducer's bytes and collectives per step at ``step`` (``kfsim_reducer``'s ``accounting``)."""
        return self.reducer.accounting(step)

    def construct(self, grads):
        return self.optimizer(self.reducer(grads))
