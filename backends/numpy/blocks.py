"""How the fused kernels cut their work: blocks of whole 32-bit output words
(so threads never share a word) and the sizes from which they run on all
cores instead of one.
"""
from __future__ import annotations

WORDS = 1024  # output words per block of the packing kernels
PARALLEL_MIN = 1 << 17  # below this many elements the serial kernels run
ROWS_PARALLEL_MIN = 1 << 20  # entries from which add and the low-rank products run on all cores
