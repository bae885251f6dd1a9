"""The chapter quizzes in notebooks_src/quizzes/: well formed, and right.

Every quiz file must be a quiz jupyterquiz can display and grade (checked here directly, not only
through ``attention_lab.book.quiz.validate_quiz``): single-answer multiple choice with exactly one
correct choice, numeric questions whose correct answer is graded correct by the same rules as
jupyterquiz's JavaScript. Every numeric answer is recomputed independently, with attention_lab,
torch or plain arithmetic: each numeric question must have an entry in ``RECOMPUTE``.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from attention_lab import data, layers, masks, positional
from attention_lab.attention import MultiHeadAttention, scaled_dot_product_attention
from attention_lab.attention_config import AttentionConfig
from attention_lab.book.quiz import validate_quiz
from attention_lab.score_modifiers import ScoreModifiers
from attention_lab.seq2seq import Seq2SeqTransformer, reversal_translation_task
from attention_lab.training import pattern_share
from support.paths import ROOT

QUIZZES = ROOT / "notebooks_src" / "quizzes"
CHAPTERS = ROOT / "notebooks_src" / "chapters"
FILES = sorted(QUIZZES.glob("*.json"))


def load(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))


def questions(kind: str | None = None):
    """(file, index, question) for every question of every quiz, optionally of one type."""
    return [
        pytest.param(path, i, q, id=f"{path.stem}[{i}]")
        for path in FILES
        for i, q in enumerate(load(path))
        if kind is None or q.get("type") == kind
    ]


def grade(question: dict, submission: float) -> bool | None:
    """Grade a typed number as jupyterquiz's ``check_numeric`` does; None if nothing matched.

    With a ``precision`` p the submission is rounded to p significant digits and compared with
    ``value.toPrecision(p)``; a range ``[low, high]`` matches ``low <= submission < high``; the
    first matching answer wins.
    """
    precision = question.get("precision")
    if precision:
        submission = float(f"{submission:.{precision}g}")
    for answer in question["answers"]:
        if "value" in answer:
            value = answer["value"]
            if precision:
                value = float(f"{value:.{precision}g}")
            if submission == value:
                return answer["correct"]
        elif "range" in answer:
            low, high = answer["range"]
            if low <= submission < high:
                return answer["correct"]
    return None


# --- Independent recomputation of every numeric answer --------------------------------------


def _scores_for_twelve_tokens() -> float:
    x = torch.randn(1, 12, 8, generator=torch.Generator().manual_seed(0))  # [B, T, D]
    _, weights = scaled_dot_product_attention(x, x, x)  # weights: [B, T, T]
    return weights.numel()


def _flop_ratio_attention_over_rnn() -> float:
    torch.manual_seed(0)
    rnn = nn.RNN(64, 64, batch_first=True)
    x = torch.randn(1, 1024, 64)  # [B, T, D]
    with torch.no_grad(), FlopCounterMode(display=False) as rnn_count:
        rnn(x)
    with torch.no_grad(), FlopCounterMode(display=False) as attention_count:
        scaled_dot_product_attention(x, x, x)
    return attention_count.get_total_flops() / rnn_count.get_total_flops()


def _worked_example_weight() -> float:
    # The worked example of 02_scaled_dot_product_attention: query 0 against keys 0..2.
    query = torch.tensor([[0.0, 3.0, 0.0, 0.0]])  # [Tq, Dh]
    key = 2.0 * torch.eye(3, 4)  # [Tk, Dh]: key j has 2 in feature j
    _, weights = scaled_dot_product_attention(query, key, torch.eye(3))
    return weights[0, 1].item()


def _dot_product_variance() -> float:
    d_k = 256
    # Var(sum_i q_i k_i) = sum_i E[q_i^2] E[k_i^2] = d_k for independent unit-variance entries.
    exact = d_k * 1.0 * 1.0
    generator = torch.Generator().manual_seed(0)
    q = torch.randn(20_000, d_k, generator=generator, dtype=torch.float64)
    k = torch.randn(20_000, d_k, generator=generator, dtype=torch.float64)
    sampled = (q * k).sum(dim=-1).var().item()
    assert abs(sampled - exact) < 0.05 * exact  # about 5 standard errors
    return exact


def _output_numel() -> float:
    generator = torch.Generator().manual_seed(0)
    q = torch.randn(2, 8, 5, 16, generator=generator)
    k = torch.randn(2, 8, 7, 16, generator=generator)
    v = torch.randn(2, 8, 7, 32, generator=generator)
    out, _ = scaled_dot_product_attention(q, k, v)
    return out.numel()


def _head_width() -> float:
    return MultiHeadAttention(512, 8).head_dim


def _mha_parameters() -> float:
    return sum(p.numel() for p in MultiHeadAttention(32, 4).parameters())


def _column_0_wavelength() -> float:
    pe = positional.sinusoidal_encoding(200, 16).double()  # [T, D]
    # Columns 0 and 1 are the sine and cosine of one angle, omega * pos: read the angle back
    # and measure how much it turns per position (less than a full turn, so mod 2 pi is exact).
    angle = torch.atan2(pe[:, 0], pe[:, 1])  # [T]
    step = torch.remainder(torch.diff(angle), 2 * math.pi)  # [T - 1]
    torch.testing.assert_close(step, torch.full_like(step, step.mean().item()))
    return 2 * math.pi / step.mean().item()


def _encoding_squared_norm() -> float:
    pe = positional.sinusoidal_encoding(64, 16)  # [T, D]
    squared = (pe.double() ** 2).sum(dim=-1)  # [T]
    torch.testing.assert_close(squared, torch.full_like(squared, squared[0].item()))
    return squared[0].item()


def _causal_true_count() -> float:
    return masks.causal_mask(6).sum().item()


def _combined_true_count() -> float:
    ids = torch.tensor([[5, 7, 9, 0, 0]])  # [B, T]
    return masks.combine_masks(masks.causal_mask(5), masks.padding_mask(ids)).sum().item()


def _encoder_layer_parameters() -> float:
    ours = sum(p.numel() for p in layers.EncoderLayer(512, 8, 2048).parameters())
    reference = sum(p.numel() for p in nn.TransformerEncoderLayer(512, 8, 2048).parameters())
    assert ours == reference
    return ours


def _feed_forward_share() -> float:
    layer = layers.EncoderLayer(512, 8, 2048)
    total = sum(p.numel() for p in layer.parameters())
    return sum(p.numel() for p in layer.feed_forward.parameters()) / total


def _encoding_entry_rms() -> float:
    rms = [positional.sinusoidal_encoding(50, d).double().pow(2).mean().sqrt() for d in (16, 512)]
    torch.testing.assert_close(rms[0], rms[1])  # whatever d_model
    return rms[0].item()


def _padding_share() -> float:
    # Exact: lengths uniform on 1..10, padded to 10.
    exact = sum(1 - length / 10 for length in range(1, 11)) / 10
    # And as the library's data functions produce it.
    sentences = data.generate_synthetic_data(2000, 20, 10, seed=0)
    padded = data.pad_sequences([[t + 1 for t in s] for s in sentences])  # [N, T]
    assert padded.shape[1] == 10
    assert abs((padded == 0).float().mean().item() - exact) < 0.02
    return exact


def _dogs_bark_tokens() -> float:
    from attention_lab.pretrained import load_tokenizer

    return len(load_tokenizer()("Dogs bark.")["input_ids"])


def _reversal_source_of_output_2() -> float:
    inputs, targets = data.reversal_task(50, 1000, 8, seed=0)  # [N, T]
    sources = [j for j in range(8) if torch.equal(inputs[:, j], targets[:, 2])]
    assert len(sources) == 1
    return sources[0]


def _anti_diagonal_weight() -> float:
    scores = torch.zeros(1, 8)  # [Tq, Tk]
    scores[0, 5] = 8.0
    # Queries and keys whose scaled dot products are these scores: q = s * sqrt(Dh), k = I.
    _, weights = scaled_dot_product_attention(scores * math.sqrt(8), torch.eye(8), torch.eye(8))
    return weights[0, 5].item()


def _minilm_head_width() -> float:
    from attention_lab.pretrained import load_minilm

    config = load_minilm()[1].config
    return config.hidden_size // config.num_attention_heads


def _snowboarder_tokens() -> float:
    from attention_lab.pretrained import load_tokenizer

    return len(load_tokenizer()("snowboarder")["input_ids"])


def _uniform_entropy() -> float:
    weights = torch.full((8,), 1 / 8, dtype=torch.float64)
    return -(weights * weights.log()).sum().item()


def _hello_padding() -> float:
    from attention_lab.pretrained import load_tokenizer

    sentences = ["Tokenization splits unbelievable words into pieces.", "Hello!"]
    batch = load_tokenizer()(sentences, padding=True, return_tensors="pt")
    mask = batch["attention_mask"]  # [B, T]: 1 = real token
    assert mask.sum(dim=1).tolist() == [10, 4]  # as the question states
    return (mask[1] == 0).sum().item()


def _cosine_3_4() -> float:
    u = torch.tensor([3.0, 4.0], dtype=torch.float64)
    v = torch.tensor([4.0, 3.0], dtype=torch.float64)
    return torch.nn.functional.cosine_similarity(u, v, dim=0).item()


def _score_mebibytes() -> float:
    scores = torch.empty(1, 12, 4096, 4096, device="meta")  # [B, H, T, T], float32, no storage
    return scores.numel() * scores.element_size() / 2**20


def _products_catch_up_with_projections() -> float:
    width, heads = 512, 8

    def flops(length):
        x = torch.randn(1, length, width)  # [B, T, D]
        q = torch.randn(1, heads, length, width // heads)  # [B, H, T, Dh]
        with torch.no_grad(), FlopCounterMode(display=False) as projections:
            nn.Linear(width, width)(x)
        with torch.no_grad(), FlopCounterMode(display=False) as products:
            scaled_dot_product_attention(q, q, q)
        return 4 * projections.get_total_flops(), products.get_total_flops()

    below, at = flops(1023), flops(1024)
    assert below[1] < below[0] and at[1] == at[0]
    return 1024


def _cache_numbers() -> float:
    from attention_lab.caches import KVCache

    cache = KVCache(batch_size=1, num_heads=12, head_dim=32, max_len=512)
    return cache.keys.numel() + cache.values.numel()


def _uniform_guess_loss() -> float:
    logits = torch.zeros(4, 11, dtype=torch.float64)  # [N, classes]: every id equally likely
    return nn.functional.cross_entropy(logits, torch.tensor([0, 3, 7, 10])).item()


def _uniform_anti_diagonal_share() -> float:
    from attention_lab.training import pattern_share

    uniform = torch.full((8, 8), 1 / 8)  # [Tq, Tk]
    share = pattern_share(uniform, torch.eye(8).flip(-1).bool())  # [Tq]
    torch.testing.assert_close(share, torch.full((8,), share[0].item()))
    return share[0].item()


def _possible_sequences() -> float:
    inputs, _ = data.reversal_task(4096, 12, 8, seed=0)  # [N, T]
    ids = set(inputs.unique().tolist())
    assert ids == set(range(1, 12))  # 11 possible ids at each of 8 positions
    return len(ids) ** inputs.shape[1]


def _new_token_loss() -> float:
    from attention_lab.circuits import loss_by_position, repeated_sequences

    seqs = repeated_sequences(4096, 65, 12, seed=0)  # [N, 2L], ids 1..64
    ids = seqs.unique()
    assert ids.tolist() == list(range(1, 65))
    # The best prediction of a uniform new id: equal logits on the 64 ids, none on padding.
    logits = torch.zeros(1, 1, 65)
    logits[..., 0] = -math.inf
    loss = loss_by_position(logits, torch.tensor([[7]])).item()
    assert math.isclose(loss, math.log(len(ids)), rel_tol=1e-6)
    return loss


def _even_head_previous_token_score() -> float:
    from attention_lab.circuits import previous_token_score

    even = torch.ones(4, 4).tril()
    even = even / even.sum(dim=-1, keepdim=True)  # [T, T], row t puts 1/(t+1) on each key
    return previous_token_score(even).item()


def _coin_flip_floor() -> float:
    from attention_lab.language_model import BracketLanguage

    language = BracketLanguage()
    prefix = torch.tensor([[language.BOS, language.OPEN, language.OPEN]])  # depth 2
    allowed = language.allowed_next(prefix)[0, -1]  # [V]: ( or )
    assert allowed.sum() == 2
    return -math.log(1 / allowed.sum().item())


def _causal_weights_21() -> float:
    return masks.causal_mask(21).sum().item()


def _gqa_cache_bytes_per_token() -> float:
    from attention_lab.caches import KVCache
    from attention_lab.efficient import peak_memory

    one_layer = peak_memory(KVCache, 1, 8, 128, 16, dtype=torch.float16)  # 16 tokens
    return one_layer * 32 / 16  # 32 layers, per token


def _positions_without_cache() -> float:
    from attention_lab.language_model import DecoderConfig, DecoderLM, generate

    torch.manual_seed(0)
    model = DecoderLM(DecoderConfig(vocab_size=5, max_len=101, d_model=8, num_layers=1))
    seen = []
    model.layers[0].register_forward_hook(lambda module, args, out: seen.append(args[0].shape[1]))
    generate(model, torch.ones(1, 1, dtype=torch.long), 100, use_cache=False)
    assert len(seen) == 100
    return sum(seen)


def _rope_pairs_with_a_full_turn() -> float:
    from attention_lab.positional import rope_frequencies

    inv_freq, _ = rope_frequencies(16)  # [8] radians per position
    return float((15 * inv_freq >= 2 * math.pi).sum())


def _linear_scaled_fastest_turn() -> float:
    from attention_lab.positional import rope_frequencies

    inv_freq, _ = rope_frequencies(16, scaling={"rope_type": "linear", "factor": 8})
    return float(inv_freq[0])  # pair 0, 1 radian per position unscaled


def _yarn_score_factor() -> float:
    from attention_lab.positional import rotary_embedding

    scaling = {"rope_type": "yarn", "factor": 8, "original_max_position_embeddings": 16}
    q = torch.tensor([[1.0, 0.0, 0.0, 0.0]])  # [T, Dh], rotated at position 0
    rotated = rotary_embedding(q, scaling=scaling)
    return float((rotated @ rotated.T)[0, 0] / (q @ q.T)[0, 0])


def _window_receptive_field() -> float:
    # Which inputs reach the last position after 4 layers with a window of 8 keys: the
    # positions reachable through 4 hops of the window mask (a boolean matrix power).
    window = masks.sliding_window_mask(64, 8).long()  # [T, T]
    reach = torch.linalg.matrix_power(window, 4)  # [T, T]: paths of 4 hops
    return float((reach[-1] > 0).sum())


def _windowed_cache_mebibytes() -> float:
    from attention_lab.caches import KVCache
    from attention_lab.efficient import peak_memory

    # A windowed layer holds its last 4,096 positions, whatever the context.
    one_layer = peak_memory(KVCache, 1, 8, 128, 4096, dtype=torch.float16)
    return one_layer * 32 / 2**20


def _softcapped_score() -> float:
    # Two keys scored 0 and 500 (d = 1): the ratio of their weights is exp(cap(500) - 0).
    query = torch.tensor([[500.0]], dtype=torch.float64)  # [Tq, Dk]
    keys = torch.tensor([[0.0], [1.0]], dtype=torch.float64)  # [Tk, Dk]
    weights = scaled_dot_product_attention(
        query, keys, keys, modifiers=ScoreModifiers(softcap=50.0)
    )[1][0]  # [Tk]
    return round(float(torch.log(weights[1] / weights[0])))


def _even_first_token_share() -> float:
    # A query with nothing to prefer (all scores 0) over 20 keys: percent on the first.
    query, keys = torch.zeros(1, 4), torch.randn(20, 4)  # [Tq, Dk], [Tk, Dk]
    weights = scaled_dot_product_attention(query, keys, keys)[1][0]  # [Tk]
    return round(100 * float(weights[0]), 6)


def _qwen3_cache_bytes_per_token() -> float:
    from attention_lab.caches import PUBLISHED_CACHE_SHAPES, KVCache
    from attention_lab.efficient import peak_memory

    shape = PUBLISHED_CACHE_SHAPES["Qwen3 8B"]
    one_layer = peak_memory(KVCache, 1, 8, 128, 16, dtype=torch.bfloat16)  # 16 tokens
    assert shape.cache_bytes(1) == one_layer * 36 / 16
    return shape.cache_bytes(1)


def _multiply_adds_per_byte_read() -> float:
    from attention_lab.caches import KVCache

    # One decoding step: one new query per head against a full cache of T = 100 positions.
    heads, kv_heads, width, held = 32, 8, 16, 100
    attention = MultiHeadAttention(
        heads * width, heads, config=AttentionConfig(num_kv_heads=kv_heads, head_dim=width)
    )
    cache = KVCache(1, kv_heads, width, held, dtype=torch.float16)  # [B, Hkv, T, Dh] twice
    read = cache.keys.nbytes + cache.values.nbytes  # every held key and value, read once
    q = torch.randn(1, heads, 1, width)  # [B, H, 1, Dh]
    k, v = (attention.repeat_kv(t.float()) for t in (cache.keys, cache.values))  # [B, H, T, Dh]
    with torch.no_grad(), FlopCounterMode(display=False) as count:
        scaled_dot_product_attention(q, k, v)
    multiply_adds = count.get_total_flops() / 2  # FlopCounterMode counts 2 per multiply-add
    assert multiply_adds == 2 * heads * held * width  # q . k and the weighted sum of v
    return multiply_adds / read


def _linear_attention_state_numbers() -> float:
    from attention_lab.linear import FEATURE_MAPS, linear_attention

    phi = FEATURE_MAPS["elu+1"]
    sizes = set()
    for length in (3, 300):  # the same state after any number of tokens
        generator = torch.Generator().manual_seed(length)
        q, k, v = (
            torch.randn(length, 128, generator=generator, dtype=torch.float64) for _ in "qkv"
        )
        state, normaliser = phi(k).T @ v, phi(k).sum(dim=0)  # S: [Dk, Dv], z: [Dk]
        # It is all the last query needs: phi(q)^T S / phi(q)^T z is the causal output.
        last = phi(q[-1])  # [Dk]
        torch.testing.assert_close(
            last @ state / (last @ normaliser), linear_attention(q, k, v)[-1]
        )
        sizes.add(state.numel() + normaliser.numel())
    assert len(sizes) == 1
    return sizes.pop()


def _cache_passes_linear_state() -> float:
    from attention_lab.caches import KVCache

    state = _linear_attention_state_numbers()
    for tokens in range(1, 1000):
        cache = KVCache(batch_size=1, num_heads=1, head_dim=128, max_len=tokens)
        if cache.keys.numel() + cache.values.numel() > state:
            return tokens
    raise AssertionError("the cache never passed the state")


def _pairs_an_8_by_8_state_holds() -> float:
    """The most pairs with random values that the best 8 x 8 state returns exactly."""
    generator = torch.Generator().manual_seed(0)
    held = 0
    for n in range(1, 17):
        keys = torch.randn(n, 8, generator=generator, dtype=torch.float64)
        values = torch.randn(n, 8, generator=generator, dtype=torch.float64)
        best = torch.linalg.lstsq(keys, values).solution
        if torch.allclose(keys @ best, values, atol=1e-9):
            held = n
    return float(held)


def _gated_share_after_three_steps() -> float:
    from attention_lab.linear import delta_rule

    # A pair written with a unit key, then three steps that write nothing (beta = 0), each
    # forgetting by 0.8; the read along the key is the share kept.
    key = torch.zeros(1, 1, 4, 2, dtype=torch.float64)
    key[..., 0] = 1.0
    value = torch.zeros(1, 1, 4, 1, dtype=torch.float64)
    value[:, :, 0] = 1.0
    beta = torch.tensor([[[1.0, 0.0, 0.0, 0.0]]], dtype=torch.float64)
    decay = torch.full((1, 1, 4), 0.8, dtype=torch.float64).log()
    decay[..., 0] = 0.0  # the write happens at step 0; three decays follow it
    _, state = delta_rule(key, key, value, beta, decay=decay, return_state=True)
    return float(state[0, 0, 0, 0])


def _keys_read_at_position_5_with_k_8() -> float:
    scores = torch.randn(12, 12, generator=torch.Generator().manual_seed(0))
    return float(masks.topk_mask(scores, 8, masks.causal_mask(12))[5].sum())


def _indexer_multiply_adds_per_pair() -> float:
    from transformers import DeepseekV32Config

    config = DeepseekV32Config()  # DeepSeek-V3.2-Exp's sizes
    return float(config.index_n_heads * (config.index_head_dim + 1))


# (quiz file stem, a phrase of the question) -> the answer, recomputed.
def _uniform_alignment_share() -> float:
    # One sentence of every length 4..8 (equally likely), a head uniform over the real words.
    shares = []
    for length in range(4, 9):
        task = reversal_translation_task(1, 11, length, length, seed=0)
        uniform = torch.full((1, length + 1, length), 1 / length)  # [N, T, S]
        per_query = pattern_share(uniform, task.alignment)  # [N, T]
        shares += per_query[task.alignment.any(dim=-1)].tolist()  # the translated words
    return sum(shares) / len(shares)


def _cross_attention_weights() -> float:
    torch.manual_seed(0)
    model = Seq2SeqTransformer(
        11, target_vocab_size=13, d_model=32, num_layers=2, num_heads=2, d_ff=64, max_len=9
    )
    source = torch.randint(1, 11, (1, 8))
    target = torch.randint(1, 13, (1, 9))
    return model(source, target).cross_attentions[0].numel()


RECOMPUTE = {
    ("01_why_attention", "How many scores is that"): _scores_for_twelve_tokens,
    ("01_why_attention", "how many times as many multiply-adds"): _flop_ratio_attention_over_rnn,
    ("02_scaled_dot_product_attention", "What weight does it give key 1"): _worked_example_weight,
    ("02_scaled_dot_product_attention", "variance of the dot product"): _dot_product_variance,
    ("02_scaled_dot_product_attention", "How many numbers does the output"): _output_numel,
    ("03_multi_head_attention", "How wide is each head"): _head_width,
    ("03_multi_head_attention", "How many parameters"): _mha_parameters,
    ("04_positional_encoding", "its wavelength"): _column_0_wavelength,
    ("04_positional_encoding", "squared length"): _encoding_squared_norm,
    ("05_masks", "entries of <code>causal_mask(6)</code>"): _causal_true_count,
    ("05_masks", "entries of <code>combine_masks"): _combined_true_count,
    ("06_transformer_block", "How many parameters does one encoder layer"): (
        _encoder_layer_parameters
    ),
    ("06_transformer_block", "what fraction of the parameters"): _feed_forward_share,
    ("06_transformer_block", "root mean square of one entry"): _encoding_entry_rms,
    ("07_data_for_experiments", "What fraction of the padded batch"): _padding_share,
    ("07_data_for_experiments", "Dogs bark."): _dogs_bark_tokens,
    ("07_data_for_experiments", "output position 2 should attend"): (_reversal_source_of_output_2),
    ("07_data_for_experiments", "What weight lands on the anti-diagonal"): _anti_diagonal_weight,
    ("08_watching_attention_learn", "guesses uniformly among 11 ids"): _uniform_guess_loss,
    ("08_watching_attention_learn", "spreads its weight evenly"): _uniform_anti_diagonal_share,
    ("08_watching_attention_learn", "How many different sequences"): _possible_sequences,
    ("09_attention_in_a_pretrained_model", "How wide is each head"): _minilm_head_width,
    ("09_attention_in_a_pretrained_model", "snowboarder"): _snowboarder_tokens,
    ("09_attention_in_a_pretrained_model", "uniformly over 8 keys"): _uniform_entropy,
    ("10_sentence_similarity", "How many <code>[PAD]</code> tokens"): _hello_padding,
    ("10_sentence_similarity", "$u = (3, 4)$"): _cosine_3_4,
    ("11_cost_of_attention", "How many MiB"): _score_mebibytes,
    ("11_cost_of_attention", "From which length $T$ on"): _products_catch_up_with_projections,
    ("11_cost_of_attention", "key/value cache for one layer"): _cache_numbers,
    ("13_induction_heads", "lowest loss, in nats"): _new_token_loss,
    ("13_induction_heads", "previous-token score on $T = 4$"): _even_head_previous_token_score,
    ("12_decoder_that_writes", "exactly two next tokens"): _coin_flip_floor,
    ("12_decoder_that_writes", "how many of the $21 \\times 21$"): _causal_weights_21,
    ("15_kv_cache_in_a_loop", "How many bytes does its key/value cache"): (
        _gqa_cache_bytes_per_token
    ),
    ("15_kv_cache_in_a_loop", "How many positions does it run"): _positions_without_cache,
    ("17_masks_as_functions", "How many input positions"): _window_receptive_field,
    ("18_positions_past_training_length", "go through at least one full turn"): (
        _rope_pairs_with_a_full_turn
    ),
    ("19_stretching_rope", "how many radians does that pair turn"): _linear_scaled_fastest_turn,
    ("19_stretching_rope", "does that multiply every attention score"): _yarn_score_factor,
    ("17_masks_as_functions", "How many MiB does its cache"): _windowed_cache_mebibytes,
    ("20_attention_that_stays_stable", "What does a score of $s = 500$"): _softcapped_score,
    ("20_attention_that_stays_stable", "spreads its attention evenly"): _even_first_token_share,
    ("16_sharing_keys_and_values", "How many bytes does one token add"): (
        _qwen3_cache_bytes_per_token
    ),
    ("16_sharing_keys_and_values", "multiply-adds is that per byte read"): (
        _multiply_adds_per_byte_read
    ),
    ("14_cross_attention_alignment", "spreads its cross-attention evenly"): (
        _uniform_alignment_share
    ),
    ("14_cross_attention_alignment", "How many cross-attention weights"): (
        _cross_attention_weights
    ),
    ("21_linear_attention_is_an_rnn", "How many numbers does its state hold"): (
        _linear_attention_state_numbers
    ),
    ("21_linear_attention_is_an_rnn", "hold more numbers than the state"): (
        _cache_passes_linear_state
    ),
    ("22_what_a_fixed_state_forgets", "can any way of writing make it"): (
        _pairs_an_8_by_8_state_holds
    ),
    ("22_what_a_fixed_state_forgets", "What share of its value"): _gated_share_after_three_steps,
    ("23_sparse_attention", "How many keys does it attend to"): _keys_read_at_position_5_with_k_8,
    ("23_sparse_attention", "How many multiply-adds does it spend"): (
        _indexer_multiply_adds_per_pair
    ),
}


def recompute_for(path: Path, question: dict):
    found = [
        f
        for (stem, phrase), f in RECOMPUTE.items()
        if stem == path.stem and phrase in question["question"]
    ]
    assert len(found) == 1, (
        f"{path.name}: numeric question without (or with several) entries in RECOMPUTE: "
        f"{question['question'][:80]!r}"
    )
    return found[0]


# --- The tests -------------------------------------------------------------------------------


def test_there_is_a_quiz_for_every_chapter():
    chapters = {p.stem for p in CHAPTERS.glob("*.md")}
    quizzes = {p.stem for p in FILES}
    assert quizzes <= chapters, f"quizzes for no chapter: {sorted(quizzes - chapters)}"
    assert chapters <= quizzes, f"chapters without a quiz: {sorted(chapters - quizzes)}"


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_quiz_file_is_a_short_quiz_of_both_kinds(path):
    quiz = load(path)
    validate_quiz(quiz)  # the library's own check, as show_quiz applies it
    assert 4 <= len(quiz) <= 6, f"{len(quiz)} questions: a chapter quiz has 4 to 6"
    kinds = {q["type"] for q in quiz}
    assert kinds == {"multiple_choice", "numeric"}, f"question types: {kinds}"
    texts = [q["question"] for q in quiz]
    assert len(set(texts)) == len(texts), "two questions have the same text"


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_quiz_text_has_balanced_math_and_markup(path):
    for q in load(path):
        strings = [q["question"]] + [
            a.get(k, "") for a in q["answers"] for k in ("answer", "feedback")
        ]
        for s in strings:
            # jupyterquiz pairs $...$ for MathJax; an odd count leaves raw TeX on the page.
            assert s.replace(r"\$", "").count("$") % 2 == 0, f"unbalanced $ in {s!r}"
            # Markdown backticks are not rendered by jupyterquiz: use <code>.
            assert "`" not in s, f"backtick in {s!r}: write <code>...</code>"
            # Nor is Markdown emphasis: *or* reaches the reader with its asterisks.
            emphasis = re.findall(r"(?<![\w*])\*\w[^*$]*?\*(?![\w*])", s)
            assert not emphasis, f"Markdown emphasis {emphasis} in {s!r}: write <em>...</em>"
            assert s.count("<code>") == s.count("</code>"), f"unclosed <code> in {s!r}"


@pytest.mark.parametrize(("path", "index", "question"), questions("multiple_choice"))
def test_multiple_choice_has_exactly_one_correct_answer_and_feedback_for_each(
    path, index, question
):
    answers = question["answers"]
    assert len(answers) >= 3, "give at least two wrong choices"
    assert [a["correct"] for a in answers].count(True) == 1
    assert all(isinstance(a["correct"], bool) for a in answers)
    assert all(a.get("feedback", "").strip() for a in answers), "every choice needs feedback"


def correct_is_strictly_longest(question: dict) -> bool:
    """Whether the correct choice of a multiple-choice question is longer than every other."""
    lengths = [len(a["answer"]) for a in question["answers"]]
    right = [a["correct"] for a in question["answers"]].index(True)
    return lengths[right] > max(n for j, n in enumerate(lengths) if j != right)


def test_length_does_not_give_the_multiple_choice_answer_away():
    """Picking the longest choice must not pass a quiz.

    Over all quizzes, at most 35% of the multiple-choice questions may have their correct
    choice strictly the longest, and no quiz more than half of its own (1 of 3, 2 of 4).
    """
    counts = {}  # quiz stem -> (questions whose correct choice is longest, questions)
    for path in FILES:
        choice = [q for q in load(path) if q["type"] == "multiple_choice"]
        counts[path.stem] = (sum(map(correct_is_strictly_longest, choice)), len(choice))
    longest = sum(k for k, _ in counts.values())
    total = sum(n for _, n in counts.values())
    assert longest <= 0.35 * total, (
        f"the correct choice is strictly the longest in {longest} of {total} "
        f"multiple-choice questions ({longest / total:.0%}; at most 35%)"
    )
    crowded = {stem: f"{k} of {n}" for stem, (k, n) in counts.items() if k > n // 2}
    assert not crowded, f"quizzes where the longest choice is mostly the correct one: {crowded}"


@pytest.mark.parametrize(("path", "index", "question"), questions("numeric"))
def test_numeric_answer_is_recomputed_and_graded_correct(path, index, question):
    expected = recompute_for(path, question)()
    assert grade(question, expected) is True, (
        f"the recomputed answer {expected} is not graded correct"
    )
    # The correct answers agree with the recomputed value, not only contain it.
    for answer in question["answers"]:
        if answer.get("correct") and "value" in answer:
            assert math.isclose(answer["value"], expected, rel_tol=1e-9), answer
        if answer.get("correct") and "range" in answer:
            low, high = answer["range"]
            assert high - low <= 0.025 * abs(expected) + 1e-12, f"range {answer['range']} is loose"


@pytest.mark.parametrize(("path", "index", "question"), questions("numeric"))
def test_numeric_wrong_answers_are_graded_wrong(path, index, question):
    answers = question["answers"]
    assert answers[-1]["type"] == "default" and answers[-1]["feedback"].strip()
    for answer in answers:
        if answer.get("correct") is False and "value" in answer:
            assert grade(question, answer["value"]) is False, answer
        if answer.get("correct") is False and "range" in answer:
            low, high = answer["range"]
            assert grade(question, (low + high) / 2) is False, answer
    # A number far from every answer falls through to the default feedback.
    assert grade(question, 123456.789) is None


def test_grade_follows_jupyterquiz_rules():
    question = {
        "precision": 2,
        "answers": [
            {"type": "value", "value": 0.9094, "correct": True},
            {"type": "range", "range": [1, 2], "correct": False},
            {"type": "default"},
        ],
    }
    assert grade(question, 0.91) is True  # 0.9094 -> "0.91"
    assert grade(question, 0.92) is None
    assert grade(question, 1) is False and grade(question, 2) is None  # [low, high)


def test_quiz_cells_point_at_existing_quiz_files():
    """A chapter that shows a quiz names its own file, which exists."""
    for chapter in sorted(CHAPTERS.glob("*.md")):
        for target in re.findall(r"show_quiz\(\s*[\"']([^\"']+)[\"']", chapter.read_text()):
            path = (chapter.parent / target).resolve()
            assert path.is_file(), f"{chapter.name}: show_quiz({target!r}): no such file"
            assert path.stem == chapter.stem, f"{chapter.name} shows another chapter's quiz"


def test_masks_quiz_wrong_answers_are_the_mistakes_their_feedback_names():
    """Chapter 05's combined-mask question: each wrong count is the mistake its feedback names."""
    ids = torch.tensor([[5, 7, 9, 0, 0]])  # [B, T]
    causal, padding = masks.causal_mask(5), masks.padding_mask(ids)  # [T, T], [B, 1, 1, T]
    real = ids[0] != 0  # [T]
    no_causal = padding[0, 0].expand(5, 5)  # [T, T]: the causal mask forgotten
    assert no_causal[real].sum().item() == 9  # 3 x 3: real queries, real keys
    assert causal.sum().item() == 15  # the causal mask alone
    combined = masks.combine_masks(causal, padding)[0, 0]  # [T, T]
    assert combined[real].sum().item() == 6  # padding queries' rows dropped
    quiz = load(CHAPTERS.parent / "quizzes" / "05_masks.json")
    feedback = {
        a["value"]: a["feedback"]
        for q in quiz
        if "combine_masks" in q["question"]
        for a in q["answers"]
        if "value" in a
    }
    assert "3 × 3" in feedback[9] and "causal mask forgotten" in feedback[9]
    assert "causal mask alone" in feedback[15]
    assert "padding queries' rows" in feedback[6]
