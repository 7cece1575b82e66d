"""Real data sets installed from OS packages (no downloads at run time).

* :mod:`kfsim.data.fashion_mnist` — Fashion-MNIST (Debian ``dataset-fashion-mnist``).
* :mod:`kfsim.data.kjv` — King James Bible text, char level (Debian ``bible-kjv``).

Each loader raises :class:`DataUnavailable` (a ``FileNotFoundError``) naming
the package to install when the data is absent.
"""
from kfsim.data.errors import DataUnavailable

__all__ = ["DataUnavailable"]
