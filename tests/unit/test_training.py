"""Tests for attention_lab.training: the token classifier, its loss, the loop and the measures."""

import copy
import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st
from torch import nn

from attention_lab.data import reversal_task
from attention_lab.layers import EncoderConfig, TransformerEncoder
from attention_lab.masks import padding_mask
from attention_lab.training import (
    Evaluation,
    TokenClassifier,
    TokenClassifierConfig,
    evaluate,
    pattern_share,
    token_loss,
    train,
)

pytestmark = pytest.mark.usefixtures("one_thread")


def tiny_model(seed=0, **overrides):
    torch.manual_seed(seed)
    options = dict(vocab_size=6, d_model=16, num_layers=1, num_heads=1, d_ff=32, max_len=8)
    options.update(overrides)
    return TokenClassifier(**options)


class Reverser(nn.Module):
    """A model that already knows the answer: large logits on the reversed input."""

    def __init__(self, vocab_size):
        super().__init__()
        self.vocab_size = vocab_size
        self.bias = nn.Parameter(torch.zeros(vocab_size))  # something for train() to update

    def forward(self, token_ids, mask=None):
        return 10.0 * F.one_hot(token_ids.flip(-1), self.vocab_size).float() + self.bias


# TokenClassifier


def test_token_classifier_shapes_and_parts():
    model = tiny_model(num_layers=2, num_heads=2)
    logits, attentions = model(torch.randint(1, 6, (3, 5)))
    assert logits.shape == (3, 5, 6)
    assert len(attentions) == 2 and all(a.shape == (3, 2, 5, 5) for a in attentions)
    assert isinstance(model.encoder, TransformerEncoder)
    assert model.head.in_features == 16 and model.head.out_features == 6


def test_token_classifier_forwards_the_encoder_options():
    model = tiny_model(norm_first=True, dropout=0.25)
    assert model.encoder.final_norm is not None
    assert all(layer.norm_first for layer in model.encoder.layers)
    assert model.encoder.layers[0].dropout1.p == 0.25


def test_token_classifier_config_is_the_encoders_without_dropout():
    config = TokenClassifierConfig(
        vocab_size=6, d_model=16, num_layers=1, num_heads=1, d_ff=32, max_len=8
    )
    assert isinstance(config, EncoderConfig) and config.dropout == 0.0
    model = tiny_model()  # built from keyword arguments
    assert model.config == config and model.encoder.config is model.config
    torch.manual_seed(0)  # the seed of tiny_model: the same weights from the config
    torch.testing.assert_close(TokenClassifier(config).state_dict(), model.state_dict())


def test_token_embedding_is_scaled_to_the_positional_encoding():
    # std 1/sqrt(D), so that sqrt(D) * embedding has entries of size about 1.
    model = tiny_model(vocab_size=400, d_model=64)
    std = model.encoder.embedding.weight.std().item()
    assert abs(std - 64**-0.5) < 0.01
    scaled = model.encoder.embedding.weight * 64**0.5
    assert 0.9 < scaled.pow(2).mean().sqrt().item() < 1.1


def test_token_classifier_output_is_the_head_of_the_encoder():
    model = tiny_model().eval()
    ids = torch.randint(1, 6, (2, 4))
    hidden, _ = model.encoder(ids)
    logits, _ = model(ids)
    torch.testing.assert_close(logits, model.head(hidden))


def test_token_classifier_applies_the_mask():
    model = tiny_model().eval()
    ids = torch.tensor([[1, 2, 3, 0]])
    _, (weights,) = model(ids, padding_mask(ids))
    assert weights[..., 3].eq(0).all()


def test_token_classifier_rejects_bad_arguments():
    with pytest.raises(ValueError, match="divisible"):
        tiny_model(d_model=10, num_heads=4)
    with pytest.raises(TypeError, match="vocab_size"):
        tiny_model(vocab_size=6.0)


# token_loss


