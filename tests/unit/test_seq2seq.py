"""Tests for attention_lab.seq2seq: the task, the encoder–decoder's masks, greedy decoding, and
agreement with PyTorch's nn.Transformer; and training it through training.train."""

import copy

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch import nn

from attention_lab._validation import check_token_ids
from attention_lab.layers import DecoderLayer, EncoderLayer
from attention_lab.masks import causal_mask, padding_mask
from attention_lab.seq2seq import (
    Seq2SeqOutput,
    Seq2SeqTransformer,
    greedy_decode,
    reversal_translation_task,
)
from attention_lab.training import evaluate, train

SOURCE_VOCAB, TARGET_VOCAB = 7, 9


pytestmark = pytest.mark.usefixtures("one_thread")


def tiny_model(seed=0, **overrides):
    torch.manual_seed(seed)
    options = dict(
        source_vocab_size=SOURCE_VOCAB,
        target_vocab_size=TARGET_VOCAB,
        d_model=16,
        num_layers=2,
        num_heads=2,
        d_ff=32,
        max_len=12,
    )
    options.update(overrides)
    return Seq2SeqTransformer(**options).eval()


def random_ids(generator, batch, length, vocab, low=1):
    return torch.randint(low, vocab, (batch, length), generator=generator)


# The task


def test_task_is_the_reversed_source_in_the_target_vocabulary():
    task = reversal_translation_task(50, 6, 2, 5, seed=0)
    assert task.source.shape == (50, 5) and task.target.shape == (50, 6)
    assert task.alignment.shape == (50, 6, 5) and task.alignment.dtype == torch.bool
    rows = zip(task.source, task.target, task.decoder_input, strict=True)
    for source, target, decoder_input in rows:
        words = source[source != 0]
        length = len(words)
        assert (source[length:] == 0).all()  # padding only at the end
        assert target[:length].tolist() == (words.flip(0) + 2).tolist()
        assert target[length] == 2 and (target[length + 1 :] == 0).all()
        assert decoder_input[0] == 1 and torch.equal(decoder_input[1:], target[:-1])
    lengths = (task.source != 0).sum(dim=1)
    assert lengths.min() == 2 and lengths.max() == 5


def test_task_alignment_points_at_the_source_token_of_each_target_token():
    task = reversal_translation_task(40, 8, 1, 6, seed=1)
    n, j, s = task.alignment.nonzero(as_tuple=True)
    # Each aligned pair is a translation: target id = source id + 2.
    assert torch.equal(task.target[n, j], task.source[n, s] + 2)
    # One source position per real target token, none for EOS or padding.
    per_row = task.alignment.sum(dim=-1)  # [N, S + 1]
    assert torch.equal(per_row.bool(), task.target > 2)
    assert per_row.max() == 1


def test_task_is_reproducible_and_checks_its_arguments():
    a, b = (reversal_translation_task(5, 6, 2, 4, seed=3) for _ in range(2))
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
    with pytest.raises(ValueError, match="max_len"):
        reversal_translation_task(5, 6, 4, 2)
    with pytest.raises(TypeError, match="min_len"):
        reversal_translation_task(5, 6, 2.0, 4)
    with pytest.raises(ValueError, match="bos_id and eos_id"):
        reversal_translation_task(5, 6, 2, 4, bos_id=3)


# The model: shapes, masks


def test_the_config_fills_in_the_decoder_layers_and_builds_the_same_model():
    model = tiny_model()  # built from keyword arguments
    assert model.config.num_decoder_layers == 2 == len(model.layers)
    assert model.encoder.config.vocab_size == SOURCE_VOCAB
    torch.manual_seed(0)  # the seed of tiny_model: the same weights from the config
    same = Seq2SeqTransformer(model.config).eval()
    torch.testing.assert_close(same.state_dict(), model.state_dict())


