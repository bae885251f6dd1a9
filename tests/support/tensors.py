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


def rope_scalings(factor: float, original: int) -> dict[str, dict | None]:
    """A RoPE scaling dictionary of each kind (``transformers``' form), stretching a model
    trained on ``original`` positions ``factor`` times: ``"none"`` (``None``), ``"linear"``,
    ``"dynamic"``, ``"yarn"`` and ``"llama3"``."""
    return {
        "none": None,
        "linear": {"rope_type": "linear", "factor": factor},
        "dynamic": {
            "rope_type": "dynamic",
            "factor": factor,
            "original_max_position_embeddings": original,
        },
        "yarn": {
            "rope_type": "yarn",
            "factor": factor,
            "original_max_position_embeddings": original,
        },
        "llama3": {
            "rope_type": "llama3",
            "factor": factor,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": original,
        },
    }
