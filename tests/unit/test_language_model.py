"""Tests for attention_lab.language_model: the decoder against PyTorch's own layers, the cache
against the full computation, causality, generation, and the bracket language's rules."""

import dataclasses
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from attention_lab.attention_config import AttentionConfig
from attention_lab.caches import KVCache
from attention_lab.language_model import (
    BracketLanguage,
    DecoderConfig,
    DecoderLM,
    RecurrentLayer,
    generate,
    next_token_data,
)
from attention_lab.layers import EncoderLayer
from attention_lab.linear import RecurrentState
from attention_lab.masks import causal_mask, padding_mask
from attention_lab.positional import sinusoidal_encoding
from attention_lab.training import evaluate, train
from support.tensors import rope_scalings

CONFIG = DecoderConfig(vocab_size=7, max_len=12, d_model=16, num_layers=2, num_heads=4, d_ff=24)


def make_model(config=CONFIG, seed=0, dtype=torch.float64):
    torch.manual_seed(seed)
    return DecoderLM(config).to(dtype).eval()


def random_ids(batch, length, vocab=CONFIG.vocab_size, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, (batch, length), generator=generator)  # [B, T]


# --- Against PyTorch's own layers ------------------------------------------------------------


def torch_twin(model):
    """PyTorch pre-norm layers with random weights, copied into ``model``; returns them."""
    config = model.config
    torch.manual_seed(1)
    reference = [
        nn.TransformerEncoderLayer(
            config.d_model,
            config.num_heads,
            config.d_ff,
            dropout=0.0,
            activation="gelu",
            norm_first=True,
            batch_first=True,
        )
        .double()
        .eval()
        for _ in range(config.num_layers)
    ]
    model.layers = nn.ModuleList(EncoderLayer.from_torch(layer) for layer in reference)
    return reference


def reference_logits(model, reference, token_ids, blocked_pairs=None, blocked_keys=None):
    """The logits computed with PyTorch's layers; masks in PyTorch's polarity (True = blocked)."""
    config = model.config
    x = model.embedding(token_ids) * math.sqrt(config.d_model)  # [B, T, D]
    x = x + sinusoidal_encoding(config.max_len, config.d_model).double()[: token_ids.shape[1]]
    for layer in reference:
        x = layer(x, src_mask=blocked_pairs, src_key_padding_mask=blocked_keys)
    return model.head(model.final_norm(x))  # [B, T, V]


@pytest.mark.parametrize("length", [1, 5, 12])
def test_matches_torch_encoder_layers_with_a_causal_mask(length):
    model = make_model()
    reference = torch_twin(model)
    token_ids = random_ids(3, length)
    with torch.no_grad():
        logits, attentions = model(token_ids)
        expected = reference_logits(model, reference, token_ids, ~causal_mask(length))
    assert logits.shape == (3, length, CONFIG.vocab_size)
    assert [a.shape for a in attentions] == [(3, CONFIG.num_heads, length, length)] * 2
    torch.testing.assert_close(logits, expected)


def test_matches_torch_with_causal_and_padding_masks():
    model = make_model()
    reference = torch_twin(model)
    token_ids = random_ids(3, 8, seed=2)
    token_ids[:, 0] = 1  # never padding
    token_ids[0, 5:] = 0
    with torch.no_grad():
        logits, _ = model(token_ids, padding_mask(token_ids))
        expected = reference_logits(
            model, reference, token_ids, ~causal_mask(8), blocked_keys=token_ids == 0
        )
    # Padded positions may differ: PyTorch's fast path zeroes them.
    keep = token_ids != 0
    torch.testing.assert_close(logits[keep], expected[keep])


def test_without_the_causal_mask_matches_torch_unmasked():
    model = make_model(dataclass_replace(CONFIG, causal=False))
    reference = torch_twin(model)
    token_ids = random_ids(2, 9, seed=3)
    with torch.no_grad():
        logits, _ = model(token_ids)
        expected = reference_logits(model, reference, token_ids)
    torch.testing.assert_close(logits, expected)


# The position signals by name, as DecoderConfig fields (a rotary embedding and ALiBi live in
# the attention's config).
SIGNALS = {
    "sinusoidal": {"position_embedding": "sinusoidal"},
    "learned": {"position_embedding": "learned"},
    "rope": {"position_embedding": None, "rope_layout": "half"},
    "alibi": {"position_embedding": None, "alibi": True},
    "none": {"position_embedding": None},
}
ATTENTION_FIELDS = {field.name for field in dataclasses.fields(AttentionConfig)}


