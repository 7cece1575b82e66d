"""kfsim: simulate, train and deploy gradient compression for data-parallel training."""
__version__ = "0.1.0"