def manual_loss(logits, targets, pad_id):
    log_probs = torch.log_softmax(logits.double(), dim=-1)  # [B, T, V]
    picked = log_probs.gather(-1, targets.unsqueeze(-1)).squeeze(-1)  # [B, T]
    keep = torch.ones_like(targets, dtype=torch.bool) if pad_id is None else targets != pad_id
    return (-picked[keep].sum() / keep.sum()).float()


@given(
    batch=st.integers(1, 4),
    length=st.integers(1, 6),
    vocab=st.integers(2, 7),
    pad_id=st.sampled_from([None, 0, 1]),
    seed=st.integers(0, 2**16),
)
def test_token_loss_matches_a_manual_masked_mean(batch, length, vocab, pad_id, seed):
    generator = torch.Generator().manual_seed(seed)
    logits = torch.randn(batch, length, vocab, generator=generator)
    targets = torch.randint(0, vocab, (batch, length), generator=generator)
    targets[0, 0] = 0 if pad_id is None else (pad_id + 1) % vocab  # at least one counted
    torch.testing.assert_close(
        token_loss(logits, targets, pad_id=pad_id), manual_loss(logits, targets, pad_id)
    )


def test_token_loss_ignores_padding_targets_entirely():
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(2, 5, 4, generator=generator)
    targets = torch.tensor([[1, 2, 3, 0, 0], [3, 1, 0, 0, 0]])
    changed = logits.clone()
    changed[targets == 0] = 100.0 * torch.randn(5, 4, generator=generator)
    torch.testing.assert_close(token_loss(changed, targets), token_loss(logits, targets))
    # ... and counting them would change the loss.
    assert not torch.allclose(
        token_loss(changed, targets, pad_id=None), token_loss(logits, targets, pad_id=None)
    )


@pytest.mark.parametrize(
    ("logits", "targets", "error", "match"),
    [
        (
            torch.zeros(2, 3, 4, dtype=torch.long),
            torch.zeros(2, 3, dtype=torch.long),
            TypeError,
            "logits",
        ),
        (torch.zeros(2, 3, 4), torch.zeros(2, 3), TypeError, "targets"),
        (torch.zeros(2, 3, 4), torch.zeros(2, 4, dtype=torch.long), ValueError, "shape"),
        (torch.zeros(6, 4), torch.zeros(2, 3, dtype=torch.long), ValueError, "shape"),
        (torch.zeros(2, 3, 4), torch.full((2, 3), 4), ValueError, r"targets .*\[0, 4\)"),
        (torch.zeros(2, 3, 4), torch.full((2, 3), -1), ValueError, "targets"),
    ],
)
def test_token_loss_rejects_bad_arguments(logits, targets, error, match):
    with pytest.raises(error, match=match):
        token_loss(logits, targets)


def test_token_loss_rejects_a_bool_pad_id():
    with pytest.raises(TypeError, match="pad_id"):
        token_loss(torch.zeros(1, 2, 3), torch.zeros(1, 2, dtype=torch.long), pad_id=False)


# train


@pytest.fixture(scope="module")
def reversal_data():
    return reversal_task(256, vocab_size=6, length=4, seed=0)


def test_training_learns_a_tiny_reversal_task(reversal_data):
    inputs, targets = reversal_data
    model = tiny_model(max_len=4)
    before = evaluate(model, inputs, targets)
    history = train(model, inputs, targets, steps=150, batch_size=32, lr=3e-3, seed=0)
    after = evaluate(model, inputs, targets)
    assert len(history) == 150 and all(isinstance(loss, float) for loss in history)
    assert sum(history[-10:]) / 10 < 0.5 * sum(history[:10]) / 10
    assert after.loss < 0.5 * before.loss
    # Chance is 1 in 5 ids; after 150 steps most positions are right.
    assert after.token_accuracy > 0.7 > 0.4 > before.token_accuracy