def dataclass_replace(config, *, positions=None, **changes):
    """``config`` with ``changes``: its own fields, the fields of its ``attention`` (replaced in
    a new AttentionConfig) and a position signal of ``SIGNALS`` by name."""
    if positions is not None:
        changes = {**SIGNALS[positions], **changes}
    attention = {name: changes.pop(name) for name in list(changes) if name in ATTENTION_FIELDS}
    if attention:
        changes["attention"] = dataclasses.replace(config.attention, **attention)
    return dataclasses.replace(config, **changes)


# --- Hybrids: recurrent layers beside attention (Part VII) --------------------------------------

HYBRID = dataclass_replace(CONFIG, layer_types=("gated_delta", "attention"))


def test_layer_types_of_attention_only_build_the_model_of_none():
    torch.manual_seed(0)
    default = DecoderLM(CONFIG)
    torch.manual_seed(0)
    named = DecoderLM(dataclass_replace(CONFIG, layer_types=("attention", "attention")))
    torch.testing.assert_close(default.state_dict(), named.state_dict(), rtol=0, atol=0)


@pytest.mark.parametrize("rule", ["gated_delta", "delta", "linear"])
def test_a_hybrid_stacks_its_layer_types_bottom_up_and_stays_causal(rule):
    model = make_model(dataclass_replace(CONFIG, layer_types=(rule, "attention")))
    first, second = model.layers
    assert isinstance(first, RecurrentLayer) and first.mixer.rule == rule
    assert isinstance(second, EncoderLayer)
    assert first.mixer.num_value_heads == 4 and first.mixer.value_dim == 4  # as wide as H * Dh
    token_ids = random_ids(2, CONFIG.max_len, seed=4)
    changed = token_ids.clone()
    changed[:, 8:] = (changed[:, 8:] + 1) % CONFIG.vocab_size
    with torch.no_grad():
        logits, attentions = model(token_ids)
        later, _ = model(changed)
    assert attentions[0] is None and attentions[1].shape == (2, 4, 12, 12)
    torch.testing.assert_close(later[:, :8], logits[:, :8])  # the past never reads the future
    assert (later[:, 8:] - logits[:, 8:]).abs().max() > 1e-3


def test_a_hybrid_generates_the_same_tokens_with_and_without_its_caches():
    model = make_model(HYBRID)
    prompt = random_ids(2, 3, seed=5)
    ids = generate(model, prompt, 4, greedy=True, use_cache=False)
    with torch.no_grad():  # each greedy token is the argmax of the full logits before it
        for step in range(3, 7):
            expected = model(ids[:, :step])[0][:, -1].argmax(dim=-1)
            assert torch.equal(ids[:, step], expected)
    assert torch.equal(generate(model, prompt, 4, greedy=True), ids)
    sampled = generate(model, prompt, 8, seed=3, use_cache=False)
    assert torch.equal(generate(model, prompt, 8, seed=3), sampled)
    with pytest.raises(ValueError, match="takes no mask"):
        model(prompt, padding_mask(prompt))


@pytest.mark.parametrize(
    "layer_types",
    [("gated_delta", "attention"), ("attention", "delta"), ("linear", "gated_delta")],
)
def test_a_hybrid_decoded_in_pieces_gives_the_logits_of_the_whole(layer_types):
    """Prompt, single tokens, then pieces shorter and longer than the convolution's window
    (3 positions): each recurrent layer's state and window carry across the calls."""
    model = make_model(dataclass_replace(CONFIG, layer_types=layer_types))
    token_ids = random_ids(2, CONFIG.max_len, seed=6)
    with torch.no_grad():
        whole, attentions = model(token_ids)
        caches = model.new_caches(2)
        pieces, start = [], 0
        for size in (4, 1, 1, 2, 4):
            logits, weights = model.decode(token_ids[:, start : start + size], caches)
            pieces.append(logits)
            start += size
    torch.testing.assert_close(torch.cat(pieces, dim=1), whole)
    recurrent = [t != "attention" for t in layer_types]
    assert [w is None for w in weights] == recurrent
    for cache, is_recurrent in zip(caches, recurrent, strict=True):
        assert isinstance(cache, RecurrentState if is_recurrent else KVCache)
        assert len(cache) == CONFIG.max_len


def test_a_recurrent_state_keeps_its_size_and_refuses_what_does_not_fit():
    model = make_model(HYBRID)
    caches = model.new_caches(2)
    state, cache = caches
    before = state.nbytes
    mixer = model.layers[0].mixer
    assert state.state.shape == (2, mixer.num_value_heads, mixer.key_dim, mixer.value_dim)
    with torch.no_grad():
        model.decode(random_ids(2, 5, seed=7), caches)
    assert state.nbytes == before and len(state) == len(cache) == 5
    with pytest.raises(ValueError, match="holds 5 positions and max_len=12: 8 more"):
        mixer(torch.zeros(2, 8, CONFIG.d_model, dtype=torch.float64), state)
    with pytest.raises(ValueError, match="layer 0 needs a RecurrentState"):
        model.decode(random_ids(2, 1, seed=7), [cache, cache])
    with pytest.raises(ValueError, match="for 2 sequences"):
        mixer(torch.zeros(3, 1, CONFIG.d_model, dtype=torch.float64), state)
    with pytest.raises(TypeError, match="must be a RecurrentState"):
        mixer(torch.zeros(2, 1, CONFIG.d_model, dtype=torch.float64), cache)


