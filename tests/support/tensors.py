"""Inputs and tolerances shared by the library's tests."""

from __future__ import annotations

import torch

# Half-precision results are compared with a float32 reference computed from the same
# (rounded) inputs, so the tolerance covers only the rounding inside the computation.
HALF_TOLERANCE = {
    torch.float16: {"atol": 2e-3, "rtol": 2e-3},
    torch.bfloat16: {"atol": 2e-2, "rtol": 2e-2},
}


def random_inputs(shapes, dtype=torch.float32, seed=0):
    """Seeded standard-normal tensors, drawn in float64 then cast, one per shape."""
    generator = torch.Generator().manual_seed(seed)
    return [
        torch.randn(shape, generator=generator, dtype=torch.float64).to(dtype) for shape in shapes
    ]
