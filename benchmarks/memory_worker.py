"""Peak resident memory of one attention method, measured in a process of its own.

Run by ``library.py`` as ``python memory_worker.py METHOD T [T ...]``; prints one JSON object
mapping each T to the growth of the resident set (bytes) during a single call.

Why a separate process and the resident set: ``tracemalloc`` sees only Python's allocator, not
PyTorch's, and counting tensors at the dispatcher (``attention_lab.efficient.peak_memory``)
misses the scratch buffers a fused kernel such as ``F.scaled_dot_product_attention`` allocates
inside itself. The kernel's view of the operating system does not miss them: the peak resident
set (``VmHWM`` in ``/proc/self/status``), reset before each call by writing 5 to
``/proc/self/clear_refs``, minus the resident set just before the call. The parent sets
``MALLOC_MMAP_THRESHOLD_`` so that glibc serves every large block with ``mmap`` and returns it to
the system on ``free``; otherwise freed blocks stay in the heap and a later, larger call would
reuse them without growing the resident set.
"""

from __future__ import annotations

import gc
import json
import sys

import torch
import torch.nn.functional as F

from attention_lab.attention import scaled_dot_product_attention
from attention_lab.efficient import tiled_attention

BATCH, HEADS, HEAD_DIM, BLOCK_SIZE = 1, 2, 64, 128

METHODS = {
    "torch_sdpa": lambda q, k, v: F.scaled_dot_product_attention(q, k, v),
    "tiled": lambda q, k, v: tiled_attention(q, k, v, block_size=BLOCK_SIZE),
    "library_full": lambda q, k, v: scaled_dot_product_attention(q, k, v),
}


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not found in /proc/self/status")


def peak_growth(method: str, seq_len: int) -> int:
    """Bytes by which the resident set grows at its peak during one call."""
    generator = torch.Generator().manual_seed(0)
    shape = (BATCH, HEADS, seq_len, HEAD_DIM)
    q, k, v = (torch.randn(shape, generator=generator) for _ in range(3))
    gc.collect()
    before = _status_kib("VmRSS")
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")  # resets VmHWM to the current resident set
    with torch.inference_mode():
        output = METHODS[method](q, k, v)
    peak = _status_kib("VmHWM")
    del output
    return 1024 * (peak - before)


def main() -> None:
    torch.set_num_threads(1)
    method, lengths = sys.argv[1], [int(t) for t in sys.argv[2:]]
    peak_growth(method, 64)  # load kernels and start the thread pool before measuring
    result = {seq_len: peak_growth(method, seq_len) for seq_len in lengths}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