def test_a_hybrid_trains_with_the_library_s_loop():
    model = make_model(HYBRID, dtype=torch.float32).train()
    inputs, targets = next_token_data(BracketLanguage(max_depth=2, max_brackets=6).sample(64))
    losses = train(model, inputs, targets, steps=30, batch_size=16, lr=3e-3, pad_id=None)
    assert sum(losses[-5:]) / 5 < 0.8 * sum(losses[:5]) / 5
    assert all(parameter.grad is not None for parameter in model.layers[0].mixer.parameters())


# --- Causality ------------------------------------------------------------------------------


@given(
    length=st.integers(2, CONFIG.max_len),
    position=st.data(),
    seed=st.integers(0, 2**16),
)
def test_changing_a_later_token_never_changes_earlier_logits(length, position, seed):
    model = make_model()
    token_ids = random_ids(2, length, seed=seed)
    changed_at = position.draw(st.integers(1, length - 1))
    changed = token_ids.clone()
    changed[:, changed_at] = (changed[:, changed_at] + 1) % CONFIG.vocab_size
    with torch.no_grad():
        before, _ = model(token_ids)
        after, _ = model(changed)
    # Exactly equal: the blocked scores get weight 0, so the later token adds nothing at all.
    assert torch.equal(before[:, :changed_at], after[:, :changed_at])
    assert not torch.equal(before[:, changed_at:], after[:, changed_at:])


def test_without_the_mask_a_later_token_changes_earlier_logits():
    model = make_model(dataclass_replace(CONFIG, causal=False))
    token_ids = random_ids(2, 6, seed=4)
    changed = token_ids.clone()
    changed[:, 5] = (changed[:, 5] + 1) % CONFIG.vocab_size
    with torch.no_grad():
        before, _ = model(token_ids)
        after, _ = model(changed)
    assert (before[:, 0] - after[:, 0]).abs().max() > 1e-6


# --- The key/value cache --------------------------------------------------------------------


@given(
    length=st.integers(1, CONFIG.max_len),
    prompt=st.data(),
    seed=st.integers(0, 2**16),
)
def test_decoding_in_pieces_gives_the_full_logits(length, prompt, seed):
    model = make_model()
    token_ids = random_ids(2, length, seed=seed)
    prompt_len = prompt.draw(st.integers(1, length))
    with torch.no_grad():
        full, full_attentions = model(token_ids)
        caches = model.new_caches(2)
        pieces = [model.decode(token_ids[:, :prompt_len], caches)[0]]
        for t in range(prompt_len, length):
            logits, attentions = model.decode(token_ids[:, t : t + 1], caches)
            pieces.append(logits)
    torch.testing.assert_close(torch.cat(pieces, dim=1), full)
    assert all(len(cache) == length for cache in caches)
    if length > prompt_len:  # the last step's weights are the last row of the full weights
        for step, whole in zip(attentions, full_attentions, strict=True):
            torch.testing.assert_close(step[:, :, 0], whole[:, :, -1])


