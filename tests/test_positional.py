"""Tests for attention_lab.positional against an independent numpy computation."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_lab.positional import SinusoidalPositionalEncoding, sinusoidal_encoding


def reference_encoding(max_len, d_model, base=10000.0):
    """The formula of the paper, element by element, in float64 numpy."""
    encoding = np.zeros((max_len, d_model), dtype=np.float64)
    for pos in range(max_len):
        for column in range(d_model):
            two_i = column - column % 2
            angle = pos / base ** (two_i / d_model)
            encoding[pos, column] = math.sin(angle) if column % 2 == 0 else math.cos(angle)
    return torch.from_numpy(encoding)


@pytest.mark.parametrize("d_model", [1, 2, 3, 4, 7, 16, 33])
@pytest.mark.parametrize("max_len", [0, 1, 10, 64])
def test_sinusoidal_encoding_matches_reference(max_len, d_model):
    encoding = sinusoidal_encoding(max_len, d_model)
    assert encoding.dtype == torch.float32
    assert encoding.shape == (max_len, d_model)
    expected = reference_encoding(max_len, d_model).float()
    torch.testing.assert_close(encoding, expected, rtol=0, atol=1e-6)


@pytest.mark.parametrize("base", [2.0, 100, 10000.0])
def test_sinusoidal_encoding_base(base):
    torch.testing.assert_close(
        sinusoidal_encoding(20, 6, base=base),
        reference_encoding(20, 6, base=base).float(),
        rtol=0,
        atol=1e-6,
    )


def test_sinusoidal_encoding_is_accurate_at_large_positions():
    # Angles computed in float32 would be off by ~1e-3 here; float64 keeps float32 rounding.
    positions = np.arange(9990, 10000, dtype=np.float64)[:, None]
    two_i = np.arange(0, 8, 2, dtype=np.float64)
    angle = positions / 10000.0 ** (two_i / 8)
    expected = np.empty((10, 8))
    expected[:, 0::2] = np.sin(angle)
    expected[:, 1::2] = np.cos(angle)
    encoding = sinusoidal_encoding(10000, 8)[9990:]
    torch.testing.assert_close(encoding, torch.from_numpy(expected).float(), rtol=0, atol=1e-7)


def test_odd_d_model_ends_with_a_sine():
    encoding = sinusoidal_encoding(5, 5)
    positions = torch.arange(5, dtype=torch.float64)
    expected = torch.sin(positions / 10000.0 ** (4 / 5)).float()
    torch.testing.assert_close(encoding[:, -1], expected)


@settings(max_examples=40, deadline=None)
@given(max_len=st.integers(1, 300), d_model=st.integers(2, 64))
def test_encoding_is_bounded_and_rows_are_distinct(max_len, d_model):
    encoding = sinusoidal_encoding(max_len, d_model)
    assert encoding.abs().max() <= 1.0
    assert torch.unique(encoding, dim=0).shape[0] == max_len


def test_module_adds_the_encoding():
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(3, 7, 10, generator=generator)
    module = SinusoidalPositionalEncoding(10, max_len=50)
    torch.testing.assert_close(module(x), x + sinusoidal_encoding(7, 10))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16, torch.bfloat16])
def test_module_keeps_the_input_dtype(dtype):
    x = torch.zeros(2, 4, 6, dtype=dtype)
    output = SinusoidalPositionalEncoding(6, max_len=16)(x)
    assert output.dtype == dtype
    torch.testing.assert_close(output, sinusoidal_encoding(4, 6).to(dtype).expand(2, 4, 6))


def test_module_extends_beyond_max_len():
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(2, 20, 6, generator=generator)
    module = SinusoidalPositionalEncoding(6, max_len=8)
    torch.testing.assert_close(module(x), x + sinusoidal_encoding(20, 6))
    assert module.encoding.shape == (8, 6)


def test_module_with_zero_dropout_is_exact_in_training_mode():
    generator = torch.Generator().manual_seed(2)
    x = torch.randn(2, 5, 4, generator=generator)
    module = SinusoidalPositionalEncoding(4, max_len=5).train()
    assert torch.equal(module(x), x + sinusoidal_encoding(5, 4))


def test_module_dropout_only_in_training_mode():
    x = torch.ones(4, 16, 8)
    module = SinusoidalPositionalEncoding(8, max_len=16, dropout=0.5)
    expected = x + sinusoidal_encoding(16, 8)
    torch.testing.assert_close(module.eval()(x), expected)
    torch.manual_seed(0)
    dropped = module.train()(x)
    kept = dropped != 0
    assert 0 < kept.float().mean() < 1
    torch.testing.assert_close(dropped[kept], (expected / 0.5)[kept])


def test_encoding_buffer_is_not_persistent():
    module = SinusoidalPositionalEncoding(4, max_len=10)
    assert "encoding" in dict(module.named_buffers())
    assert "encoding" not in module.state_dict()
    assert module.to(torch.float64).encoding.dtype == torch.float64


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: sinusoidal_encoding(-1, 4), ValueError, "max_len"),
        (lambda: sinusoidal_encoding(2.5, 4), TypeError, "max_len"),
        (lambda: sinusoidal_encoding(True, 4), TypeError, "max_len"),
        (lambda: sinusoidal_encoding(10, 0), ValueError, "d_model must be a positive int, got 0"),
        (lambda: sinusoidal_encoding(10, "4"), TypeError, "d_model"),
        (lambda: sinusoidal_encoding(10, 4, base=1.0), ValueError, "base"),
        (lambda: sinusoidal_encoding(10, 4, base=float("nan")), ValueError, "base"),
        (lambda: sinusoidal_encoding(10, 4, base="10000"), TypeError, "base"),
        (lambda: SinusoidalPositionalEncoding(0), ValueError, "d_model"),
        (lambda: SinusoidalPositionalEncoding(4, max_len=-3), ValueError, "max_len"),
        (lambda: SinusoidalPositionalEncoding(4, dropout=1.0), ValueError, "dropout"),
        (lambda: SinusoidalPositionalEncoding(4, dropout="0.1"), TypeError, "dropout"),
        (
            lambda: SinusoidalPositionalEncoding(4)(torch.zeros(2, 3, 5)),
            ValueError,
            r"x .*\[B, T, 4\]",
        ),
        (lambda: SinusoidalPositionalEncoding(4)(torch.zeros(3, 4)), ValueError, "x"),
        (lambda: SinusoidalPositionalEncoding(4)([[0.0] * 4]), TypeError, "x"),
    ],
)
def test_bad_inputs_raise_naming_the_argument(call, error, match):
    with pytest.raises(error, match=match):
        call()
