"""How the fused kernels cut their work: blocks of whole 32-bit output words
(so threads never share a word) and the sizes from which they run on all
cores instead of one.
"""
from __future__ import annotations

WORDS = 1024  # output words per block of the packing kernels
SUB = 2048  # entries a drawing kernel draws and codes at a time (a multiple of 4: whole threefry
            # blocks; its words, entries and codes stay in L1 between its loops)
PARALLEL_MIN = 1 << 17  # below this many elements the serial kernels run
ROWS_PARALLEL_MIN = 1 << 18  # entries from which add and the low-rank products run on all cores
# (from 2**20 until 2026-12-06: at 2**18 the threaded add took 0.025 ms against NumPy's 0.034, at
# 1e6 0.072 against 0.148; the row-parallel c - a @ b.T halved the serial time from 362 x 362 up)
CUSTOM_CALL_MIN = 1 << 20  # entries from which JAX runs the low-rank products as host custom calls