@pytest.mark.parametrize("greedy", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_generate_gives_the_same_tokens_with_and_without_the_cache(greedy, dtype):
    model = make_model(dtype=dtype)
    prompts = random_ids(4, 3, seed=5)
    cached = generate(model, prompts, 9, greedy=greedy, seed=3, use_cache=True)
    recomputed = generate(model, prompts, 9, greedy=greedy, seed=3, use_cache=False)
    assert cached.shape == (4, 12)
    assert torch.equal(cached[:, :3], prompts)
    assert torch.equal(cached, recomputed)


def test_greedy_takes_the_argmax_of_the_full_logits_at_every_step():
    model = make_model()
    generated = generate(model, random_ids(3, 2, seed=6), 8, greedy=True)
    with torch.no_grad():
        logits, _ = model(generated[:, :-1])  # [B, T - 1, V]
    # Each new token (from position 2 on) is the argmax of the logits one position before.
    assert torch.equal(generated[:, 2:], logits[:, 1:].argmax(dim=-1))


def test_sampling_is_seeded_and_a_cold_temperature_is_greedy():
    model = make_model()
    prompts = random_ids(16, 2, seed=7)
    first = generate(model, prompts, 8, seed=1)
    assert torch.equal(first, generate(model, prompts, 8, seed=1))
    assert not torch.equal(first, generate(model, prompts, 8, seed=2))
    greedy = generate(model, prompts, 8, greedy=True)
    assert torch.equal(generate(model, prompts, 8, temperature=1e-4), greedy)


def test_sampling_follows_the_models_distribution():
    model = make_model(dtype=torch.float32)
    prompt = torch.tensor([[1, 2]])
    with torch.no_grad():
        expected = torch.softmax(model(prompt)[0][0, -1] / 2.0, dim=-1)  # [V]
    draws = generate(model, prompt.repeat(4000, 1), 1, temperature=2.0, seed=0)[:, -1]
    observed = torch.bincount(draws, minlength=CONFIG.vocab_size) / 4000
    # 4000 draws: a share p has standard error sqrt(p(1-p)/4000) <= 0.008; 0.04 is 5 of them.
    torch.testing.assert_close(observed, expected, atol=0.04, rtol=0)


def test_generate_leaves_the_mode_and_zero_new_tokens_returns_the_prompt():
    model = make_model().train()
    prompts = random_ids(2, 4, seed=8)
    assert torch.equal(generate(model, prompts, 0), prompts)
    generate(model, prompts, 3)
    assert model.training


# --- Shared key/value heads (grouped-query and multi-query attention) -----------------------


def test_num_kv_heads_none_and_num_heads_build_the_same_model():
    torch.manual_seed(0)
    default = DecoderLM(CONFIG)
    torch.manual_seed(0)
    explicit = DecoderLM(dataclass_replace(CONFIG, num_kv_heads=CONFIG.num_heads))
    assert CONFIG.attention.num_kv_heads is None
    torch.testing.assert_close(default.state_dict(), explicit.state_dict(), rtol=0, atol=0)


def grouped_as_multi_head(model):
    """A multi-head twin of a grouped-query ``model``: each key/value head's projection rows
    copied to every query head of its group (query head h reads key/value head h // group)."""
    config = model.config
    twin = make_model(dataclass_replace(config, num_kv_heads=None))
    twin.load_state_dict(
        {
            name: tensor
            for name, tensor in model.state_dict().items()
            if ".k_proj." not in name and ".v_proj." not in name
        },
        strict=False,
    )
    group = config.num_heads // config.attention.num_kv_heads
    head_dim = config.d_model // config.num_heads
    with torch.no_grad():
        for mine, theirs in zip(twin.layers, model.layers, strict=True):
            for name in ("k_proj", "v_proj"):
                source, target = getattr(theirs.self_attn, name), getattr(mine.self_attn, name)
                weight = source.weight.view(config.attention.num_kv_heads, head_dim, config.d_model)
                target.weight.copy_(weight.repeat_interleave(group, dim=0).flatten(0, 1))
                bias = source.bias.view(config.attention.num_kv_heads, head_dim)
                target.bias.copy_(bias.repeat_interleave(group, dim=0).flatten())
    return twin


@pytest.mark.parametrize("num_kv_heads", [1, 2])
def test_grouped_model_is_the_multi_head_model_with_shared_key_value_heads(num_kv_heads):
    model = make_model(dataclass_replace(CONFIG, num_kv_heads=num_kv_heads), seed=3)
    twin = grouped_as_multi_head(model)
    token_ids = random_ids(3, CONFIG.max_len, seed=6)
    with torch.no_grad():
        logits, attentions = model(token_ids)
        expected, expected_attentions = twin(token_ids)
    for layer in model.layers:
        assert layer.self_attn.k_proj.out_features == num_kv_heads * 4  # Hkv * Dh
    torch.testing.assert_close(logits, expected)
    for mine, theirs in zip(attentions, expected_attentions, strict=True):
        torch.testing.assert_close(mine, theirs)


@pytest.mark.parametrize("num_kv_heads", [1, 2])
def test_grouped_caches_hold_num_kv_heads_and_decode_the_full_logits(num_kv_heads):
    model = make_model(dataclass_replace(CONFIG, num_kv_heads=num_kv_heads), seed=4)
    token_ids = random_ids(2, CONFIG.max_len, seed=7)
    caches = model.new_caches(2)
    assert [c.keys.shape for c in caches] == [(2, num_kv_heads, CONFIG.max_len, 4)] * 2
    with torch.no_grad():
        full, _ = model(token_ids)
        pieces = [model.decode(token_ids[:, :3], caches)[0]]
        pieces += [model.decode(token_ids[:, t : t + 1], caches)[0] for t in range(3, 12)]
    torch.testing.assert_close(torch.cat(pieces, dim=1), full)
    prompts = random_ids(2, 2, seed=8)
    for greedy in (True, False):
        cached = generate(model, prompts, 8, greedy=greedy, seed=1)
        assert torch.equal(
            cached, generate(model, prompts, 8, greedy=greedy, seed=1, use_cache=False)
        )


# --- Position signals and stabilisers ---------------------------------------------------------

POSITION_CONFIGS = [{"positions": kind} for kind in SIGNALS if kind != "sinusoidal"] + [
    {"positions": "rope", "rope_base": 500000.0, "num_kv_heads": 2},
    {"positions": "rope", "rope_scaling": {"rope_type": "linear", "factor": 4.0}},
    {"positions": "alibi", "qk_norm": True, "sinks": True, "softcap": 3.0},
    {"positions": "none", "sinks": True},
]


def decoded_in_pieces(model, token_ids, prompt):
    """``model``'s logits for ``token_ids`` [B, T] decoded with its caches (the first
    ``prompt`` tokens at once, then one token a step), and its full pass's logits."""
    caches = model.new_caches(token_ids.shape[0])
    with torch.no_grad():
        full, _ = model(token_ids)
        pieces = [model.decode(token_ids[:, :prompt], caches)[0]]
        pieces += [
            model.decode(token_ids[:, t : t + 1], caches)[0]
            for t in range(prompt, token_ids.shape[1])
        ]
    return torch.cat(pieces, dim=1), full


@pytest.mark.parametrize("changes", POSITION_CONFIGS, ids=repr)
def test_every_position_signal_decodes_in_pieces_to_the_full_logits(changes):
    model = make_model(dataclass_replace(CONFIG, **changes), seed=9)
    token_ids = random_ids(2, CONFIG.max_len, seed=10)
    decoded, full = decoded_in_pieces(model, token_ids, prompt=5)
    torch.testing.assert_close(decoded, full)


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({}, {}),
        ({"positions": "learned"}, {}),
        ({"positions": "none"}, {}),
        ({"positions": "alibi"}, {"alibi": True}),
        ({"positions": "rope", "rope_base": 5e5}, {"rope_layout": "half", "rope_base": 5e5}),
        ({"qk_norm": True, "sinks": True, "softcap": 30.0}, {"softcap": 30.0}),
    ],
    ids=repr,
)
def test_the_config_reaches_every_attention_layer(changes, expected):
    model = make_model(dataclass_replace(CONFIG, **changes))
    for layer in model.layers:
        attention = layer.self_attn
        assert attention.config is model.config.attention
        assert attention.config.alibi is expected.get("alibi", False)
        assert attention.config.rope_layout == expected.get("rope_layout")
        assert attention.config.rope_base == expected.get("rope_base", 1e4)
        assert attention.config.softcap == expected.get("softcap")
        assert (attention.q_norm is not None) is changes.get("qk_norm", False)
        assert (attention.sink_logits is not None) is changes.get("sinks", False)
    position_tensors = {
        name for name, _ in model.named_parameters() if name.startswith("position")
    } | {name for name, _ in model.named_buffers() if name.startswith("position")}
    kind = changes.get("positions", "sinusoidal")
    assert position_tensors == {
        "sinusoidal": {"position_encoding"},
        "learned": {"position_embedding.weight"},
    }.get(kind, set())


