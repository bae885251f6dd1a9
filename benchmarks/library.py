"""`make bench`: the library against PyTorch and transformers, as ratios measured in one process.

Each row times a library function or module against a reference doing the same work, the two
interleaved (see ``timing.py``), and reports median milliseconds and the median paired ratio
(library / reference; below 1 means the library is faster). The target is a ratio of at most
1.10 for the same work. Rows whose reference does other work (it skips the attention weights
or the top-k ranking, or computes the same output another way or another function) are shown
for information and marked "info". For every missed target the two sides are profiled
with ``torch.profiler`` and their most expensive operators written next to the table.

The Part VII rows time the delta rule (token by token and chunked, a decay per head and per key
channel) against the PyTorch paths of transformers' Qwen3-Next and Kimi Linear, the Gated
DeltaNet layer and the lightning indexer against transformers' modules with the same weights,
top-k attention against the formula and against PyTorch's attention given the top-k mask, and
linear attention's chunked form against its parallel form and softmax attention. Every row first
checks that its two sides compute the same result (or, for a reference that computes another
function, that each side computes what the row says).

The last part compares ``tiled_attention`` with ``F.scaled_dot_product_attention`` as the
sequence grows, in time and in peak memory (resident-set growth in a separate process, see
``memory_worker.py``).

Results are printed and written to ``benchmarks/results/`` as CSV and markdown.

Usage: ``python benchmarks/library.py [--threads N] [--quick] [--only part-vii]`` (``--only
part-vii``: those rows alone, written to ``library_part_vii.csv`` and ``.md``).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from timing import Comparison, compare
from torch import nn

from attention_lab.attention import MultiHeadAttention, scaled_dot_product_attention
from attention_lab.efficient import tiled_attention
from attention_lab.layers import EncoderLayer
from attention_lab.linear import delta_rule

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
TARGET = 1.10


@dataclass
class Row:
    group: str
    candidate: str
    reference: str
    comparison: Comparison
    same_work: bool  # False: the reference skips work the candidate does (info only)
    note: str = ""

    @property
    def verdict(self) -> str:
        if not self.same_work:
            return "info"
        return "met" if self.comparison.ratio <= TARGET else "MISSED"


@dataclass
class Case:
    """One comparison, with the callables kept so that a missed target can be profiled."""

    row: Row
    candidate_fn: Callable[[], object]
    reference_fn: Callable[[], object]


def seeded(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def plain_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask=None):
    """The textbook formula in plain PyTorch, returning the weights too."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # [B, H, T, T]
    if mask is not None:
        scores = scores.masked_fill(~mask, -math.inf)
    weights = scores.softmax(dim=-1)  # [B, H, T, T]
    return weights @ v, weights


def sdpa_cases(repeats: int) -> list[Case]:
    batch, heads, seq_len, head_dim = 8, 8, 256, 64
    q, k, v = (seeded(batch, heads, seq_len, head_dim, seed=s) for s in range(3))
    causal = torch.ones(seq_len, seq_len, dtype=torch.bool).tril()  # [T, T]
    shape = f"B={batch} H={heads} T={seq_len} Dh={head_dim}"
    torch.testing.assert_close(
        scaled_dot_product_attention(q, k, v)[0], plain_attention(q, k, v)[0]
    )

    def ours():
        return scaled_dot_product_attention(q, k, v)

    def plain():
        return plain_attention(q, k, v)

    def ours_masked():
        return scaled_dot_product_attention(q, k, v, causal)

    def plain_masked():
        return plain_attention(q, k, v, causal)

    def fused():
        return F.scaled_dot_product_attention(q, k, v)

    group = f"scaled_dot_product_attention ({shape})"
    return [
        Case(
            Row(
                group,
                "library, with weights",
                "plain PyTorch formula",
                compare(ours, plain, repeats=repeats),
                True,
            ),
            ours,
            plain,
        ),
        Case(
            Row(
                group,
                "library, causal mask",
                "plain formula, masked_fill(-inf)",
                compare(ours_masked, plain_masked, repeats=repeats),
                True,
            ),
            ours_masked,
            plain_masked,
        ),
        Case(
            Row(
                group,
                "library, with weights",
                "F.scaled_dot_product_attention",
                compare(ours, fused, repeats=repeats),
                False,
                "reference returns no weights",
            ),
            ours,
            fused,
        ),
    ]