def test_forward_returns_logits_and_every_layers_weights():
    model = tiny_model(num_decoder_layers=3)
    generator = torch.Generator().manual_seed(0)
    out = model(random_ids(generator, 2, 5, SOURCE_VOCAB), random_ids(generator, 2, 4, 9))
    assert isinstance(out, Seq2SeqOutput) and isinstance(out, tuple)
    assert out.logits.shape == (2, 4, TARGET_VOCAB)
    assert len(out.cross_attentions) == 3 and len(out.decoder_attentions) == 3
    assert all(w.shape == (2, 2, 4, 5) for w in out.cross_attentions)
    assert all(w.shape == (2, 2, 4, 4) for w in out.decoder_attentions)
    assert len(out.encoder_attentions) == 2
    assert all(w.shape == (2, 2, 5, 5) for w in out.encoder_attentions)
    for w in out.cross_attentions:  # rows are distributions over the source
        torch.testing.assert_close(w.sum(dim=-1), torch.ones(2, 2, 4))


@given(
    lengths=st.lists(st.integers(1, 6), min_size=1, max_size=3),
    extra=st.integers(0, 3),
    seed=st.integers(0, 2**16),
    norm_first=st.booleans(),
)
def test_padded_source_receives_no_cross_attention_and_changes_nothing(
    lengths, extra, seed, norm_first
):
    model = tiny_model(norm_first=norm_first)
    generator = torch.Generator().manual_seed(seed)
    width = max(lengths) + extra
    source = random_ids(generator, len(lengths), width, SOURCE_VOCAB)
    for row, length in enumerate(lengths):
        source[row, length:] = 0
    target = random_ids(generator, len(lengths), 4, TARGET_VOCAB)
    with torch.no_grad():
        out = model(source, target)
        # Keys first: [B, S, H, Tq], indexed by the [B, S] padding positions.
        for w in out.cross_attentions + out.encoder_attentions:  # [B, H, Tq, S]
            assert (w.permute(0, 3, 1, 2)[source == 0] == 0).all()
        # Each sentence alone, without padding, gets the same logits.
        for row, length in enumerate(lengths):
            alone = model(source[row : row + 1, :length], target[row : row + 1]).logits
            torch.testing.assert_close(out.logits[row : row + 1], alone, atol=1e-5, rtol=1e-4)
        # What the padding embeds never reaches the output.
        changed = copy.deepcopy(model)
        changed.encoder.embedding.weight.data[0] = 5.0
        torch.testing.assert_close(changed(source, target).logits, out.logits)


@given(
    length=st.integers(2, 7),
    cut=st.integers(0, 5),
    seed=st.integers(0, 2**16),
    norm_first=st.booleans(),
)
def test_future_target_tokens_do_not_change_earlier_logits(length, cut, seed, norm_first):
    cut = min(cut, length - 2)  # positions 0..cut are kept, at least one later one changes
    model = tiny_model(norm_first=norm_first)
    generator = torch.Generator().manual_seed(seed)
    source = random_ids(generator, 2, 5, SOURCE_VOCAB)
    target = random_ids(generator, 2, length, TARGET_VOCAB)
    changed = target.clone()
    changed[:, cut + 1 :] = random_ids(generator, 2, length - cut - 1, TARGET_VOCAB)
    changed[:, -1] = target[:, -1] % (TARGET_VOCAB - 1) + 1  # certainly different
    with torch.no_grad():
        before, after = model(source, target), model(source, changed)
    torch.testing.assert_close(after.logits[:, : cut + 1], before.logits[:, : cut + 1])
    for w in before.decoder_attentions:
        assert (w[..., ~causal_mask(length)] == 0).all()
    assert not torch.allclose(after.logits[:, -1], before.logits[:, -1])


def test_target_padding_is_masked_in_decoder_self_attention():
    model = tiny_model()
    source = torch.tensor([[3, 4, 5]])
    target = torch.tensor([[1, 5, 2, 0, 0]])
    with torch.no_grad():
        out = model(source, target)
    for w in out.decoder_attentions:
        assert (w[..., 3:] == 0).all()