def test_a_learned_table_adds_its_rows_to_the_token_embeddings():
    model = make_model(dataclass_replace(CONFIG, positions="learned"), seed=11)
    reference = torch_twin(model)
    token_ids = random_ids(2, 9, seed=12)
    x = model.embedding(token_ids) * math.sqrt(CONFIG.d_model)  # [B, T, D]
    x = x + model.position_embedding.weight[:9]
    for layer in reference:
        x = layer(x, src_mask=~causal_mask(9))
    with torch.no_grad():
        logits, _ = model(token_ids)
        torch.testing.assert_close(logits, model.head(model.final_norm(x)))


@pytest.mark.parametrize("kind", SIGNALS)
def test_a_longer_model_takes_the_trained_weights_unless_positions_are_a_table(kind):
    short = make_model(dataclass_replace(CONFIG, positions=kind, max_len=6), seed=13)
    longer = make_model(dataclass_replace(CONFIG, positions=kind, max_len=24), seed=14)
    if kind == "learned":
        with pytest.raises(RuntimeError, match="position_embedding.weight"):
            longer.load_state_dict(short.state_dict())
        with pytest.raises(ValueError, match="max_len=6"):
            short(random_ids(1, 7))
        return
    longer.load_state_dict(short.state_dict())
    token_ids = random_ids(2, 20, seed=15)
    with torch.no_grad():
        torch.testing.assert_close(longer(token_ids[:, :6])[0], short(token_ids[:, :6])[0])
        assert torch.isfinite(longer(token_ids)[0]).all()