def mha_case(repeats: int) -> list[Case]:
    batch, seq_len, d_model, heads = 8, 256, 512, 8
    torch.manual_seed(0)
    reference = nn.MultiheadAttention(d_model, heads, batch_first=True).eval()
    ours = MultiHeadAttention.from_torch(reference).eval()
    x = seeded(batch, seq_len, d_model)
    with torch.no_grad():
        expected = reference(x, x, x, need_weights=True, average_attn_weights=False)
        got = ours(x)
    torch.testing.assert_close(got[0], expected[0])
    torch.testing.assert_close(got[1], expected[1])

    def candidate():
        return ours(x)

    def torch_side():
        return reference(x, x, x, need_weights=True, average_attn_weights=False)

    row = Row(
        f"MultiHeadAttention (B={batch} T={seq_len} D={d_model} H={heads})",
        "library MultiHeadAttention",
        "nn.MultiheadAttention(need_weights=True, average_attn_weights=False)",
        compare(candidate, torch_side, repeats=repeats),
        True,
    )
    return [Case(row, candidate, torch_side)]


def encoder_layer_cases(repeats: int) -> list[Case]:
    batch, seq_len, d_model, heads, d_ff = 4, 256, 512, 8, 2048
    torch.manual_seed(0)
    reference = nn.TransformerEncoderLayer(
        d_model, heads, d_ff, dropout=0.1, batch_first=True
    ).eval()
    ours = EncoderLayer.from_torch(reference).eval()
    x = seeded(batch, seq_len, d_model)
    with torch.no_grad():
        torch.testing.assert_close(ours(x)[0], reference(x))

    def candidate():
        return ours(x)

    def same_work():
        # nn.TransformerEncoderLayer's post-norm forward, written out with its own submodules so
        # that its attention returns the per-head weights as ours does: the same work.
        attended, weights = reference.self_attn(
            x, x, x, need_weights=True, average_attn_weights=False
        )
        h = reference.norm1(x + reference.dropout1(attended))  # [B, T, D]
        hidden = reference.activation(reference.linear1(h))  # [B, T, d_ff]
        out = reference.norm2(h + reference.dropout2(reference.linear2(reference.dropout(hidden))))
        return out, weights

    with torch.no_grad():
        expected, expected_weights = same_work()
        torch.testing.assert_close(expected, reference(x))
        torch.testing.assert_close(ours(x)[1], expected_weights)

    def fast_path():
        return reference(x)

    def slow_path():
        torch.backends.mha.set_fastpath_enabled(False)
        try:
            return reference(x)
        finally:
            torch.backends.mha.set_fastpath_enabled(True)

    group = f"EncoderLayer (B={batch} T={seq_len} D={d_model} H={heads} d_ff={d_ff})"
    return [
        Case(
            Row(
                group,
                "library EncoderLayer (returns weights)",
                "its submodules, self_attn(need_weights=True, average_attn_weights=False)",
                compare(candidate, same_work, repeats=repeats),
                True,
            ),
            candidate,
            same_work,
        ),
        Case(
            Row(
                group,
                "library EncoderLayer (returns weights)",
                "nn.TransformerEncoderLayer, fast path off",
                compare(candidate, slow_path, repeats=repeats),
                False,
                "reference attends with F.scaled_dot_product_attention, no weights",
            ),
            candidate,
            slow_path,
        ),
        Case(
            Row(
                group,
                "library EncoderLayer (returns weights)",
                "nn.TransformerEncoderLayer, fused fast path",
                compare(candidate, fast_path, repeats=repeats),
                False,
                "fused kernel, no weights",
            ),
            candidate,
            fast_path,
        ),
    ]


