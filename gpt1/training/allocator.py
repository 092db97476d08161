"""glibc's malloc told to keep the memory a CPU training step frees, for the next step to reuse.

By default glibc hands blocks above a threshold that adapts between 128 kB and 32 MB to the
kernel with mmap and munmap, and trims the heap's top back to 128 kB of free space: a step's
activations, dropout masks and gradients (megabytes each) then return as fresh pages, which the
kernel maps and zeroes on first touch. With both thresholds fixed high, freed blocks stay in the
heap and the next step's allocations of the same sizes reuse them.
Measured: bench/results/findings.md ("Allocator: freed blocks kept for the next step").
"""

from __future__ import annotations

import ctypes
import functools
import platform

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
# Blocks below this come from the heap: glibc's largest mmap threshold on 64-bit systems.
MMAP_THRESHOLD = 32 * 2**20
# Free space kept at the heap's top before any is returned: mallopt's largest (a C int).
TRIM_THRESHOLD = 2**31 - 1


@functools.cache
def keep_freed_memory() -> bool:
    """Set glibc's mmap and trim thresholds for this process (once); False where the C library
    is not glibc (macOS, musl), whose allocators are left as they are."""
    if platform.libc_ver()[0] != "glibc":
        return False
    libc = ctypes.CDLL(None)
    # the mmap threshold first, and the trim threshold only once it is set: a fixed trim
    # threshold alone also fixes the mmap threshold, at 128 kB (findings.md)
    return bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)
                and libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