def test_the_source_changes_the_logits_through_cross_attention():
    # A control for the mask tests: a real source token does matter.
    model = tiny_model()
    target = torch.tensor([[1, 4, 5]])
    with torch.no_grad():
        a = model(torch.tensor([[3, 4, 5]]), target).logits
        b = model(torch.tensor([[3, 6, 5]]), target).logits
    assert not torch.allclose(a, b)


# Greedy decoding


@given(seed=st.integers(0, 2**16), steps=st.integers(1, 8))
def test_greedy_decode_is_the_argmax_of_the_full_forward_at_every_step(seed, steps):
    model = tiny_model(seed=seed % 5)
    generator = torch.Generator().manual_seed(seed)
    source = random_ids(generator, 4, 5, SOURCE_VOCAB)
    source[1, 3:] = 0
    written = greedy_decode(model, source, steps)
    assert written.shape == (4, steps) and written.dtype == torch.long
    decoder_input = torch.cat(
        [torch.full((4, 1), model.config.bos_id), written[:, :-1]], dim=1
    )  # [B, steps]
    with torch.no_grad():
        expected = model(source, decoder_input).logits.argmax(dim=-1)  # [B, steps]
    for row in range(4):
        ends = (written[row] == model.config.eos_id).nonzero()
        stop = steps if len(ends) == 0 else ends[0, 0].item() + 1
        assert torch.equal(written[row, :stop], expected[row, :stop])
        assert (written[row, stop:] == model.config.pad_id).all()  # finished: padding after EOS


def test_greedy_decode_stops_a_sentence_at_eos():
    model = tiny_model()
    with torch.no_grad():  # a model that always prefers EOS
        model.head.bias.fill_(0.0)
        model.head.weight.fill_(0.0)
        model.head.bias[model.config.eos_id] = 1.0
    written = greedy_decode(model, torch.tensor([[3, 4, 5]]), 4)
    assert written.tolist() == [[2, 0, 0, 0]]


def test_greedy_decode_restores_the_mode_and_checks_arguments():
    model = tiny_model().train()
    greedy_decode(model, torch.tensor([[3, 4]]), 2)
    assert model.training
    with pytest.raises(TypeError, match="Seq2SeqTransformer"):
        greedy_decode(nn.Linear(2, 2), torch.tensor([[3, 4]]), 2)
    with pytest.raises(ValueError, match="steps"):
        greedy_decode(model, torch.tensor([[3, 4]]), 0)
    with pytest.raises(TypeError, match="source_ids"):
        greedy_decode(model, torch.tensor([[3.0, 4.0]]), 2)


def test_greedy_decode_checks_the_source_and_builds_its_mask_once(monkeypatch):
    from attention_lab import seq2seq

    built, checked = [], []
    monkeypatch.setattr(
        seq2seq,
        "padding_mask",
        lambda ids, pad_id=0: built.append(ids) or padding_mask(ids, pad_id),
    )
    monkeypatch.setattr(
        seq2seq,
        "check_token_ids",
        lambda ids, name, **kw: checked.append(name) or check_token_ids(ids, name, **kw),
    )
    source = torch.tensor([[3, 4, 5, 0], [6, 1, 0, 0]])
    written = greedy_decode(tiny_model(), source, steps=6)
    assert written.shape == (2, 6)
    assert sum(ids is source for ids in built) == 1  # the target's own mask is rebuilt per step
    assert checked.count("source_ids") == 1


# Against PyTorch's nn.Transformer