def minilm_cases(repeats: int) -> list[Case]:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from transformers import AutoModel
    from transformers.utils import logging

    from attention_lab.pretrained import encoder_from_minilm, load_minilm, model_path

    tokenizer, _ = load_minilm()
    logging.disable_progress_bar()
    # Without the pooler (one more Linear on [CLS]), which our encoder does not compute either;
    # leaving it out is deliberate, so its "unused weights" load report is silenced.
    verbosity = logging.get_verbosity()
    logging.set_verbosity_error()
    try:
        eager, sdpa = (
            AutoModel.from_pretrained(
                model_path(),
                local_files_only=True,
                attn_implementation=kind,
                add_pooling_layer=False,
            ).eval()
            for kind in ("eager", "sdpa")
        )
    finally:
        logging.set_verbosity(verbosity)
    ours = encoder_from_minilm()
    words = "the cat sat on the mat while the dog slept by the warm fire".split()
    sentences = [" ".join(words[i % 5 :] + words[: i % 7] * 3) for i in range(8)]
    batch = tokenizer(sentences, padding=True, return_tensors="pt")
    with torch.no_grad():
        hidden, _ = ours(**batch)
        torch.testing.assert_close(hidden, eager(**batch).last_hidden_state, atol=1e-4, rtol=1e-4)
    shape = f"B={batch['input_ids'].shape[0]} T={batch['input_ids'].shape[1]}, 6 layers"

    def candidate():
        return ours(**batch)

    def eager_side():
        return eager(**batch, output_attentions=True)

    def sdpa_side():
        return sdpa(**batch)

    group = f"MiniLM encoder ({shape})"
    return [
        Case(
            Row(
                group,
                "encoder_from_minilm()",
                "transformers BertModel, eager, output_attentions=True",
                compare(candidate, eager_side, repeats=repeats),
                True,
            ),
            candidate,
            eager_side,
        ),
        Case(
            Row(
                group,
                "encoder_from_minilm()",
                "transformers BertModel, sdpa",
                compare(candidate, sdpa_side, repeats=repeats),
                False,
                "reference returns no weights",
            ),
            candidate,
            sdpa_side,
        ),
    ]


