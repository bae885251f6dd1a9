"""CacheShape's arithmetic against the caches the library allocates, and the published shapes
against transformers' default configurations (which describe several of the same models)."""

import warnings

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from attention_lab.caches import PUBLISHED_CACHE_SHAPES, CacheShape, KVCache, LatentCache


def allocated_numbers_per_token(shape: CacheShape) -> int:
    """Numbers the library's own caches hold for one position, summed over the layers."""
    if shape.kind == "latent":
        cache = LatentCache(1, shape.kv_lora_rank, shape.rope_dim, max_len=1)
        per_layer = cache.latents.numel() + cache.rope_keys.numel()
    else:
        kv_heads = shape.num_heads if shape.num_kv_heads is None else shape.num_kv_heads
        cache = KVCache(1, kv_heads, shape.head_dim, max_len=1)
        per_layer = cache.keys.numel() + cache.values.numel()
    return shape.num_layers * per_layer


@pytest.mark.parametrize("name", sorted(PUBLISHED_CACHE_SHAPES))
def test_published_shapes_match_the_caches_the_library_allocates(name):
    shape = PUBLISHED_CACHE_SHAPES[name]
    assert shape.numbers_per_token == allocated_numbers_per_token(shape)


@given(
    layers=st.integers(1, 4),
    kv_heads=st.integers(1, 4),
    group=st.integers(1, 3),
    head_dim=st.integers(1, 8),
    context=st.integers(0, 20),
    window=st.one_of(st.none(), st.integers(1, 12)),
    batch=st.integers(1, 3),
    width=st.sampled_from([1, 2, 4]),
)
def test_cache_bytes_is_what_a_filled_cache_stores(
    layers, kv_heads, group, head_dim, context, window, batch, width
):
    shape = CacheShape(
        num_layers=layers,
        num_heads=kv_heads * group,
        head_dim=head_dim,
        num_kv_heads=kv_heads,
        window=window,
    )
    kept = context if window is None else min(context, window)
    dtype = {1: torch.float8_e4m3fn, 2: torch.bfloat16, 4: torch.float32}[width]
    caches = [
        KVCache(batch, kv_heads, head_dim, max_len=max(kept, 1), dtype=torch.float32)
        for _ in range(layers)
    ]
    for cache in caches:
        if kept:
            cache.append(
                torch.zeros(batch, kv_heads, kept, head_dim),
                torch.zeros(batch, kv_heads, kept, head_dim),
            )
    stored = sum(
        (cache.keys[:, :, : len(cache)].numel() + cache.values[:, :, : len(cache)].numel())
        for cache in caches
    )
    element = torch.empty((), dtype=dtype).element_size()
    assert shape.cache_bytes(context, batch_size=batch, bytes_per_number=width) == (
        stored * element
    )


def test_kinds():
    kinds = {name: shape.kind for name, shape in PUBLISHED_CACHE_SHAPES.items()}
    assert kinds == {
        "Llama 2 7B": "multi-head",
        "Falcon 7B": "multi-query",
        "Llama 3 8B": "grouped-query",
        "Qwen3 8B": "grouped-query",
        "Mistral 7B v0.1": "grouped-query",
        "DeepSeek-V3": "latent",
    }


def test_shapes_that_transformers_default_configurations_describe():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from transformers import DeepseekV3Config, FalconConfig, LlamaConfig, MistralConfig

    def grouped(config):
        heads = config.num_attention_heads
        kv_heads = getattr(config, "num_key_value_heads", None) or (
            1 if getattr(config, "multi_query", False) else heads
        )
        return CacheShape(
            num_layers=config.num_hidden_layers,
            num_heads=heads,
            head_dim=config.hidden_size // heads,
            num_kv_heads=None if kv_heads == heads else kv_heads,
            window=getattr(config, "sliding_window", None),
        )

    deepseek = DeepseekV3Config()
    assert PUBLISHED_CACHE_SHAPES["DeepSeek-V3"] == CacheShape(
        num_layers=deepseek.num_hidden_layers,
        num_heads=deepseek.num_attention_heads,
        head_dim=deepseek.v_head_dim,
        kv_lora_rank=deepseek.kv_lora_rank,
        rope_dim=deepseek.qk_rope_head_dim,
    )
    assert PUBLISHED_CACHE_SHAPES["Llama 2 7B"] == grouped(LlamaConfig())
    assert PUBLISHED_CACHE_SHAPES["Falcon 7B"] == grouped(FalconConfig())
    assert PUBLISHED_CACHE_SHAPES["Mistral 7B v0.1"] == grouped(MistralConfig())


@pytest.mark.parametrize(
    ("fields", "error", "match"),
    [
        ({"num_layers": 0}, ValueError, "num_layers"),
        ({"num_heads": 2.0}, TypeError, "num_heads"),
        ({"num_kv_heads": 3}, ValueError, "divide"),
        ({"window": 0}, ValueError, "window"),
        ({"kv_lora_rank": 8}, ValueError, "both"),
    ],
)
def test_bad_fields_are_named(fields, error, match):
    base = {"num_layers": 2, "num_heads": 4, "head_dim": 8}
    with pytest.raises(error, match=match):
        CacheShape(**{**base, **fields})


def test_bad_cache_bytes_arguments_are_named():
    shape = CacheShape(num_layers=1, num_heads=1, head_dim=1)
    with pytest.raises(ValueError, match="context"):
        shape.cache_bytes(-1)
    with pytest.raises(TypeError, match="bytes_per_number"):
        shape.cache_bytes(4, bytes_per_number=2.0)