def torch_reference(norm_first):
    """nn.Transformer with final LayerNorms only in the pre-norm arrangement, as ours."""
    d_model, heads, d_ff, layers = 16, 2, 32, 2
    options = dict(dropout=0.0, batch_first=True, norm_first=norm_first)
    encoder = nn.TransformerEncoder(
        nn.TransformerEncoderLayer(d_model, heads, d_ff, **options),
        layers,
        norm=nn.LayerNorm(d_model) if norm_first else None,
        enable_nested_tensor=False,
    )
    decoder = nn.TransformerDecoder(
        nn.TransformerDecoderLayer(d_model, heads, d_ff, **options),
        layers,
        norm=nn.LayerNorm(d_model) if norm_first else None,
    )
    torch.manual_seed(1)
    reference = nn.Transformer(
        d_model, heads, custom_encoder=encoder, custom_decoder=decoder, batch_first=True
    )
    with torch.no_grad():  # non-trivial LayerNorm weights, so that copying them is tested
        for module in reference.modules():
            if isinstance(module, nn.LayerNorm):
                module.weight.normal_(1.0, 0.1)
                module.bias.normal_(0.0, 0.1)
    return reference.eval()


@pytest.mark.parametrize("norm_first", [False, True])
def test_matches_torch_transformer_with_the_same_weights(norm_first):
    reference = torch_reference(norm_first)
    ours = tiny_model(norm_first=norm_first)
    for i, layer in enumerate(reference.encoder.layers):
        ours.encoder.layers[i] = EncoderLayer.from_torch(layer)
    for i, layer in enumerate(reference.decoder.layers):
        ours.layers[i] = DecoderLayer.from_torch(layer)
    if norm_first:
        ours.encoder.final_norm.load_state_dict(reference.encoder.norm.state_dict())
        ours.final_norm.load_state_dict(reference.decoder.norm.state_dict())
    ours.eval()

    generator = torch.Generator().manual_seed(0)
    source = random_ids(generator, 3, 6, SOURCE_VOCAB)
    source[0, 4:] = 0
    source[2, 2:] = 0
    target = random_ids(generator, 3, 5, TARGET_VOCAB)
    target[1, 3:] = 0
    with torch.no_grad():
        out = ours(source, target)
        # The same embeddings go into PyTorch's stack; its masks use True = blocked.
        src = ours.encoder.positional(ours.encoder.embedding(source) * 16**0.5)
        tgt = ours.positional(ours.embedding(target) * 16**0.5)
        hidden = reference(
            src,
            tgt,
            tgt_mask=~causal_mask(5),
            src_key_padding_mask=source == 0,
            tgt_key_padding_mask=target == 0,
            memory_key_padding_mask=source == 0,
        )
        expected = ours.head(hidden)
    real = target != 0  # PyTorch leaves padded query rows to chance; compare the real ones
    torch.testing.assert_close(out.logits[real], expected[real], atol=1e-5, rtol=1e-4)
    # The cross-attention weights of the last layer, averaged over heads, as PyTorch returns.
    memory, _ = ours.encode(source)
    x = tgt
    with torch.no_grad():
        for layer in reference.decoder.layers[:-1]:
            x = layer(
                x,
                memory,
                tgt_mask=~causal_mask(5),
                tgt_key_padding_mask=target == 0,
                memory_key_padding_mask=source == 0,
            )
        last = reference.decoder.layers[-1]
        if not norm_first:
            x = last.norm1(x + last._sa_block(x, ~causal_mask(5), target == 0))
            query = x
        else:
            x = x + last._sa_block(last.norm1(x), ~causal_mask(5), target == 0)
            query = last.norm2(x)
        _, torch_weights = last.multihead_attn(
            query, memory, memory, key_padding_mask=source == 0, need_weights=True
        )  # [B, T, S], averaged over heads
    ours_weights = out.cross_attentions[-1].mean(dim=1)  # [B, T, S]
    torch.testing.assert_close(ours_weights[real], torch_weights[real], atol=1e-5, rtol=1e-4)


# Errors


