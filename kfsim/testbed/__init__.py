"""An emulated cluster on one Linux host, and the simulator checked against it.

* :mod:`netns` — one network namespace per worker, veth pairs into a bridge in a
  hub namespace, ``tc tbf`` shaping on both ends of every link; idempotent teardown.
* :mod:`counters` — bytes each worker actually sent (interface counters).
* :mod:`run` — one msrun per namespace (multi-node form), timeouts, process-group kill.
* :mod:`microbench` / ``workers/collective_bench.py`` — timed AllReduce / AllGather.
* :mod:`training` / ``workers/train_native.py`` — native data-parallel MLP steps.
* :mod:`compressed` — :mod:`kfsim.launch`'s worker (compressed reducer) on the testbed.
* :mod:`fit` — least squares for α, β, γ of MindSpore's echo ring ("mccl") and codec costs.
* :mod:`profile` / :mod:`calibrate` — fitted cluster profiles the simulator loads.
* :mod:`validate` — predicted versus measured, table and plot.

CLI: ``kfsim testbed``, ``kfsim calibrate``, ``kfsim validate`` (root only).
"""