# --- Training with the library's loop -------------------------------------------------------


def test_training_learns_the_bracket_language_down_to_its_floor():
    language = BracketLanguage(max_depth=2, max_brackets=6)
    inputs, targets = next_token_data(language.sample(512, seed=0))
    allowed = language.allowed_next(inputs)  # [N, T, V]
    floor = allowed.sum(dim=-1).float().log()[targets != 0].mean().item()
    torch.manual_seed(0)
    model = DecoderLM(DecoderConfig(vocab_size=5, max_len=language.max_len, d_model=16))
    before = evaluate(model, inputs, targets).loss
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matrices: more threads only wait for each other
    try:
        train(model, inputs, targets, steps=200, batch_size=32, lr=3e-3)
    finally:
        torch.set_num_threads(threads)
    after = evaluate(model, inputs, targets).loss
    # From near log(5) = 1.6 to within 0.1 of the floor (the uniform speaker's entropy), which
    # no next-token predictor can beat on average.
    assert before > 1.2 and after < floor + 0.1
    generated = generate(model, torch.full((200, 1), language.BOS), language.max_len - 1)
    assert language.is_valid(generated).float().mean() > 0.9


# --- The bracket language -------------------------------------------------------------------


def allowed_by_rules(prefix, language):
    """The next tokens a prefix allows, straight from the rules, one sentence at a time."""
    if not prefix or prefix[0] != language.BOS:
        return set()
    depth = brackets = 0
    for token in prefix[1:]:
        if token not in (language.OPEN, language.CLOSE):
            return set()
        depth += 1 if token == language.OPEN else -1
        brackets += 1
        if not 0 <= depth <= language.max_depth:
            return set()
    allowed = set()
    if depth < language.max_depth and brackets + 2 + depth <= language.max_brackets:
        allowed.add(language.OPEN)
    if depth > 0:
        allowed.add(language.CLOSE)
    if depth == 0 and brackets >= 2:
        allowed.add(language.EOS)
    return allowed


# Cheap examples (no model): more than the suite's budget.
@settings(max_examples=60)
@given(
    rows=st.lists(st.lists(st.integers(0, 4), min_size=1, max_size=10), min_size=1, max_size=4),
    max_depth=st.integers(1, 3),
)
def test_allowed_next_follows_the_rules(rows, max_depth):
    language = BracketLanguage(max_depth=max_depth, max_brackets=8)
    length = max(len(row) for row in rows)
    rows = [[1] + row + [0] * (length - len(row)) for row in rows]  # BOS first
    allowed = language.allowed_next(torch.tensor(rows))  # [B, T, V]
    for b, row in enumerate(rows):
        for t in range(len(row)):
            expected = allowed_by_rules(row[: t + 1], language)
            assert set(allowed[b, t].nonzero().flatten().tolist()) == expected


def test_sampled_sentences_are_valid_and_use_every_length():
    language = BracketLanguage(max_depth=3, max_brackets=10)
    sentences = language.sample(500, seed=0)
    assert sentences.shape == (500, 12)
    assert language.is_valid(sentences).all()
    lengths = (sentences > language.EOS).sum(dim=1)
    assert set(lengths.tolist()) == {2, 4, 6, 8, 10}
    assert torch.equal(sentences, language.sample(500, seed=0))


@pytest.mark.parametrize(
    ("text", "valid"),
    [
        ("()", True),
        ("(())()", True),
        ("", False),  # no brackets
        (")(", False),
        ("(()", False),  # unclosed
        ("((((()))))", False),  # deeper than 4
    ],
)
def test_is_valid_on_hand_written_sentences(text, valid):
    language = BracketLanguage()
    ids = [1] + [3 if c == "(" else 4 for c in text] + [2, 3, 3]  # junk after EOS is ignored
    assert language.is_valid(torch.tensor([ids])).tolist() == [valid]
    assert language.text(torch.tensor(ids)) == text


def test_a_row_without_eos_is_not_valid():
    assert not BracketLanguage().is_valid(torch.tensor([[1, 3, 4, 3, 4]])).any()


def test_next_token_data_shifts_by_one():
    sentences = BracketLanguage().sample(4, seed=1)
    inputs, targets = next_token_data(sentences)
    assert torch.equal(inputs[:, 1:], targets[:, :-1])
    assert torch.equal(inputs[:, 0], sentences[:, 0])