def test_same_seed_gives_the_same_history_and_weights(reversal_data):
    inputs, targets = reversal_data
    runs = []
    for _ in range(2):
        # Dropout on, so that the seeding of dropout is tested too.
        model = tiny_model(max_len=4, dropout=0.2)
        history = train(model, inputs, targets, steps=15, batch_size=16, seed=3)
        runs.append((history, model.state_dict()))
    assert runs[0][0] == runs[1][0]
    for name, value in runs[0][1].items():
        assert torch.equal(value, runs[1][1][name]), name


def test_another_seed_gives_another_history(reversal_data):
    inputs, targets = reversal_data
    histories = [
        train(tiny_model(max_len=4), inputs, targets, steps=5, batch_size=16, seed=seed)
        for seed in (0, 1)
    ]
    assert histories[0] != histories[1]


def test_train_leaves_global_random_state_and_mode_alone(reversal_data):
    inputs, targets = reversal_data
    model = tiny_model(max_len=4, dropout=0.1).eval()
    torch.manual_seed(123)
    state = torch.get_rng_state()
    train(model, inputs, targets, steps=3, batch_size=8)
    assert torch.equal(torch.get_rng_state(), state)
    assert not model.training
    model.train()
    train(model, inputs, targets, steps=1, batch_size=8)
    assert model.training


def test_train_reports_every_step_to_the_callback(reversal_data):
    inputs, targets = reversal_data
    seen = []
    history = train(
        tiny_model(max_len=4),
        inputs,
        targets,
        steps=7,
        batch_size=16,
        callback=lambda step, loss: seen.append((step, loss)),
    )
    assert seen == list(enumerate(history))


def test_train_prints_nothing(reversal_data, capsys):
    inputs, targets = reversal_data
    train(tiny_model(max_len=4), inputs, targets, steps=2, batch_size=16)
    assert capsys.readouterr() == ("", "")


def test_first_loss_is_the_masked_loss_of_the_initial_model():
    # One batch of the whole data set: the first recorded loss is the loss before any step,
    # with padding masked out of attention and out of the loss.
    inputs = torch.tensor([[1, 2, 3, 0], [4, 5, 0, 0], [2, 2, 2, 2]])
    targets = torch.tensor([[3, 2, 1, 0], [5, 4, 0, 0], [2, 2, 2, 2]])
    model = tiny_model(max_len=4)
    reference = copy.deepcopy(model).train()
    logits, _ = reference(inputs, padding_mask(inputs))
    expected = manual_loss(logits, targets, pad_id=0)
    unmasked, _ = reference(inputs)
    history = train(model, inputs, targets, steps=1, batch_size=3)
    torch.testing.assert_close(torch.tensor(history[0]), expected.detach())
    assert abs(manual_loss(unmasked, targets, pad_id=0).item() - history[0]) > 1e-4


def test_train_clips_gradients_when_asked(reversal_data, monkeypatch):
    inputs, targets = reversal_data
    calls = []
    original = nn.utils.clip_grad_norm_

    def spy(parameters, max_norm, *args, **kwargs):
        calls.append(max_norm)
        return original(parameters, max_norm, *args, **kwargs)

    monkeypatch.setattr(nn.utils, "clip_grad_norm_", spy)
    train(tiny_model(max_len=4), inputs, targets, steps=3, batch_size=8)
    assert calls == []
    train(tiny_model(max_len=4), inputs, targets, steps=3, batch_size=8, max_grad_norm=0.5)
    assert calls == [0.5, 0.5, 0.5]


def test_train_accepts_a_model_returning_only_logits(reversal_data):
    inputs, targets = reversal_data
    model = Reverser(6)
    history = train(model, inputs, targets, steps=2, batch_size=8)
    assert all(loss < 1e-3 for loss in history)


