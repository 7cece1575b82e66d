"""Simulated data-parallel training with real numerics (JAX).

* :mod:`kfsim.train.models` — MLP, small CNN, char-level LM (parameters as dicts of NumPy arrays).
* :mod:`kfsim.train.tasks` — model + data set pairs (Fashion-MNIST, KJV text).
* :mod:`kfsim.train.loop` — N simulated workers, compressed exchange, simulated clock.
"""
