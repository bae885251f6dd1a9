"""Tests for attention_lab.positional against an independent numpy computation."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_lab.positional import (
    LearnedPositionalEmbedding,
    RotaryEmbedding,
    SinusoidalPositionalEncoding,
    rope_frequencies,
    rotary_embedding,
    sinusoidal_encoding,
)


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


# --- LearnedPositionalEmbedding -------------------------------------------------------------


def test_learned_embedding_adds_the_table_rows():
    torch.manual_seed(0)
    module = LearnedPositionalEmbedding(max_len=12, d_model=6)
    generator = torch.Generator().manual_seed(3)
    x = torch.randn(4, 9, 6, generator=generator)
    expected = x + module.embedding(torch.arange(9))  # [B, T, D] + [T, D]
    torch.testing.assert_close(module(x), expected)
    # Row t of the table goes to position t of every sequence in the batch.
    for t in range(9):
        torch.testing.assert_close(module(x)[:, t], x[:, t] + module.embedding.weight[t])


@pytest.mark.parametrize("seq_len", [0, 1, 7, 8])
def test_learned_embedding_accepts_up_to_max_len(seq_len):
    module = LearnedPositionalEmbedding(8, 4)
    x = torch.zeros(2, seq_len, 4)
    output = module(x)
    assert output.shape == (2, seq_len, 4)
    torch.testing.assert_close(output, module.embedding.weight[:seq_len].expand(2, seq_len, 4))


def test_learned_embedding_cannot_extrapolate():
    module = LearnedPositionalEmbedding(max_len=50, d_model=4)
    with pytest.raises(ValueError, match=r"T=80 .*max_len=50"):
        module(torch.zeros(1, 80, 4))


def test_learned_embedding_is_trained():
    module = LearnedPositionalEmbedding(max_len=10, d_model=3)
    assert "embedding.weight" in module.state_dict()
    assert module.embedding.weight.requires_grad
    module(torch.zeros(2, 4, 3)).sum().backward()
    grad = module.embedding.weight.grad
    # Each of the first 4 rows is used once per sequence; the rest of the table is untouched.
    torch.testing.assert_close(grad[:4], torch.full((4, 3), 2.0))
    assert grad[4:].eq(0).all()


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16, torch.bfloat16])
def test_learned_embedding_keeps_the_input_dtype(dtype):
    module = LearnedPositionalEmbedding(6, 4)
    output = module(torch.zeros(1, 5, 4, dtype=dtype))
    assert output.dtype == dtype
    torch.testing.assert_close(output[0], module.embedding.weight[:5].detach().to(dtype))


def test_learned_embedding_dropout_only_in_training_mode():
    module = LearnedPositionalEmbedding(16, 8, dropout=0.5)
    x = torch.ones(4, 16, 8)
    expected = x + module.embedding.weight.detach()
    torch.testing.assert_close(module.eval()(x), expected)
    torch.manual_seed(0)
    dropped = module.train()(x).detach()
    kept = dropped != 0
    assert 0 < kept.float().mean() < 1
    torch.testing.assert_close(dropped[kept], (expected / 0.5)[kept])


def test_learned_embedding_repr_names_its_sizes():
    assert "max_len=7, d_model=3" in repr(LearnedPositionalEmbedding(7, 3))


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: LearnedPositionalEmbedding(0, 4), ValueError, "max_len must be a positive int"),
        (lambda: LearnedPositionalEmbedding(2.5, 4), TypeError, "max_len"),
        (lambda: LearnedPositionalEmbedding(8, 0), ValueError, "d_model must be a positive int"),
        (lambda: LearnedPositionalEmbedding(8, True), TypeError, "d_model"),
        (lambda: LearnedPositionalEmbedding(8, 4, dropout=1.0), ValueError, "dropout"),
        (
            lambda: LearnedPositionalEmbedding(8, 4)(torch.zeros(2, 3, 5)),
            ValueError,
            r"\[B, T, 4\]",
        ),
        (lambda: LearnedPositionalEmbedding(8, 4)(torch.zeros(3, 4)), ValueError, "x must"),
        (
            lambda: LearnedPositionalEmbedding(8, 4)(torch.zeros(1, 3, 4, dtype=torch.long)),
            TypeError,
            "x must have a floating dtype",
        ),
        (lambda: LearnedPositionalEmbedding(8, 4)([[0.0] * 4]), TypeError, "x must be a"),
    ],
)
def test_learned_embedding_bad_inputs_raise_naming_the_argument(call, error, match):
    with pytest.raises(error, match=match):
        call()


# --- rotary_embedding ------------------------------------------------------------------------


def reference_rotary(x, positions, base=10000.0):
    """RoPE with complex numbers, in float64: pair (2i, 2i + 1) is the number x_2i + j x_2i+1,
    multiplied by the unit complex number of angle position * base ** (-2i / Dh)."""
    head_dim = x.shape[-1]
    pairs = x.to(torch.float64).reshape(*x.shape[:-1], head_dim // 2, 2)  # [..., T, Dh/2, 2]
    as_complex = torch.view_as_complex(pairs.contiguous())  # [..., T, Dh / 2]
    frequency = 1.0 / base ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    angle = positions.to(torch.float64)[:, None] * frequency  # [T, Dh / 2]
    turn = torch.polar(torch.ones_like(angle), angle)  # [T, Dh / 2], |turn| = 1
    return torch.view_as_real(as_complex * turn).flatten(-2)  # [..., T, Dh]


def random_tensor(*shape, seed=0, dtype=torch.float32):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=generator, dtype=torch.float64).to(dtype)


@pytest.mark.parametrize("shape", [(5, 2), (7, 8), (3, 6, 16), (2, 4, 5, 64)])
def test_rotary_matches_complex_reference(shape):
    x = random_tensor(*shape)
    expected = reference_rotary(x, torch.arange(shape[-2])).float()
    torch.testing.assert_close(rotary_embedding(x), expected)


@pytest.mark.parametrize("base", [2.0, 500, 10000.0])
def test_rotary_matches_reference_for_given_positions_and_base(base):
    x = random_tensor(2, 6, 12, seed=1, dtype=torch.float64)
    positions = torch.tensor([0, 3, -4, 17, 10_000, 123_456])
    torch.testing.assert_close(
        rotary_embedding(x, positions, base=base), reference_rotary(x, positions, base)
    )


def test_rotary_angles_are_accurate_at_large_positions():
    # float32 angles would be off by ~1e-3 rad at these positions; float64 angles are exact
    # to float32 rounding of the result.
    x = random_tensor(10, 8, seed=2)
    positions = torch.arange(99_990, 100_000)
    expected = reference_rotary(x, positions).float()
    torch.testing.assert_close(rotary_embedding(x, positions), expected, rtol=0, atol=2e-6)


@pytest.mark.parametrize("base", [500.0, 10000.0])
def test_rotary_half_layout_matches_transformers_rotate_half(base):
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    x = random_tensor(2, 3, 7, 16, seed=4, dtype=torch.float64)  # [B, H, T, Dh]
    positions = torch.tensor([0, 1, 2, 5, 9, 100, 4096])
    frequency = 1.0 / base ** (torch.arange(0, 16, 2, dtype=torch.float64) / 16)
    angle = positions.to(torch.float64)[:, None] * frequency  # [T, Dh / 2]
    angle = torch.cat((angle, angle), dim=-1)[None]  # [1, T, Dh]: transformers' cos/sin layout
    expected, _ = apply_rotary_pos_emb(x, x, angle.cos(), angle.sin())
    torch.testing.assert_close(rotary_embedding(x, positions, base=base, layout="half"), expected)


def test_rotary_layouts_are_a_permutation_of_features_apart():
    x = random_tensor(2, 5, 8, seed=5)
    # Features (2i, 2i + 1) of the interleaved layout are features (i, i + Dh / 2) of the half.
    to_half = torch.tensor([0, 2, 4, 6, 1, 3, 5, 7])
    half = rotary_embedding(x[..., to_half], layout="half")
    torch.testing.assert_close(half, rotary_embedding(x)[..., to_half])
    with pytest.raises(ValueError, match="layout"):
        rotary_embedding(x, layout="neox")


@pytest.mark.parametrize(
    ("dtype", "atol"), [(torch.float64, 1e-12), (torch.float16, 2e-3), (torch.bfloat16, 2e-2)]
)
def test_rotary_keeps_the_input_dtype(dtype, atol):
    x = random_tensor(2, 9, 8, seed=3, dtype=dtype)
    output = rotary_embedding(x)
    assert output.dtype == dtype
    expected = reference_rotary(x, torch.arange(9))
    torch.testing.assert_close(output.to(torch.float64), expected, rtol=0, atol=atol)


def test_rotary_at_position_zero_is_the_identity():
    x = random_tensor(3, 4, 16, seed=4)
    assert torch.equal(rotary_embedding(x, torch.zeros(4, dtype=torch.long)), x)
    # With the default positions, only position 0 is left unchanged.
    rotated = rotary_embedding(x)
    assert torch.equal(rotated[:, 0], x[:, 0])
    assert not torch.allclose(rotated[:, 1:], x[:, 1:])


def test_rotary_preserves_the_length_of_every_pair():
    x = random_tensor(2, 50, 32, seed=5, dtype=torch.float64)
    rotated = rotary_embedding(x, torch.arange(50) * 37)
    torch.testing.assert_close(
        rotated.unflatten(-1, (16, 2)).norm(dim=-1),  # [B, T, Dh / 2]
        x.unflatten(-1, (16, 2)).norm(dim=-1),
    )


def test_rotary_pairs_neighbours_like_rotate_half_up_to_a_permutation():
    # Hugging Face's convention pairs feature i with feature i + Dh/2. Listing our even
    # features first and our odd features second turns one convention into the other.
    head_dim = 16
    x = random_tensor(3, 7, head_dim, seed=6, dtype=torch.float64)
    permutation = torch.cat([torch.arange(0, head_dim, 2), torch.arange(1, head_dim, 2)])
    halves = x[..., permutation]  # [..., T, Dh]: evens, then odds

    frequency = 1.0 / 10000.0 ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    angle = torch.arange(7, dtype=torch.float64)[:, None] * frequency  # [T, Dh / 2]
    cos = torch.cat([angle.cos(), angle.cos()], dim=-1)  # [T, Dh]
    sin = torch.cat([angle.sin(), angle.sin()], dim=-1)  # [T, Dh]
    first, second = halves.chunk(2, dim=-1)
    rotate_half = torch.cat([-second, first], dim=-1)
    hugging_face_style = halves * cos + rotate_half * sin

    torch.testing.assert_close(hugging_face_style, rotary_embedding(x)[..., permutation])


def test_rotary_uses_the_angles_of_the_sinusoidal_encoding():
    # A pair (1, 0) rotated by an angle a becomes (cos a, sin a).
    ones = torch.zeros(20, 10)
    ones[:, 0::2] = 1.0
    rotated = rotary_embedding(ones)
    encoding = sinusoidal_encoding(20, 10)
    torch.testing.assert_close(rotated[:, 0::2], encoding[:, 1::2])  # cosines
    torch.testing.assert_close(rotated[:, 1::2], encoding[:, 0::2])  # sines


def test_rotary_gradient_is_the_inverse_rotation():
    # A rotation is orthogonal: its transpose, which backpropagation applies, rotates back.
    x = random_tensor(5, 8, seed=7, dtype=torch.float64).requires_grad_(True)
    upstream = random_tensor(5, 8, seed=8, dtype=torch.float64)
    positions = torch.arange(5) * 3
    rotary_embedding(x, positions).backward(upstream)
    torch.testing.assert_close(x.grad, rotary_embedding(upstream, -positions))


# Cheap examples (pure arithmetic) over a wide range of positions: more than the suite's budget.
@settings(max_examples=60)
@given(
    m=st.integers(-1000, 1000),
    n=st.integers(-1000, 1000),
    shift=st.integers(-5000, 5000),
    half_dim=st.integers(1, 32),
    seed=st.integers(0, 2**16),
)
def test_rotary_scores_depend_only_on_the_offset(m, n, shift, half_dim, seed):
    q, k = random_tensor(2, 1, 2 * half_dim, seed=seed, dtype=torch.float64)  # [1, Dh] each

    def score(query_position, key_position):
        rotated_q = rotary_embedding(q, torch.tensor([query_position]))
        rotated_k = rotary_embedding(k, torch.tensor([key_position]))
        return (rotated_q * rotated_k).sum()

    torch.testing.assert_close(score(m + shift, n + shift), score(m, n))
    torch.testing.assert_close(score(m - n, 0), score(m, n))


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: rotary_embedding([[1.0, 2.0]]), TypeError, "x must be a torch.Tensor"),
        (
            lambda: rotary_embedding(torch.ones(3, 4, dtype=torch.long)),
            TypeError,
            "x must have a floating",
        ),
        (lambda: rotary_embedding(torch.ones(4)), ValueError, r"x must have shape \[..., T, Dh\]"),
        (lambda: rotary_embedding(torch.ones(3, 5)), ValueError, r"x .*even Dh.*\[3, 5\]"),
        (
            lambda: rotary_embedding(torch.ones(3, 4), torch.arange(3.0)),
            TypeError,
            r"positions.*long\(\)",
        ),
        (
            lambda: rotary_embedding(torch.ones(3, 4), torch.ones(3, dtype=torch.bool)),
            TypeError,
            "positions",
        ),
        (lambda: rotary_embedding(torch.ones(3, 4), [0, 1, 2]), TypeError, "positions must be a"),
        (
            lambda: rotary_embedding(torch.ones(3, 4), torch.arange(4)),
            ValueError,
            r"positions .*\[3\]",
        ),
        (
            lambda: rotary_embedding(torch.ones(3, 4), torch.arange(3)[None]),
            ValueError,
            "positions",
        ),
        (lambda: rotary_embedding(torch.ones(3, 4), base=1.0), ValueError, "base"),
        (lambda: rotary_embedding(torch.ones(3, 4), base="1e4"), TypeError, "base"),
    ],
)
def test_rotary_bad_inputs_raise_naming_the_argument(call, error, match):
    with pytest.raises(error, match=match):
        call()


# --- RotaryEmbedding --------------------------------------------------------------------------


def rotary_before_the_module(
    x, positions=None, *, base=10000.0, layout="interleaved", scaling=None, seq_len=None
):
    """rotary_embedding as it was before RotaryEmbedding held the frequencies (its arithmetic,
    operation for operation), kept here to prove that the module changed no bit of any result."""
    positions = torch.arange(x.shape[-2]) if positions is None else positions
    head_dim = x.shape[-1]
    if scaling is not None and seq_len is None and len(positions):
        seq_len = int(positions.max()) + 1
    inv_freq, factor = rope_frequencies(head_dim, base=base, scaling=scaling, seq_len=seq_len)
    angle = positions.cpu().to(torch.float64)[:, None] * inv_freq
    compute_dtype = torch.promote_types(x.dtype, torch.float32)
    cos = (factor * torch.cos(angle)).to(device=x.device, dtype=compute_dtype)
    sin = (factor * torch.sin(angle)).to(device=x.device, dtype=compute_dtype)
    pair_axis = -1 if layout == "interleaved" else -2
    split = (head_dim // 2, 2) if layout == "interleaved" else (2, head_dim // 2)
    first, second = x.to(compute_dtype).unflatten(-1, split).unbind(pair_axis)
    rotated = torch.stack((first * cos - second * sin, first * sin + second * cos), pair_axis)
    return rotated.flatten(-2).to(x.dtype)


ROTARY_SCALINGS = {
    "none": None,
    "linear": {"rope_type": "linear", "factor": 4.0},
    "dynamic": {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 8},
    "yarn": {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 16},
    "llama3": {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 16,
    },
}


@pytest.mark.parametrize("scaling", ROTARY_SCALINGS.values(), ids=ROTARY_SCALINGS.keys())
@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_rotary_module_and_function_are_bit_identical_to_the_old_rotation(scaling, layout, dtype):
    generator = torch.Generator().manual_seed(11)
    rotary = RotaryEmbedding(16, base=500.0, layout=layout, scaling=scaling)
    for seq_len in (None, 5, 40):  # seq_len matters for "dynamic" only
        for length in (1, 7, 40):
            x = torch.randn(2, 3, length, 16, generator=generator).to(dtype)  # [B, H, T, Dh]
            positions = torch.randint(0, 3 * length, (length,), generator=generator)
            for maybe_positions in (None, positions):
                options = {"base": 500.0, "layout": layout, "scaling": scaling, "seq_len": seq_len}
                old = rotary_before_the_module(x, maybe_positions, **options)
                assert torch.equal(rotary(x, maybe_positions, seq_len=seq_len), old)
                assert torch.equal(rotary_embedding(x, maybe_positions, **options), old)


@pytest.mark.parametrize("scaling", ROTARY_SCALINGS.values(), ids=ROTARY_SCALINGS.keys())
def test_rotary_module_holds_the_frequencies_of_rope_frequencies(scaling):
    rotary = RotaryEmbedding(16, base=500.0, layout="half", scaling=scaling)
    # For "dynamic", the frequencies of a length up to the training length: unscaled.
    expected, factor = rope_frequencies(16, base=500.0, scaling=scaling, seq_len=8)
    assert torch.equal(rotary.inv_freq, expected) and rotary.attention_factor == factor
    assert rotary.dynamic == (scaling is not None and scaling["rope_type"] == "dynamic")


def test_rotary_module_recomputes_dynamic_frequencies_for_each_length():
    scaling = ROTARY_SCALINGS["dynamic"]
    rotary = RotaryEmbedding(16, layout="half", scaling=scaling)
    x = torch.randn(1, 1, 32, 16, generator=torch.Generator().manual_seed(0))
    short = rotary(x[..., :8, :])  # within the training length: the held frequencies
    long = rotary(x)  # 32 > 8 positions: frequencies stretched for 32
    torch.testing.assert_close(short, rotary_embedding(x[..., :8, :], layout="half"))
    assert not torch.allclose(long[..., :8, :], short)  # the same positions, rotated less
    torch.testing.assert_close(
        rotary(x, seq_len=64), rotary_embedding(x, layout="half", scaling=scaling, seq_len=64)
    )


def test_rotary_module_keeps_its_frequencies_through_to_and_saves_nothing():
    rotary = RotaryEmbedding(8, scaling=ROTARY_SCALINGS["yarn"])
    assert rotary.state_dict() == {} and list(rotary.buffers()) == []
    x = torch.randn(2, 5, 8, generator=torch.Generator().manual_seed(1)).half()
    expected = rotary(x)
    rotary.half()  # a float16 model: the frequencies stay float64 on the CPU
    assert rotary.inv_freq.dtype == torch.float64 and rotary.inv_freq.device.type == "cpu"
    assert torch.equal(rotary(x), expected)


def test_rotary_module_repr_names_its_arguments():
    assert repr(RotaryEmbedding(8)) == (
        "RotaryEmbedding(head_dim=8, base=10000.0, layout='interleaved')"
    )
    scaled = RotaryEmbedding(8, layout="half", scaling={"rope_type": "linear", "factor": 2.0})
    assert "scaling={'rope_type': 'linear', 'factor': 2.0}" in repr(scaled)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: RotaryEmbedding(7), ValueError, "head_dim must be even"),
        (lambda: RotaryEmbedding(8.0), TypeError, "head_dim"),
        (lambda: RotaryEmbedding(8, base=1.0), ValueError, "base"),
        (lambda: RotaryEmbedding(8, layout="neox"), ValueError, "layout must be"),
        (lambda: RotaryEmbedding(8, scaling={"rope_type": "ntk"}), ValueError, "rope_type"),
        (lambda: RotaryEmbedding(8, scaling=2.0), TypeError, "scaling"),
        (lambda: RotaryEmbedding(8)(torch.ones(3, 6)), ValueError, r"head_dim = 8.*\[3, 6\]"),
        (lambda: RotaryEmbedding(8)(torch.ones(3, 8), torch.arange(4)), ValueError, "positions"),
        (
            lambda: RotaryEmbedding(8, scaling=ROTARY_SCALINGS["dynamic"])(torch.ones(0, 8)),
            ValueError,
            "seq_len",
        ),
    ],
)
def test_rotary_module_bad_arguments_raise_naming_the_argument(call, error, match):
    with pytest.raises(error, match=match):
        call()