BAD_TRAIN_ARGUMENTS = {
    "model not a module": ({"model": "model"}, TypeError, "model"),
    "float inputs": ({"inputs": torch.zeros(4, 3)}, TypeError, "inputs"),
    "1-D targets": ({"targets": torch.zeros(4, dtype=torch.long)}, ValueError, "targets"),
    "shape mismatch": ({"targets": torch.zeros(4, 2, dtype=torch.long)}, ValueError, "same"),
    "no examples": (
        {
            "inputs": torch.zeros(0, 3, dtype=torch.long),
            "targets": torch.zeros(0, 3, dtype=torch.long),
        },
        ValueError,
        "at least one",
    ),
    "zero steps": ({"steps": 0}, ValueError, "steps"),
    "float steps": ({"steps": 2.0}, TypeError, "steps"),
    "bool steps": ({"steps": True}, TypeError, "steps"),
    "batch too large": ({"batch_size": 5}, ValueError, "batch_size=5"),
    "zero lr": ({"lr": 0.0}, ValueError, "lr"),
    "string lr": ({"lr": "fast"}, TypeError, "lr"),
    "negative weight decay": ({"weight_decay": -0.1}, ValueError, "weight_decay"),
    "bool weight decay": ({"weight_decay": True}, TypeError, "weight_decay"),
    "zero clip": ({"max_grad_norm": 0.0}, ValueError, "max_grad_norm"),
    "bool pad_id": ({"pad_id": True}, TypeError, "pad_id"),
    "negative seed": ({"seed": -1}, ValueError, "seed"),
    "callback not callable": ({"callback": 3}, TypeError, "callback"),
}


@pytest.mark.parametrize("kind", list(BAD_TRAIN_ARGUMENTS))
def test_train_rejects_bad_arguments(kind):
    changes, error, match = BAD_TRAIN_ARGUMENTS[kind]
    arguments = {
        "model": tiny_model(max_len=4),
        "inputs": torch.ones(4, 3, dtype=torch.long),
        "targets": torch.ones(4, 3, dtype=torch.long),
        "steps": 1,
        "batch_size": 2,
    }
    arguments.update(changes)
    model, inputs, targets = (arguments.pop(k) for k in ("model", "inputs", "targets"))
    before = copy.deepcopy(model.state_dict()) if isinstance(model, nn.Module) else None
    with pytest.raises(error, match=match):
        train(model, inputs, targets, **arguments)
    if before is not None:  # nothing was trained before the error
        assert all(torch.equal(v, model.state_dict()[k]) for k, v in before.items())


def test_train_rejects_a_model_without_parameters():
    class Empty(nn.Module):
        def forward(self, token_ids, mask=None):
            return torch.zeros(*token_ids.shape, 3)

    ids = torch.ones(2, 3, dtype=torch.long)
    with pytest.raises(ValueError, match="no trainable parameters"):
        train(Empty(), ids, ids, steps=1, batch_size=1)


def test_train_rejects_a_model_with_the_wrong_output():
    class Flat(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.zeros(1))

        def forward(self, token_ids, mask=None):
            return self.weight * torch.zeros(token_ids.shape[0], 3)

    ids = torch.ones(2, 3, dtype=torch.long)
    with pytest.raises(ValueError, match=r"logits of shape \[B, T, V\]"):
        train(Flat(), ids, ids, steps=1, batch_size=1)


# evaluate


def test_evaluate_a_model_that_knows_the_answer(reversal_data):
    inputs, targets = reversal_data
    result = evaluate(Reverser(6), inputs, targets)
    assert isinstance(result, Evaluation)
    assert result.token_accuracy == 1.0 and result.sequence_accuracy == 1.0
    assert result.loss < 1e-3