def tiled_cases(lengths: list[int], repeats: int) -> list[Case]:
    heads, head_dim, block_size = 2, 64, 128
    cases = []
    for seq_len in lengths:
        q, k, v = (seeded(1, heads, seq_len, head_dim, seed=s) for s in range(3))
        torch.testing.assert_close(
            tiled_attention(q, k, v, block_size=block_size), F.scaled_dot_product_attention(q, k, v)
        )

        def candidate(q=q, k=k, v=v):
            return tiled_attention(q, k, v, block_size=block_size)

        def reference(q=q, k=k, v=v):
            return F.scaled_dot_product_attention(q, k, v)

        # Fewer repeats for the long sequences: each call is quadratic in T.
        reps = max(3, repeats * 512 // seq_len)
        row = Row(
            f"tiled_attention (B=1 H={heads} Dh={head_dim} block={block_size})",
            f"tiled_attention T={seq_len}",
            "F.scaled_dot_product_attention",
            compare(candidate, reference, repeats=reps),
            False,
            "reference is a fused C++ kernel; tiled is the teaching version in Python",
        )
        cases.append(Case(row, candidate, reference))
    return cases


def tiled_memory(lengths: list[int]) -> dict[str, dict[int, int]]:
    """Peak resident-set growth per method and T, each method in a fresh process."""
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536")
    peaks = {}
    for method in ("torch_sdpa", "tiled", "library_full"):
        out = subprocess.run(
            [sys.executable, str(HERE / "memory_worker.py"), method, *map(str, lengths)],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        peaks[method] = {int(t): b for t, b in json.loads(out).items()}
    return peaks


# --- Part VII: linear attention, the delta rule, the lightning indexer, top-k attention ----------


def part_vii_transformers():
    """transformers' Part VII modules, imported with their warnings off. Without
    flash-linear-attention and causal-conv1d installed their kernels fall back to the PyTorch
    paths, which are what the library is compared with; the fallback notice (logged at the first
    call) is silenced for the rest of the run."""
    import warnings

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers.utils import logging

    logging.set_verbosity_error()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from transformers.models.deepseek_v32 import modeling_deepseek_v32 as deepseek
        from transformers.models.kimi_linear import modeling_kimi_linear as kimi
        from transformers.models.qwen3_next import modeling_qwen3_next as qwen
    return qwen, kimi, deepseek


def to_models(x: torch.Tensor) -> torch.Tensor:
    """The library's ``[B, H, T, ...]`` as the models' ``[B, T, H, ...]``, contiguous."""
    return x.transpose(1, 2).contiguous()


def delta_inputs(shape: tuple[int, ...], *, channel_decay: bool, seed: int = 0) -> dict:
    """The delta rule's inputs drawn as ``tests/unit/test_linear.py`` draws them."""
    batch, key_heads, value_heads, length, dim = shape
    g = torch.Generator().manual_seed(seed)
    return {
        "query": torch.randn(batch, key_heads, length, dim, generator=g),
        "key": torch.randn(batch, key_heads, length, dim, generator=g),
        "value": torch.randn(batch, value_heads, length, dim, generator=g),
        "beta": torch.rand(batch, value_heads, length, generator=g),
        "decay": -0.5
        * torch.rand(batch, value_heads, length, *((dim,) if channel_decay else ()), generator=g),
    }


def delta_rule_cases(repeats: int) -> list[Case]:
    qwen, kimi, _ = part_vii_transformers()
    cases = []
    for channel_decay, shape, recurrent, chunked, kind in (
        (
            False,
            (1, 4, 8, 512, 64),
            qwen.torch_recurrent_gated_delta_rule,
            qwen.torch_chunk_gated_delta_rule,
            "per-head decay (Qwen3-Next)",
        ),
        (
            True,
            (1, 4, 4, 512, 64),
            kimi.recurrent_kimi_delta_attention,
            kimi.chunk_kimi_delta_attention,
            "per-channel decay (Kimi Linear)",
        ),
    ):
        x = delta_inputs(shape, channel_decay=channel_decay)
        args = [x[n] for n in ("query", "key", "value", "beta")]
        # The models take [B, T, H, ...] and (g, beta) in that order.
        models = [to_models(x[n]) for n in ("query", "key", "value", "decay", "beta")]

        def ours(chunk_size, args=args, decay=x["decay"]):
            return delta_rule(*args, decay=decay, chunk_size=chunk_size, qk_l2norm=True)

        def theirs_recurrent(recurrent=recurrent, models=models):
            return recurrent(*models, None, False, use_qk_l2norm_in_kernel=True)[0]

        def theirs_chunked(chunked=chunked, models=models):
            return chunked(*models, chunk_size=64, use_qk_l2norm_in_kernel=True)[0]

        batch, key_heads, value_heads, length, dim = shape
        group = (
            f"Part VII: delta_rule, {kind} (B={batch} Hk={key_heads} Hv={value_heads} "
            f"T={length} Dk=Dv={dim})"
        )
        for chunk_size, reference, function in (
            (None, theirs_recurrent, recurrent),
            (64, theirs_chunked, chunked),
        ):

            def candidate(chunk_size=chunk_size):
                return ours(chunk_size)

            with torch.inference_mode():  # the tests' tolerance, at 512 positions
                torch.testing.assert_close(
                    candidate(), reference().transpose(1, 2), atol=2e-6, rtol=1e-5
                )
            form = "token by token" if chunk_size is None else f"chunk_size={chunk_size}"
            row = Row(
                group,
                f"delta_rule, {form}",
                f"transformers' {function.__name__}"
                + ("" if chunk_size is None else ", chunk_size=64"),
                compare(candidate, reference, repeats=repeats),
                True,
            )
            cases.append(Case(row, candidate, reference))
    return cases


def gated_deltanet_case(repeats: int) -> list[Case]:
    from transformers import Qwen3NextConfig

    from attention_lab.linear import GatedDeltaNet

    qwen, _, _ = part_vii_transformers()
    batch, length, d_model, key_heads, value_heads, dim = 1, 512, 512, 4, 8, 64
    torch.manual_seed(0)  # modules draw their weights from the global generator
    config = Qwen3NextConfig(
        hidden_size=d_model,
        linear_num_key_heads=key_heads,
        linear_num_value_heads=value_heads,
        linear_key_head_dim=dim,
        linear_value_head_dim=dim,
        linear_conv_kernel_dim=4,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=64,
        intermediate_size=1024,
        vocab_size=50,
    )
    reference = qwen.Qwen3NextGatedDeltaNet(config, layer_idx=0).eval()
    with torch.no_grad():  # projections and convolution as initialised; the rest drawn too
        reference.A_log.uniform_(-1.0, 1.0)
        reference.dt_bias.normal_(0.0, 0.5)
        reference.norm.weight.normal_(1.0, 0.3)
    ours = GatedDeltaNet.from_hf(reference, chunk_size=64).eval()
    x = seeded(batch, length, d_model)
    with torch.inference_mode():
        expected = reference(x)
        assert expected.abs().mean() > 1e-2  # a layer that does something
        torch.testing.assert_close(ours(x), expected, atol=1e-5, rtol=1e-5)

    def candidate():
        return ours(x)

    def torch_side():
        return reference(x)

    row = Row(
        f"Part VII: GatedDeltaNet layer (B={batch} T={length} D={d_model} Hk={key_heads} "
        f"Hv={value_heads} Dk=Dv={dim})",
        "GatedDeltaNet.from_hf(m), chunk_size=64",
        "transformers Qwen3NextGatedDeltaNet m, eager, no cache",
        compare(candidate, torch_side, repeats=repeats),
        True,
    )
    return [Case(row, candidate, torch_side)]


def lightning_indexer_case(repeats: int) -> list[Case]:
    from transformers import DeepseekV32Config

    from attention_lab.masks import causal_mask
    from attention_lab.sparse import LightningIndexer

    _, _, deepseek = part_vii_transformers()
    batch, length, d_model, q_rank, heads, dim, rope, top_k = 2, 512, 512, 256, 8, 64, 32, 64
    torch.manual_seed(0)
    config = DeepseekV32Config(
        hidden_size=d_model, q_lora_rank=q_rank, index_n_heads=heads, index_head_dim=dim,
        qk_rope_head_dim=rope, index_topk=top_k, num_attention_heads=4, num_key_value_heads=4,
        kv_lora_rank=64, qk_nope_head_dim=32, v_head_dim=32, num_hidden_layers=1,
        vocab_size=50, intermediate_size=1024, moe_intermediate_size=256,
    )  # fmt: skip
    reference = deepseek.DeepseekV32Indexer(config, layer_idx=0).eval()
    rotary = deepseek.DeepseekV32RotaryEmbedding(config)
    ours = LightningIndexer.from_hf(reference).eval()
    x, q_resid = seeded(batch, length, d_model, seed=1), seeded(batch, length, q_rank, seed=2)
    positions = torch.arange(length)
    causal = causal_mask(length)[None]  # [1, T, T]

    def candidate():
        return ours(x, q_resid, positions, causal)

    def torch_side():
        # The rotary angles are part of the work: the library's indexer computes its own.
        ids = positions[None].expand(batch, -1)
        return reference(x, q_resid, rotary(x, ids), causal, ids)

    with torch.inference_mode():
        got, expected = candidate(), torch_side()
        assert got.shape == expected.shape == (batch, length, top_k)
        # The same key sets, over the keys each query may see (a query that sees fewer than k
        # lists blocked ones too, in no order that means anything).
        ranked = torch.zeros(batch, length, length, dtype=torch.bool)
        kept_ours = ranked.scatter(-1, got, True) & causal
        kept_theirs = ranked.scatter(-1, expected.long(), True) & causal
        assert torch.equal(kept_ours, kept_theirs)

    row = Row(
        f"Part VII: LightningIndexer (B={batch} T={length} D={d_model} R={q_rank} H={heads} "
        f"Dh={dim} rope={rope} top_k={top_k}, causal)",
        "LightningIndexer.from_hf(m): top-k indices",
        "transformers DeepseekV32Indexer m (and its rotary angles)",
        compare(candidate, torch_side, repeats=repeats),
        True,
    )
    return [Case(row, candidate, torch_side)]


def linear_attention_cases(lengths: list[int], repeats: int) -> list[Case]:
    from attention_lab.linear import linear_attention
    from attention_lab.masks import causal_mask

    batch, heads, dim = 1, 8, 64
    cases = []
    for length in lengths:
        q, k, v = (seeded(batch, heads, length, dim, seed=s) for s in range(3))

        def chunked(q=q, k=k, v=v):
            return linear_attention(q, k, v, form="chunked", chunk_size=64)

        def parallel(q=q, k=k, v=v):
            return linear_attention(q, k, v, form="parallel")

        def fused(q=q, k=k, v=v):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)

        with torch.inference_mode():
            # The two forms compute the same output; softmax attention is another function
            # (checked against the library's own, so that the row times what it says).
            torch.testing.assert_close(chunked(), parallel(), atol=1e-5, rtol=1e-5)
            expected, _ = scaled_dot_product_attention(q, k, v, causal_mask(length))
            torch.testing.assert_close(fused(), expected)
        group = f"Part VII: linear_attention, causal, elu+1 (B={batch} H={heads} Dh={dim})"
        reps = max(3, repeats * 512 // length)  # the parallel form is quadratic in T
        cases += [
            Case(
                Row(
                    group,
                    f"linear_attention T={length}, chunked (64)",
                    "linear_attention, parallel (the [T, T] matrix)",
                    compare(chunked, parallel, repeats=reps),
                    False,
                    "same output, different work: O(T D^2) against O(T^2 D)",
                ),
                chunked,
                parallel,
            ),
            Case(
                Row(
                    group,
                    f"linear_attention T={length}, chunked (64)",
                    "F.scaled_dot_product_attention(is_causal=True)",
                    compare(chunked, fused, repeats=reps),
                    False,
                    "another function: softmax attention, fused kernel",
                ),
                chunked,
                fused,
            ),
        ]
    return cases


def plain_topk_attention(q, k, v, mask, top_k: int):
    """Exact top-k attention in plain PyTorch, returning the weights: each query's top_k
    visible logits ranked, the rest masked, the softmax."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # [B, H, T, T]
    top = scores.masked_fill(~mask, -math.inf).topk(top_k, dim=-1).indices  # [B, H, T, k]
    kept = torch.zeros_like(scores, dtype=torch.bool).scatter(-1, top, True) & mask
    weights = scores.masked_fill(~kept, -math.inf).softmax(dim=-1)
    return weights @ v, weights


def topk_cases(repeats: int) -> list[Case]:
    from attention_lab.masks import causal_mask, topk_mask

    batch, heads, length, dim, top_k = 1, 8, 1024, 64, 64
    q, k, v = (seeded(batch, heads, length, dim, seed=s) for s in range(3))
    causal = causal_mask(length)  # [T, T]
    # The mask the library's ranking arrives at, computed as it computes its logits.
    logits = q @ k.transpose(-2, -1)
    kept = topk_mask(logits.div_(math.sqrt(dim)), top_k, causal)  # [B, H, T, T]

    def ours():
        return scaled_dot_product_attention(q, k, v, causal, top_k=top_k)

    def plain():
        return plain_topk_attention(q, k, v, causal, top_k)

    def fused_kept():
        return F.scaled_dot_product_attention(q, k, v, attn_mask=kept)

    def ours_every_key():
        return scaled_dot_product_attention(q, k, v, causal)

    with torch.inference_mode():
        out, weights = ours()
        expected, expected_weights = plain()
        torch.testing.assert_close(out, expected)
        torch.testing.assert_close(weights, expected_weights)
        assert torch.equal(weights > 0, kept)
        torch.testing.assert_close(out, fused_kept())
        # The call without top_k attends every visible key: PyTorch's causal attention.
        every_key = ours_every_key()[0]
        torch.testing.assert_close(
            every_key, F.scaled_dot_product_attention(q, k, v, is_causal=True)
        )

    group = f"Part VII: scaled_dot_product_attention(top_k=) (B={batch} H={heads} T={length} "
    group += f"Dh={dim} top_k={top_k}, causal)"
    candidate = f"library, mask, top_k={top_k}"
    return [
        Case(
            Row(
                group,
                candidate,
                "plain PyTorch: logits, topk, masked_fill(-inf), softmax",
                compare(ours, plain, repeats=repeats),
                True,
            ),
            ours,
            plain,
        ),
        Case(
            Row(
                group,
                candidate,
                "F.scaled_dot_product_attention, the top-k mask precomputed",
                compare(ours, fused_kept, repeats=repeats),
                False,
                "reference skips the ranking and returns no weights",
            ),
            ours,
            fused_kept,
        ),
        Case(
            Row(
                group,
                candidate,
                "library, mask, no top_k",
                compare(ours, ours_every_key, repeats=repeats),
                False,
                "reference does no ranking: the excess over 1 is the ranking's cost",
            ),
            ours,
            ours_every_key,
        ),
    ]


def part_vii_cases(repeats: int, quick: bool) -> list[Case]:
    cases: list[Case] = []
    for make in (delta_rule_cases, gated_deltanet_case, lightning_indexer_case, topk_cases):
        cases += make(repeats)
        print(f"... {cases[-1].row.group}: done", file=sys.stderr)
    cases += linear_attention_cases([512, 1024] if quick else [512, 2048], repeats)
    print(f"... {cases[-1].row.group}: done", file=sys.stderr)
    return cases


def top_operators(function: Callable[[], object], count: int = 6) -> str:
    from torch.profiler import ProfilerActivity, profile

    with torch.inference_mode():
        function()
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(3):
                function()
    return prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=count)


def milliseconds(seconds: float) -> str:
    return f"{1000 * seconds:.2f}"


def table(rows: list[Row]) -> list[dict[str, str]]:
    return [
        {
            "benchmark": r.group,
            "library": r.candidate,
            "reference": r.reference,
            "library ms": milliseconds(r.comparison.candidate_s),
            "reference ms": milliseconds(r.comparison.reference_s),
            "ratio": f"{r.comparison.ratio:.2f}",
            "ratio IQR": f"{r.comparison.ratio_low:.2f}-{r.comparison.ratio_high:.2f}",
            "pairs": str(r.comparison.repeats),
            "target <= 1.10": r.verdict,
            "note": r.note,
        }
        for r in rows
    ]


def markdown(records: list[dict[str, str]]) -> str:
    header = list(records[0])
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r[h] for h in header) + " |" for r in records]
    return "\n".join(lines)


def text_table(records: list[dict[str, str]], columns: list[str]) -> str:
    widths = {c: max(len(c), *(len(r[c]) for r in records)) for c in columns}
    lines = ["  ".join(c.ljust(widths[c]) for c in columns)]
    lines.append("  ".join("-" * widths[c] for c in columns))
    group = None
    for r in records:
        if r["benchmark"] != group:
            group = r["benchmark"]
            lines.append(f"[{group}]")
        lines.append("  ".join(r[c].ljust(widths[c]) for c in columns))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--quick", action="store_true", help="fewer repeats, shorter sequences")
    parser.add_argument(
        "--only",
        choices=["part-vii"],
        help="only these rows (part-vii: linear attention, the delta rule, the indexer, top-k), "
        "written to library_part_vii.csv and .md",
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    repeats = 5 if args.quick else 11
    lengths = [512, 1024, 2048] if args.quick else [512, 1024, 2048, 4096]
    started = time.perf_counter()

    cases: list[Case] = []
    memory = None
    if args.only is None:
        for make in (sdpa_cases, mha_case, encoder_layer_cases, minilm_cases):
            cases += make(repeats)
            print(f"... {cases[-1].row.group}: done", file=sys.stderr)
    cases += part_vii_cases(repeats, args.quick)
    if args.only is None:
        cases += tiled_cases(lengths, repeats)
        print("... tiled_attention timing: done", file=sys.stderr)
        memory = tiled_memory(lengths)
    stem = "library" if args.only is None else "library_part_vii"

    RESULTS.mkdir(exist_ok=True)
    rows = [case.row for case in cases]
    records = table(rows)
    written = [RESULTS / f"{stem}.csv", RESULTS / f"{stem}.md"]
    with open(written[0], "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(records[0]))
        writer.writeheader()
        writer.writerows(records)

    memory_records = []
    if memory is not None:
        memory_records = [
            {
                "T": str(t),
                "F.sdpa MiB": f"{memory['torch_sdpa'][t] / 2**20:.1f}",
                "tiled MiB": f"{memory['tiled'][t] / 2**20:.1f}",
                "library full MiB": f"{memory['library_full'][t] / 2**20:.1f}",
                "score matrix MiB": f"{2 * t * t * 4 / 2**20:.1f}",
            }
            for t in lengths
        ]
        written.insert(1, RESULTS / "tiled_memory.csv")
        with open(written[1], "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(memory_records[0]))
            writer.writeheader()
            writer.writerows(memory_records)

    profiles = []
    for case in cases:
        if case.row.verdict == "MISSED":
            profiles.append(
                f"## {case.row.group}: {case.row.candidate} vs {case.row.reference}\n\n"
                f"library:\n```\n{top_operators(case.candidate_fn)}```\n\n"
                f"reference:\n```\n{top_operators(case.reference_fn)}```\n"
            )

    machine = (
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, torch "
        f"{torch.__version__}, {torch.get_num_threads()} thread(s), load average "
        f"{os.getloadavg()[0]:.1f}"
    )
    memory_report = []
    if memory_records:
        memory_report = [
            "## tiled_attention memory (peak resident-set growth of one call, fresh process; "
            "B=1 H=2 Dh=64, block 128)",
            "",
            markdown(memory_records),
            "",
        ]
    report = [
        "# attention_lab benchmarks" + ("" if args.only is None else f" ({args.only} only)"),
        "",
        f"Machine: {machine}.",
        "Times are medians over interleaved pairs; ratio = median of library / reference per "
        f"pair (target <= {TARGET}).",
        "",
        markdown(records),
        "",
        *memory_report,
        *profiles,
    ]
    written[-1].write_text("\n".join(report))

    print(f"\n{machine}\n")
    columns = [
        "library",
        "reference",
        "library ms",
        "reference ms",
        "ratio",
        "ratio IQR",
        "target <= 1.10",
    ]
    print(text_table(records, columns))
    if memory_records:
        print("\nPeak memory of one call (resident-set growth, fresh process, B=1 H=2 Dh=64):\n")
        print(
            text_table(
                [{"benchmark": "memory", **r} for r in memory_records], list(memory_records[0])
            )
        )
    missed = [r for r in rows if r.verdict == "MISSED"]
    if missed:
        print(f"\n{len(missed)} target(s) missed; operator profiles in {written[-1]}")
    names = ", ".join(str(path) for path in written[:-1])
    print(f"\nwrote {names} and {written[-1]} in {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