@pytest.mark.parametrize(
    ("source", "target", "error", "match"),
    [
        (torch.ones(2, 3), torch.ones(2, 3, dtype=torch.long), TypeError, "source_ids"),
        (torch.ones(2, 3, dtype=torch.long), torch.ones(2, 3), TypeError, "target_ids"),
        (torch.ones(3, dtype=torch.long), torch.ones(2, 3, dtype=torch.long), ValueError, "source"),
        (
            torch.ones(2, 3, dtype=torch.long),
            torch.ones(3, 3, dtype=torch.long),
            ValueError,
            "batch size",
        ),
        (
            torch.ones(2, 3, dtype=torch.long),
            torch.full((2, 3), TARGET_VOCAB),
            ValueError,
            "target_ids",
        ),
        (
            torch.full((2, 3), SOURCE_VOCAB),
            torch.ones(2, 3, dtype=torch.long),
            ValueError,
            r"source_ids .*source_vocab_size=7",
        ),
    ],
)
def test_forward_rejects_bad_inputs(source, target, error, match):
    with pytest.raises(error, match=match):
        tiny_model()(source, target)


@pytest.mark.parametrize(
    ("overrides", "error", "match"),
    [
        ({"d_model": 10, "num_heads": 4}, ValueError, "divisible"),
        ({"target_vocab_size": 2}, ValueError, "eos_id=2"),
        ({"bos_id": 0}, ValueError, "differ"),
        ({"num_decoder_layers": 0}, ValueError, "num_decoder_layers"),
        ({"pad_id": -1}, ValueError, "pad_id"),
        ({"target_vocab_size": 9.0}, TypeError, "target_vocab_size"),
    ],
)
def test_constructor_rejects_bad_arguments(overrides, error, match):
    with pytest.raises(error, match=match):
        tiny_model(**overrides)


def test_decode_rejects_memory_of_another_source():
    model = tiny_model()
    memory, _ = model.encode(torch.ones(2, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="memory"):
        model.decode(torch.ones(2, 3, dtype=torch.long), memory, torch.ones(2, 5, dtype=torch.long))


# Training through training.train with a pair of inputs


def test_train_takes_a_pair_of_inputs_and_learns_the_task():
    task = reversal_translation_task(512, 5, 2, 4, seed=0)
    test = reversal_translation_task(128, 5, 2, 4, seed=1)
    model = tiny_model(source_vocab_size=5, target_vocab_size=7, max_len=5)
    inputs = (task.source, task.decoder_input)
    before = evaluate(model, (test.source, test.decoder_input), test.target)
    history = train(model, inputs, task.target, steps=150, batch_size=32, lr=3e-3, seed=0)
    after = evaluate(model, (test.source, test.decoder_input), test.target)
    assert len(history) == 150
    # 4 source ids + EOS: chance is about 1 in 7 target ids; after training most are right.
    assert before.token_accuracy < 0.4 and after.token_accuracy > 0.8
    assert after.loss < 0.5 * before.loss


def test_train_batches_the_tensors_of_a_pair_together():
    seen = []

    class Spy(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.zeros(4))

        def forward(self, source, decoder_input):
            seen.append((source.clone(), decoder_input.clone()))
            return self.weight.expand(*decoder_input.shape, 4)

    source = torch.arange(6)[:, None].repeat(1, 3)  # row n holds n
    decoder_input = torch.arange(6)[:, None].repeat(1, 2) + 10  # row n holds n + 10
    targets = torch.ones(6, 2, dtype=torch.long)
    train(Spy(), (source, decoder_input), targets, steps=4, batch_size=2, seed=1)
    assert len(seen) == 4
    for batch_source, batch_decoder_input in seen:
        assert batch_source.shape == (2, 3) and batch_decoder_input.shape == (2, 2)
        assert torch.equal(batch_decoder_input[:, 0], batch_source[:, 0] + 10)  # same rows


@pytest.mark.parametrize(
    ("inputs", "match"),
    [
        ((), "non-empty tuple"),
        ((torch.ones(4, 3),), r"inputs\[0\]"),
        ((torch.ones(4, 3, dtype=torch.long), torch.ones(3, 2, dtype=torch.long)), "examples"),
    ],
)
def test_train_rejects_bad_tuples_of_inputs(inputs, match):
    with pytest.raises((TypeError, ValueError), match=match):
        train(tiny_model(), inputs, torch.ones(4, 2, dtype=torch.long), steps=1, batch_size=2)