def test_evaluate_counts_tokens_and_sequences_and_skips_padding():
    inputs = torch.tensor([[1, 2, 3, 0], [4, 5, 6, 7], [1, 1, 0, 0]])
    # The model predicts each row reversed. Row 0's targets agree (its padding is skipped),
    # row 1 gets one position wrong, row 2 is right at its two real positions.
    targets = torch.tensor([[0, 3, 2, 1], [5, 6, 5, 4], [0, 0, 1, 1]])
    result = evaluate(Reverser(8), inputs, targets)
    predictions = inputs.flip(-1)
    counted = targets != 0
    expected_tokens = ((predictions == targets) & counted).sum() / counted.sum()
    assert result.token_accuracy == pytest.approx(expected_tokens.item())
    assert result.token_accuracy == pytest.approx(8 / 9)
    assert result.sequence_accuracy == pytest.approx(2 / 3)


def test_evaluate_restores_the_mode_and_records_no_gradient(reversal_data):
    inputs, targets = reversal_data
    model = tiny_model(max_len=4).train()
    evaluate(model, inputs, targets)
    assert model.training
    assert all(p.grad is None for p in model.parameters())


def test_evaluate_rejects_bad_arguments():
    ids = torch.ones(2, 3, dtype=torch.long)
    with pytest.raises(TypeError, match="model"):
        evaluate(lambda x, m: x, ids, ids)
    with pytest.raises(ValueError, match="same shape"):
        evaluate(Reverser(3), ids, ids[:, :2])
    with pytest.raises(ValueError, match="every target is padding"):
        evaluate(Reverser(3), ids, torch.zeros_like(ids))


# pattern_share


def test_pattern_share_of_uniform_and_exact_heads():
    size = 6
    reversal = torch.eye(size).flip(-1).bool()
    uniform = torch.full((size, size), 1 / size)
    torch.testing.assert_close(pattern_share(uniform, reversal), torch.full((size,), 1 / size))
    exact = reversal.float()
    torch.testing.assert_close(pattern_share(exact, reversal), torch.ones(size))
    torch.testing.assert_close(pattern_share(torch.eye(size), reversal), torch.zeros(size))


@given(heads=st.integers(1, 3), size=st.integers(1, 7), seed=st.integers(0, 2**16))
def test_pattern_share_matches_a_loop(heads, size, seed):
    generator = torch.Generator().manual_seed(seed)
    weights = torch.softmax(torch.randn(2, heads, size, size, generator=generator), dim=-1)
    pattern = torch.rand(size, size, generator=generator) < 0.3
    shares = pattern_share(weights, pattern)
    assert shares.shape == (2, heads, size)
    for b in range(2):
        for h in range(heads):
            for q in range(size):
                expected = sum(weights[b, h, q, k] for k in range(size) if pattern[q, k])
                torch.testing.assert_close(shares[b, h, q], torch.as_tensor(expected).float())
    assert ((shares >= 0) & (shares <= 1 + 1e-6)).all()


@pytest.mark.parametrize(
    ("weights", "pattern", "error", "match"),
    [
        (
            torch.ones(3, 3, dtype=torch.long),
            torch.ones(3, 3, dtype=torch.bool),
            TypeError,
            "weights",
        ),
        (torch.ones(3), torch.ones(3, dtype=torch.bool), ValueError, "weights"),
        (torch.ones(3, 3), torch.ones(3, 3), TypeError, r"pattern\.bool\(\)"),
        (torch.ones(3, 3), torch.ones(4, 4, dtype=torch.bool), ValueError, "broadcast"),
        (torch.ones(3, 3), torch.ones(2, 3, 3, dtype=torch.bool), ValueError, "broadcast"),
    ],
)
def test_pattern_share_rejects_bad_arguments(weights, pattern, error, match):
    with pytest.raises(error, match=match):
        pattern_share(weights, pattern)


def test_token_loss_does_not_range_check_the_padding_it_skips():
    # pad_id may lie outside the vocabulary (e.g. -100, PyTorch's default ignore_index).
    targets = torch.tensor([[1, -100, 2]])
    loss = token_loss(torch.zeros(1, 3, 4), targets, pad_id=-100)
    torch.testing.assert_close(loss, torch.tensor(math.log(4)))