# --- Errors ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "error", "message"),
    [
        ({"d_model": 10, "num_heads": 4}, ValueError, "not divisible"),
        ({"vocab_size": 0}, ValueError, "vocab_size"),
        ({"max_len": 2.5}, TypeError, "max_len"),
        ({"dropout": 1.0}, ValueError, "dropout"),
        ({"causal": 1}, TypeError, "causal"),
        ({"activation": "tanh"}, ValueError, "activation"),
        ({"num_kv_heads": 3}, ValueError, "num_kv_heads=3"),
        ({"num_kv_heads": 0}, ValueError, "num_kv_heads"),
        ({"num_kv_heads": 2.0}, TypeError, "num_kv_heads"),
        ({"position_embedding": "absolute"}, ValueError, "position_embedding must be None"),
        ({"positions": "alibi", "rope_base": 5e5}, ValueError, "need a rotary embedding"),
        ({"rope_layout": "half"}, ValueError, "'sinusoidal' and a rotary embedding .* two"),
        ({"position_embedding": "learned", "alibi": True}, ValueError, "'learned' and ALiBi"),
        ({"positions": "rope", "alibi": True}, ValueError, "two position signals"),
        ({"attention": {"alibi": True}}, TypeError, "must be an AttentionConfig"),
        ({"rope_scaling": {"rope_type": "linear", "factor": 2.0}}, ValueError, "rope_scaling"),
        ({"positions": "rope", "rope_base": 1.0}, ValueError, "rope_base"),
        ({"positions": "rope", "rope_scaling": {"rope_type": "cubic"}}, ValueError, "cubic"),
        ({"qk_norm": 1}, TypeError, "qk_norm"),
        ({"sinks": "yes"}, TypeError, "sinks"),
        ({"softcap": 0.0}, ValueError, "softcap"),
        ({"layer_types": ["delta", "attention"]}, TypeError, "tuple of str"),
        ({"layer_types": ("delta",)}, ValueError, "num_layers=2 layers, got 1"),
        ({"layer_types": ("delta", "mamba")}, ValueError, r"among .*\['mamba'\]"),
        ({"layer_types": ("delta", "attention"), "causal": False}, ValueError, "causal=False"),
    ],
)
def test_config_errors(changes, error, message):
    with pytest.raises(error, match=message):
        DecoderLM(dataclass_replace(CONFIG, **changes))


def test_config_is_frozen_and_model_needs_one():
    with pytest.raises(AttributeError):
        CONFIG.d_model = 8
    with pytest.raises(TypeError, match="DecoderConfig"):
        DecoderLM({"vocab_size": 5})
    with pytest.raises(TypeError, match="not both"):
        DecoderLM(CONFIG, d_model=8)


def test_keyword_arguments_build_the_model_of_the_config():
    fields = {"max_len": 12, "d_model": 16, "num_layers": 2, "num_heads": 4, "d_ff": 24}
    torch.manual_seed(0)
    from_keywords = DecoderLM(7, **fields)
    assert from_keywords.config == CONFIG
    torch.manual_seed(0)
    torch.testing.assert_close(DecoderLM(CONFIG).state_dict(), from_keywords.state_dict())


def test_forward_errors():
    model = make_model()
    with pytest.raises(TypeError, match="integer dtype"):
        model(torch.zeros(1, 3))
    with pytest.raises(ValueError, match="vocab_size"):
        model(torch.tensor([[1, 7]]))
    with pytest.raises(ValueError, match="max_len=12"):
        model(random_ids(1, 13))
    with pytest.raises(TypeError, match="bool"):
        model(random_ids(1, 3), torch.ones(1, 1, 1, 3))
    with pytest.raises(ValueError, match=r"broadcast.*\[3, 3\], \[1, 1, 1, 4\]"):
        model(random_ids(1, 3), torch.ones(1, 1, 1, 4, dtype=torch.bool))


def test_generate_and_decode_errors():
    model = make_model()
    prompt = random_ids(1, 3)
    with pytest.raises(TypeError, match="DecoderLM"):
        generate(nn.Linear(2, 2), prompt, 2)
    with pytest.raises(ValueError, match="P = 0"):
        generate(model, prompt[:, :0], 2)
    with pytest.raises(ValueError, match="exceeds"):
        generate(model, prompt, 10)
    with pytest.raises(ValueError, match="temperature"):
        generate(model, prompt, 2, temperature=0.0)
    with pytest.raises(TypeError, match="greedy"):
        generate(model, prompt, 2, greedy=1)
    with pytest.raises(ValueError, match="max_new_tokens"):
        generate(model, prompt, -1)
    unmasked = make_model(dataclass_replace(CONFIG, causal=False))
    with pytest.raises(ValueError, match="causal"):
        generate(unmasked, prompt, 2, use_cache=True)
    with pytest.raises(ValueError, match="causal"):
        unmasked.decode(prompt, unmasked.new_caches(1))
    with pytest.raises(ValueError, match="one entry per layer"):
        model.decode(prompt, model.new_caches(1)[:1])
    with pytest.raises(TypeError, match="caches"):
        model.decode(prompt, None)


def test_language_errors():
    with pytest.raises(ValueError, match="even"):
        BracketLanguage(max_brackets=5)
    with pytest.raises(TypeError, match="max_depth"):
        BracketLanguage(max_depth=2.0)
    with pytest.raises(ValueError, match="shape"):
        BracketLanguage().text(torch.tensor([[1, 2]]))
    with pytest.raises(ValueError, match="at least 2 tokens"):
        next_token_data(torch.tensor([[1]]))


# Cached decoding with a scaled rotary embedding (fixed frequencies: the full logits; dynamic:
# refused, since every cached key would need rotating again as the length grows).

ROPE_SCALINGS = rope_scalings(factor=2.0, original=4)
FIXED_ROPE_SCALINGS = {k: v for k, v in ROPE_SCALINGS.items() if k not in ("none", "dynamic")}
DYNAMIC_ROPE = ROPE_SCALINGS["dynamic"]


@pytest.mark.parametrize(
    "scaling", [None, *FIXED_ROPE_SCALINGS.values()], ids=["none", *FIXED_ROPE_SCALINGS]
)
def test_decode_with_a_fixed_rope_scaling_gives_the_full_logits(scaling):
    config = dataclass_replace(CONFIG, positions="rope", rope_scaling=scaling)
    model = make_model(config, seed=9, dtype=torch.float32)
    token_ids = random_ids(2, CONFIG.max_len, seed=10)
    decoded, full = decoded_in_pieces(model, token_ids, prompt=3)
    torch.testing.assert_close(decoded, full, rtol=0, atol=1e-5)


def test_cached_decoding_refuses_dynamic_rope_scaling():
    model = make_model(dataclass_replace(CONFIG, positions="rope", rope_scaling=DYNAMIC_ROPE))
    prompt = random_ids(1, 3)
    with pytest.raises(ValueError, match=r"rope_scaling.*'dynamic'.*re-rotating.*use_cache=False"):
        model.new_caches(1)
    caches = make_model().new_caches(1)  # caches of the right sizes, from a model without rope
    with pytest.raises(ValueError, match=r"rope_scaling.*'dynamic'.*re-rotating"):
        model.decode(prompt, caches)
    with pytest.raises(ValueError, match=r"rope_scaling.*'dynamic'.*pass use_cache=False"):
        generate(model, prompt, 4)
    # Without the cache every step runs the whole sequence, at its own length.
    uncached = generate(model, prompt, 4, greedy=True, use_cache=False)
    expected = prompt
    with torch.no_grad():
        for _ in range(4):
            next_id = model(expected)[0][:, -1].argmax(dim=-1, keepdim=True)
            expected = torch.cat([expected, next_id], dim=1)
    assert torch.equal(uncached, expected)


@pytest.mark.parametrize("scaling", [None, DYNAMIC_ROPE], ids=["none", "dynamic"])
def test_rope_adds_nothing_to_the_state_dict(scaling):
    rotated = make_model(dataclass_replace(CONFIG, positions="rope", rope_scaling=scaling))
    plain = make_model(dataclass_replace(CONFIG, positions="none"))
    assert list(rotated.state_dict()) == list(plain.state_dict())
    plain.load_state_dict(rotated.state_dict())  # strict, both ways
    rotated.load_state_dict(plain.state_dict())


# --- Top-k attention at inference (Part VII) ----------------------------------------------------


@pytest.mark.parametrize("top_k", [1, 3, 12, 20])
def test_a_decoder_with_top_k_reads_each_query_s_top_k_keys(top_k):
    """The same weights under attention.top_k: every attention layer keeps at most top_k
    keys per query (its weights are 0 elsewhere), and top_k >= T is the model unchanged."""
    torch.manual_seed(0)
    dense = DecoderLM(CONFIG).eval()
    sparse = DecoderLM(dataclass_replace(CONFIG, top_k=top_k)).eval()
    sparse.load_state_dict(dense.state_dict())
    tokens = torch.randint(0, CONFIG.vocab_size, (2, CONFIG.max_len))
    with torch.no_grad():
        logits, maps = sparse(tokens)[:2]
        unchanged = dense(tokens)[0]
    for weights in maps:  # [B, H, T, T] per layer
        assert ((weights > 0).sum(-1) <= top_k).all()
        torch.testing.assert_close(weights.sum(-1), torch.ones_like(weights.sum(-1)))
    if top_k >= CONFIG.max_len:
        torch.testing.assert_close(logits, unchanged, rtol=0, atol=0)
    else:
        assert not torch.allclose(logits, unchanged)
