"""Tests for attention_lab.plotting: labels, data, errors, and no side effects."""

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from matplotlib.figure import Figure

from attention_lab import plotting

TOKENS = ["the", "cat", "sat", "on", "the", "mat"]


@pytest.fixture(autouse=True)
def close_figures():
    """Close every figure a test opened, so failures do not leak figures into later tests."""
    yield
    plt.close("all")


def softmax_rows(num_queries: int, num_keys: int, seed: int = 0) -> torch.Tensor:
    """A ``[Tq, Tk]`` matrix whose rows are probability distributions."""
    generator = torch.Generator().manual_seed(seed)
    scores = torch.randn(num_queries, num_keys, generator=generator)
    return torch.softmax(scores, dim=-1)


def heatmap_array(ax) -> np.ndarray:
    """The values the heatmap's mesh is coloured by, as a ``[Tq, Tk]`` array."""
    mesh = ax.collections[0]
    rows, cols = (n - 1 for n in mesh.get_coordinates().shape[:2])  # corners -> cells
    return np.ma.getdata(mesh.get_array()).reshape(rows, cols)


def tick_texts(labels) -> list[str]:
    return [label.get_text() for label in labels]


def test_returns_figure_with_token_labels_and_axis_labels():
    weights = softmax_rows(6, 6)
    fig = plotting.attention_heatmap(weights, TOKENS, TOKENS, title="toy")
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    assert tick_texts(ax.get_yticklabels()) == TOKENS
    assert tick_texts(ax.get_xticklabels()) == TOKENS
    assert ax.get_ylabel() == "query"
    assert ax.get_xlabel() == "key"
    assert ax.get_title() == "toy"


def test_colour_bar_is_labelled_and_starts_at_zero():
    fig = plotting.attention_heatmap(softmax_rows(3, 5))
    heatmap_ax, colorbar_ax = fig.axes
    assert colorbar_ax.get_ylabel() == "attention weight"
    assert heatmap_ax.collections[0].get_clim()[0] == 0.0


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_plotted_array_equals_input_tensor(dtype):
    weights = softmax_rows(4, 7).to(dtype)
    fig = plotting.attention_heatmap(weights)
    expected = weights.to(torch.float64).numpy()
    np.testing.assert_array_equal(heatmap_array(fig.axes[0]), expected)


def test_plotted_array_equals_input_array_and_accepts_grad():
    weights = softmax_rows(5, 3).requires_grad_(True)
    fig = plotting.attention_heatmap(weights)
    np.testing.assert_array_equal(heatmap_array(fig.axes[0]), weights.detach().numpy())

    array = softmax_rows(2, 9).numpy()
    fig = plotting.attention_heatmap(array)
    np.testing.assert_array_equal(heatmap_array(fig.axes[0]), array)


def test_rectangular_cross_attention_labels():
    queries, keys = ["a", "b"], ["w", "x", "y", "z"]
    fig = plotting.attention_heatmap(softmax_rows(2, 4), queries, keys)
    ax = fig.axes[0]
    assert tick_texts(ax.get_yticklabels()) == queries
    assert tick_texts(ax.get_xticklabels()) == keys


def test_square_matrix_reuses_query_tokens_for_keys():
    fig = plotting.attention_heatmap(softmax_rows(6, 6), TOKENS)
    assert tick_texts(fig.axes[0].get_xticklabels()) == TOKENS


def test_default_labels_are_positions():
    fig = plotting.attention_heatmap(softmax_rows(3, 4))
    ax = fig.axes[0]
    assert tick_texts(ax.get_yticklabels()) == ["0", "1", "2"]
    assert tick_texts(ax.get_xticklabels()) == ["0", "1", "2", "3"]


@pytest.mark.parametrize(
    ("shape", "annotate", "expected_texts"),
    [
        ((8, 8), None, 64),  # small: annotated by default
        ((9, 4), None, 0),  # too many rows: colours only
        ((9, 4), True, 36),  # explicit request wins
        ((3, 3), False, 0),
    ],
)
def test_annotation_default_and_override(shape, annotate, expected_texts):
    fig = plotting.attention_heatmap(softmax_rows(*shape), annotate=annotate)
    assert len(fig.axes[0].texts) == expected_texts


def test_annotations_show_the_values():
    weights = torch.tensor([[0.25, 0.75], [1.0, 0.0]])
    fig = plotting.attention_heatmap(weights)
    assert [text.get_text() for text in fig.axes[0].texts] == ["0.25", "0.75", "1.00", "0.00"]


def test_draws_into_given_axes():
    fig, (left, right) = plt.subplots(1, 2)
    returned = plotting.attention_heatmap(softmax_rows(3, 3), ["a", "b", "c"], ax=right)
    assert returned is fig
    assert len(left.collections) == 0
    assert right.get_ylabel() == "query"
    assert tick_texts(right.get_xticklabels()) == ["a", "b", "c"]


def test_new_figure_per_call_without_axes():
    first = plotting.attention_heatmap(softmax_rows(2, 2))
    second = plotting.attention_heatmap(softmax_rows(2, 2))
    assert first is not second


@pytest.mark.parametrize("shape", [(6,), (2, 3, 3), (1, 1, 4, 4), ()])
def test_rejects_wrong_rank_naming_weights(shape):
    with pytest.raises(ValueError, match=r"weights must be 2-D.*\[Tq, Tk\]"):
        plotting.attention_heatmap(torch.rand(shape))


def test_rank_error_suggests_selecting_batch_and_head():
    with pytest.raises(ValueError, match=r"weights\[0, 0\]"):
        plotting.attention_heatmap(torch.rand(1, 1, 4, 4))


def test_rejects_empty_weights():
    with pytest.raises(ValueError, match="weights must not be empty"):
        plotting.attention_heatmap(np.zeros((0, 3)))


def test_rejects_non_numeric_weights():
    with pytest.raises(TypeError, match="weights must be"):
        plotting.attention_heatmap([["a", "b"], ["c", "d"]])


def test_rejects_query_tokens_of_wrong_length():
    with pytest.raises(ValueError, match=r"query_tokens has 5 tokens but weights has 6 rows"):
        plotting.attention_heatmap(softmax_rows(6, 6), TOKENS[:5], TOKENS)


def test_rejects_key_tokens_of_wrong_length():
    with pytest.raises(ValueError, match=r"key_tokens has 2 tokens but weights has 4 columns"):
        plotting.attention_heatmap(softmax_rows(2, 4), ["a", "b"], ["w", "x"])


def test_rejects_a_string_as_token_list():
    with pytest.raises(TypeError, match="query_tokens must be a sequence of tokens"):
        plotting.attention_heatmap(softmax_rows(3, 3), "cat")


def test_leaves_global_style_unchanged():
    before = dict(matplotlib.rcParams)
    fig = plotting.attention_heatmap(softmax_rows(6, 6), TOKENS, cmap="magma")
    plotting.attention_heatmap(softmax_rows(3, 4), ax=fig.axes[0])
    after = dict(matplotlib.rcParams)
    changed = {key for key in before if before[key] != after[key]}
    assert changed == set()


def test_does_not_show(monkeypatch):
    def fail_show(*args, **kwargs):
        raise AssertionError("attention_heatmap must not call plt.show()")

    monkeypatch.setattr(plt, "show", fail_show)
    fig = plotting.attention_heatmap(softmax_rows(2, 2))
    assert isinstance(fig, Figure)


def test_uses_requested_colormap():
    fig = plotting.attention_heatmap(softmax_rows(2, 2), cmap="magma")
    assert fig.axes[0].collections[0].get_cmap().name == "magma"


# --- head_grid: one heatmap per head on a shared colour scale --------------------------------


def softmax_heads(num_heads: int, num_queries: int, num_keys: int, seed: int = 0) -> torch.Tensor:
    """A ``[H, Tq, Tk]`` stack whose rows are probability distributions."""
    generator = torch.Generator().manual_seed(seed)
    scores = 2 * torch.randn(num_heads, num_queries, num_keys, generator=generator)
    return torch.softmax(scores, dim=-1)


def grid_position(ax) -> tuple[int, int]:
    spec = ax.get_subplotspec()
    return spec.rowspan.start, spec.colspan.start


@pytest.mark.parametrize(
    ("num_heads", "ncols", "positions"),
    [
        (4, 4, [(0, 0), (0, 1), (0, 2), (0, 3)]),
        (4, 2, [(0, 0), (0, 1), (1, 0), (1, 1)]),
        (5, 2, [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0)]),
        (3, 8, [(0, 0), (0, 1), (0, 2)]),  # fewer heads than columns: one short row
        (1, 4, [(0, 0)]),
    ],
)
def test_head_grid_places_one_heatmap_per_head_row_by_row(num_heads, ncols, positions):
    fig = plotting.head_grid(softmax_heads(num_heads, 3, 3), ncols=ncols)
    *heatmaps, colorbar_ax = fig.axes
    assert len(heatmaps) == num_heads  # unused grid cells are removed
    assert [grid_position(ax) for ax in heatmaps] == positions
    assert [ax.get_title() for ax in heatmaps] == [f"head {h}" for h in range(num_heads)]
    assert colorbar_ax.get_ylabel() == "attention weight"


def test_head_grid_plots_each_head_exactly():
    weights = softmax_heads(5, 4, 7)
    fig = plotting.head_grid(weights, ncols=3)
    for head, ax in enumerate(fig.axes[:5]):
        np.testing.assert_array_equal(heatmap_array(ax), weights[head].to(torch.float64).numpy())


def test_head_grid_takes_a_fixed_scale_and_a_colour_bar_under_the_grid():
    weights = softmax_heads(3, 4, 4)
    fig = plotting.head_grid(weights, vmax=1.0, colorbar="bottom")
    *heatmaps, colorbar_ax = fig.axes
    for ax in heatmaps:
        assert ax.collections[0].get_clim() == (0.0, 1.0)
    assert colorbar_ax.get_xlabel() == "attention weight" and colorbar_ax.get_xlim() == (0, 1)


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [({"vmax": 0}, ValueError), ({"vmax": "1"}, TypeError), ({"colorbar": "left"}, ValueError)],
)
def test_head_grid_rejects_a_bad_scale_or_colour_bar_place(kwargs, error):
    with pytest.raises(error, match=next(iter(kwargs))):
        plotting.head_grid(softmax_heads(2, 3, 3), **kwargs)


def test_head_grid_turns_key_labels_wider_than_a_cell():
    weights = softmax_heads(2, 3, 3)
    short = plotting.head_grid(weights, ["a", "b", "c"])
    turned = plotting.head_grid(weights, ["0:6", "1:6", "2:11"])
    assert short.axes[0].get_xticklabels()[0].get_rotation() == 0
    assert turned.axes[0].get_xticklabels()[0].get_rotation() == 45


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_head_grid_accepts_half_precision_and_grad(dtype):
    weights = softmax_heads(2, 3, 3).to(dtype).requires_grad_(True)
    fig = plotting.head_grid(weights)
    expected = weights.detach().to(torch.float64).numpy()
    for head, ax in enumerate(fig.axes[:2]):
        np.testing.assert_array_equal(heatmap_array(ax), expected[head])


def test_head_grid_accepts_array_and_batch_slice_of_module_weights():
    batch_weights = softmax_heads(6, 4, 4).view(2, 3, 4, 4)  # [B, H, Tq, Tk]
    fig = plotting.head_grid(batch_weights[1].numpy())
    for head, ax in enumerate(fig.axes[:3]):
        np.testing.assert_array_equal(heatmap_array(ax), batch_weights[1, head].numpy())


def test_head_grid_shares_one_colour_scale_and_one_colour_bar():
    weights = softmax_heads(4, 5, 5)
    weights[2] = torch.eye(5)  # one head reaches 1.0, the others stay below
    fig = plotting.head_grid(weights)
    heatmaps = fig.axes[:4]
    assert len(fig.axes) == 5  # four heatmaps and a single colour bar
    for ax in heatmaps:
        assert ax.collections[0].get_clim() == (0.0, 1.0)
    assert fig.axes[4].get_ylim() == (0.0, 1.0)


def test_head_grid_colour_scale_of_all_zero_weights_is_usable():
    fig = plotting.head_grid(torch.zeros(2, 3, 3))
    assert fig.axes[0].collections[0].get_clim() == (0.0, 1.0)


def test_head_grid_labels_outer_panels_with_tokens():
    queries, keys = ["a", "b", "c"], ["w", "x", "y", "z"]
    fig = plotting.head_grid(softmax_heads(5, 3, 4), queries, keys, ncols=2)
    heatmaps = fig.axes[:5]
    # Rows are labelled in the first column, columns on the lowest panel of each column:
    # heads 1, 3, 5 sit in column 0; head 4 is the lowest panel of column 1.
    for head, ax in enumerate(heatmaps):
        first_column = head % 2 == 0
        lowest = head in (3, 4)
        assert tick_texts(ax.get_yticklabels()) == (queries if first_column else [])
        assert ax.get_ylabel() == ("query" if first_column else "")
        assert tick_texts(ax.get_xticklabels()) == (keys if lowest else [])
        assert ax.get_xlabel() == ("key" if lowest else "")


def test_head_grid_square_weights_reuse_query_tokens_for_keys():
    fig = plotting.head_grid(softmax_heads(2, 6, 6), TOKENS)
    for ax in fig.axes[:2]:
        assert tick_texts(ax.get_xticklabels()) == TOKENS
    assert tick_texts(fig.axes[0].get_yticklabels()) == TOKENS


def test_head_grid_default_labels_are_positions():
    fig = plotting.head_grid(softmax_heads(1, 3, 4))
    assert tick_texts(fig.axes[0].get_yticklabels()) == ["0", "1", "2"]
    assert tick_texts(fig.axes[0].get_xticklabels()) == ["0", "1", "2", "3"]


def test_head_grid_thins_position_labels_of_long_sequences():
    fig = plotting.head_grid(softmax_heads(1, 45, 45))
    ax = fig.axes[0]
    assert tick_texts(ax.get_yticklabels()) == [str(i) for i in range(0, 45, 3)]
    np.testing.assert_array_equal(ax.get_xticks(), np.arange(0, 45, 3) + 0.5)  # cell centres


def test_head_grid_custom_titles_figure_title_and_size():
    fig = plotting.head_grid(
        softmax_heads(2, 3, 3), titles=["syntax?", "position?"], title="two heads", figsize=(6, 3)
    )
    assert [ax.get_title() for ax in fig.axes[:2]] == ["syntax?", "position?"]
    assert fig.get_suptitle() == "two heads"
    np.testing.assert_allclose(fig.get_size_inches(), [6, 3])


@pytest.mark.parametrize(("num_heads", "ncols", "tokens"), [(4, 4, 8), (8, 4, 12), (16, 8, 30)])
def test_head_grid_default_size_is_at_most_ten_inches_wide(num_heads, ncols, tokens):
    fig = plotting.head_grid(softmax_heads(num_heads, tokens, tokens), ncols=ncols)
    width, height = fig.get_size_inches()
    assert 0 < width <= 10 and 0 < height


def test_head_grid_does_not_change_global_style_or_show(monkeypatch):
    def fail_show(*args, **kwargs):
        raise AssertionError("head_grid must not call plt.show()")

    monkeypatch.setattr(plt, "show", fail_show)
    before = dict(matplotlib.rcParams)
    fig = plotting.head_grid(softmax_heads(3, 4, 4), cmap="magma")
    assert isinstance(fig, Figure)
    assert fig.axes[0].collections[0].get_cmap().name == "magma"
    changed = {key for key in before if before[key] != matplotlib.rcParams[key]}
    assert changed == set()


@pytest.mark.parametrize("shape", [(6,), (4, 4), (1, 2, 4, 4), ()])
def test_head_grid_rejects_wrong_rank_naming_weights(shape):
    with pytest.raises(ValueError, match=r"weights must be 3-D.*\[H, Tq, Tk\]"):
        plotting.head_grid(torch.rand(shape))


def test_head_grid_rank_error_suggests_selecting_the_batch_element():
    with pytest.raises(ValueError, match=r"weights\[0\]"):
        plotting.head_grid(torch.rand(2, 4, 3, 3))


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: plotting.head_grid(np.zeros((2, 0, 3))), ValueError, "weights must not be empty"),
        (lambda: plotting.head_grid([[["a"]]]), TypeError, "weights must be"),
        (
            lambda: plotting.head_grid(softmax_heads(2, 6, 6), TOKENS[:5]),
            ValueError,
            "query_tokens has 5 tokens but weights has 6 rows",
        ),
        (
            lambda: plotting.head_grid(softmax_heads(2, 2, 4), ["a", "b"], ["w"]),
            ValueError,
            "key_tokens has 1 tokens but weights has 4 columns",
        ),
        (lambda: plotting.head_grid(softmax_heads(2, 3, 3), "cat"), TypeError, "query_tokens"),
        (
            lambda: plotting.head_grid(softmax_heads(3, 2, 2), titles=["a", "b"]),
            ValueError,
            "titles has 2 titles but weights has 3 heads",
        ),
        (lambda: plotting.head_grid(softmax_heads(2, 2, 2), titles="ab"), TypeError, "titles"),
        (lambda: plotting.head_grid(softmax_heads(2, 2, 2), ncols=0), ValueError, "ncols"),
        (lambda: plotting.head_grid(softmax_heads(2, 2, 2), ncols=2.0), TypeError, "ncols"),
    ],
)
def test_head_grid_rejects_bad_arguments_naming_them(call, error, match):
    with pytest.raises(error, match=match):
        call()


# --- encoding_heatmap -----------------------------------------------------------------------


def toy_encoding(num_positions: int = 12, width: int = 10) -> torch.Tensor:
    """A ``[T, D]`` matrix of waves with values in [-1, 1], like a sinusoidal encoding."""
    position = torch.arange(num_positions, dtype=torch.float64)[:, None]  # [T, 1]
    frequency = torch.linspace(1.0, 0.05, width, dtype=torch.float64)  # [D]
    return torch.sin(position * frequency).float()


def test_encoding_heatmap_labels_axes_title_and_colour_bar():
    fig = plotting.encoding_heatmap(toy_encoding(), title="waves", colorbar_label="value")
    assert isinstance(fig, Figure)
    heatmap_ax, colorbar_ax = fig.axes
    assert heatmap_ax.get_xlabel() == "dimension"
    assert heatmap_ax.get_ylabel() == "position"
    assert heatmap_ax.get_title() == "waves"
    assert colorbar_ax.get_ylabel() == "value"
    assert plotting.encoding_heatmap(toy_encoding()).axes[1].get_ylabel() == "encoding value"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_encoding_heatmap_plots_positions_as_rows(dtype):
    encoding = toy_encoding(7, 5).to(dtype)
    image = plotting.encoding_heatmap(encoding).axes[0].images[0]
    expected = encoding.to(torch.float64).numpy()
    np.testing.assert_array_equal(np.ma.getdata(image.get_array()), expected)
    assert image.get_array().shape == (7, 5)  # [T, D]: rows are positions


def test_encoding_heatmap_accepts_arrays_and_grad():
    array = np.array([[0.5, -2.0, 1.0], [0.0, 0.25, -0.75]])
    fig = plotting.encoding_heatmap(array)
    np.testing.assert_array_equal(np.ma.getdata(fig.axes[0].images[0].get_array()), array)
    plotting.encoding_heatmap(toy_encoding().requires_grad_(True))


def test_encoding_heatmap_colour_scale_is_centred_on_zero():
    array = np.array([[0.5, -2.0, 1.0], [0.0, 0.25, -0.75]])
    image = plotting.encoding_heatmap(array).axes[0].images[0]
    assert image.get_clim() == (-2.0, 2.0)
    assert image.get_cmap().name == "RdBu_r"
    # The middle of a diverging colormap is its neutral colour, and 0 maps to the middle.
    assert image.norm(0.0) == 0.5
    # All zeros: still a centred, non-degenerate scale.
    zeros = plotting.encoding_heatmap(np.zeros((3, 4))).axes[0].images[0]
    assert zeros.get_clim() == (-1.0, 1.0)


def test_encoding_heatmap_draws_into_given_axes_with_requested_colormap():
    fig, (left, right) = plt.subplots(1, 2)
    returned = plotting.encoding_heatmap(toy_encoding(), ax=right, cmap="PuOr")
    assert returned is fig
    assert len(left.images) == 0
    assert right.images[0].get_cmap().name == "PuOr"
    assert right.get_xlabel() == "dimension"


@pytest.mark.parametrize(
    ("encoding", "error", "match"),
    [
        (torch.zeros(5), ValueError, r"encoding must be 2-D with shape \[T, D\]"),
        (torch.zeros(1, 5, 4), ValueError, r"encoding must be 2-D.*\(1, 5, 4\)"),
        (np.zeros((0, 4)), ValueError, "encoding must not be empty"),
        ([["a", "b"]], TypeError, "encoding must be a torch.Tensor or a NumPy array"),
    ],
)
def test_encoding_heatmap_rejects_bad_encodings_naming_them(encoding, error, match):
    with pytest.raises(error, match=match):
        plotting.encoding_heatmap(encoding)


def test_encoding_heatmap_leaves_global_style_unchanged(monkeypatch):
    def fail_show(*args, **kwargs):
        raise AssertionError("encoding_heatmap must not call plt.show()")

    monkeypatch.setattr(plt, "show", fail_show)
    before = dict(matplotlib.rcParams)
    plotting.encoding_heatmap(toy_encoding())
    after = dict(matplotlib.rcParams)
    assert {key for key in before if before[key] != after[key]} == set()


# mask_image: a boolean [Tq, Tk] mask as a two-colour image.


def random_mask(num_queries: int, num_keys: int, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.rand(num_queries, num_keys, generator=generator) > 0.5


def image_colours(ax) -> np.ndarray:
    """The RGBA colour of every cell of the image drawn into ``ax``, ``[Tq, Tk, 4]``."""
    image = ax.images[0]
    return image.to_rgba(image.get_array())


def legend_colours(ax) -> dict[str, tuple[float, ...]]:
    legend = ax.get_legend()
    return {
        text.get_text(): tuple(handle.get_facecolor())
        for text, handle in zip(legend.get_texts(), legend.legend_handles, strict=True)
    }


@given(st.integers(1, 12), st.integers(1, 12), st.integers(0, 2**16))
def test_mask_image_colours_every_cell_as_its_legend_says(num_queries, num_keys, seed):
    mask = random_mask(num_queries, num_keys, seed)
    fig = plotting.mask_image(mask)
    ax = fig.axes[0]
    np.testing.assert_array_equal(np.asarray(ax.images[0].get_array()), mask.numpy())
    colours = image_colours(ax)  # [Tq, Tk, 4]
    legend = legend_colours(ax)
    may_attend, blocked = legend["may attend\n(True)"], legend["blocked\n(False)"]
    assert may_attend != blocked
    allowed = mask.numpy()
    np.testing.assert_allclose(colours[allowed], np.broadcast_to(may_attend, (allowed.sum(), 4)))
    np.testing.assert_allclose(colours[~allowed], np.broadcast_to(blocked, ((~allowed).sum(), 4)))
    plt.close(fig)


def test_mask_image_two_colours_differ_in_lightness():
    fig = plotting.mask_image(torch.tensor([[True, False]]))
    legend = legend_colours(fig.axes[0])
    # Relative luminance (sRGB weights): distinct in greyscale, not by hue alone.
    luminance = {
        label: 0.2126 * r + 0.7152 * g + 0.0722 * b for label, (r, g, b, _) in legend.items()
    }
    assert abs(luminance["may attend\n(True)"] - luminance["blocked\n(False)"]) > 0.4


def test_mask_image_labels_tokens_axes_and_title():
    fig = plotting.mask_image(torch.ones(6, 6, dtype=torch.bool).tril(), TOKENS, title="causal")
    ax = fig.axes[0]
    assert isinstance(fig, Figure)
    assert tick_texts(ax.get_yticklabels()) == TOKENS
    assert tick_texts(ax.get_xticklabels()) == TOKENS  # square: keys default to query tokens
    assert (ax.get_xlabel(), ax.get_ylabel(), ax.get_title()) == ("key", "query", "causal")


def test_mask_image_rectangular_and_default_labels():
    fig = plotting.mask_image(random_mask(2, 3), ["a", "b"], ["x", "y", "z"])
    ax = fig.axes[0]
    assert tick_texts(ax.get_yticklabels()) == ["a", "b"]
    assert tick_texts(ax.get_xticklabels()) == ["x", "y", "z"]
    fig = plotting.mask_image(random_mask(2, 3))
    ax = fig.axes[0]
    assert tick_texts(ax.get_yticklabels()) == ["0", "1"]
    assert tick_texts(ax.get_xticklabels()) == ["0", "1", "2"]


def test_mask_image_long_mask_gets_integer_ticks_within_range():
    fig = plotting.mask_image(torch.ones(50, 50, dtype=torch.bool).tril())
    ticks = fig.axes[0].get_xticks()
    visible = ticks[(ticks >= 0) & (ticks <= 49)]
    assert 2 <= len(visible) < 50
    np.testing.assert_array_equal(visible, np.round(visible))


def test_mask_image_accepts_numpy_bool_array():
    array = random_mask(3, 4, seed=1).numpy()
    fig = plotting.mask_image(array)
    np.testing.assert_array_equal(np.asarray(fig.axes[0].images[0].get_array()), array)


@pytest.mark.parametrize("size", [2, 6, 12])
def test_mask_image_with_its_legend_fits_the_5_inch_content_column(size):
    # The book crops a figure to its drawn content ("tight"): the legend, the title and the
    # token labels must not reach past 5.0 inches, or the image is scaled down on a phone.
    tokens = ["<pad>"] * size
    fig = plotting.mask_image(random_mask(size, size), tokens, title="Causal mask")
    fig.canvas.draw()
    drawn = fig.get_tightbbox(fig.canvas.get_renderer())  # in inches
    assert drawn.width <= 5.0
    plt.close(fig)


def test_mask_image_legend_can_be_turned_off_and_draws_into_given_axes():
    fig, (left, right) = plt.subplots(1, 2)
    returned = plotting.mask_image(random_mask(3, 3), ax=right, legend=False)
    assert returned is fig
    assert right.get_legend() is None
    assert len(left.images) == 0 and len(right.images) == 1


@pytest.mark.parametrize(
    ("mask", "error", "match"),
    [
        (torch.ones(2, 2), TypeError, r"got torch\.float32\. Convert with mask\.bool\(\)"),
        (torch.ones(2, 2, dtype=torch.int64), TypeError, r"~mask\.bool\(\) if 1 means 'blocked'"),
        (np.ones((2, 2), dtype=np.uint8), TypeError, "bool dtype"),
        ([[True, False]], TypeError, "got list"),
        (torch.ones(2, 1, 1, 3, dtype=torch.bool), ValueError, r"2-D .*mask\[0, 0\]"),
        (torch.ones(3, dtype=torch.bool), ValueError, r"\[Tq, Tk\], got shape \(3,\)"),
        (torch.ones(0, 3, dtype=torch.bool), ValueError, "mask must not be empty"),
    ],
)
def test_mask_image_rejects_bad_masks(mask, error, match):
    with pytest.raises(error, match=match):
        plotting.mask_image(mask)


def test_mask_image_token_errors_name_the_mask():
    with pytest.raises(ValueError, match="query_tokens has 5 tokens but mask has 6 rows"):
        plotting.mask_image(random_mask(6, 6), TOKENS[:5], TOKENS)
    with pytest.raises(ValueError, match="key_tokens has 2 tokens but mask has 3 columns"):
        plotting.mask_image(random_mask(2, 3), ["a", "b"], ["x", "y"])
    with pytest.raises(TypeError, match="query_tokens must be a sequence of tokens"):
        plotting.mask_image(random_mask(3, 3), "cat")


def test_mask_image_leaves_global_style_unchanged_and_does_not_show(monkeypatch):
    def fail_show(*args, **kwargs):
        raise AssertionError("mask_image must not call plt.show()")

    monkeypatch.setattr(plt, "show", fail_show)
    before = dict(matplotlib.rcParams)
    plotting.mask_image(random_mask(4, 4), TOKENS[:4])
    changed = {key for key in before if before[key] != matplotlib.rcParams[key]}
    assert changed == set()


# attention_arcs ------------------------------------------------------------------------------


def drawn_arcs(fig) -> dict[tuple[int, int], object]:
    """The arrows of an arc diagram, keyed by their ``(query, key)`` pair (read from the gid)."""
    fig.canvas.draw()  # arcs are laid out in display space: draw once so paths are final
    arcs = {}
    for patch in fig.axes[0].patches:
        _, query, key = patch.get_gid().split("-")
        arcs[(int(query), int(key))] = patch
    return arcs


def arc_curve(patch):
    """The arc of an arrow (without its head): a quadratic Bezier from key to query."""
    path = patch.get_path()
    segment = next(s for s, code in path.iter_bezier() if code == path.CURVE3)
    return lambda t: segment([t])[0]  # the point at parameter t in [0, 1], in data units


@given(
    size=st.integers(min_value=1, max_value=7),
    seed=st.integers(min_value=0, max_value=2**16),
    density=st.floats(min_value=0.0, max_value=1.0),
)
def test_attention_arcs_draws_one_arrow_per_positive_off_diagonal_weight(size, seed, density):
    generator = torch.Generator().manual_seed(seed)
    weights = torch.rand(size, size, generator=generator)
    weights[torch.rand(size, size, generator=generator) > density] = 0.0
    fig = plotting.attention_arcs(weights)
    expected = {(i, j) for i in range(size) for j in range(size) if i != j and weights[i, j] > 0}
    assert set(drawn_arcs(fig)) == expected
    plt.close(fig)


def test_attention_arcs_run_from_key_to_query_above_for_earlier_keys_below_for_later():
    weights = torch.zeros(5, 5)
    weights[3, 1] = 1.0  # query 3 takes from the earlier key 1
    weights[0, 4] = 1.0  # query 0 takes from the later key 4
    arcs = drawn_arcs(plotting.attention_arcs(weights))
    forward, backward = arc_curve(arcs[(3, 1)]), arc_curve(arcs[(0, 4)])
    assert forward(0.0)[0] == pytest.approx(1.0)  # starts at key 1
    assert backward(0.0)[0] == pytest.approx(4.0)  # starts at key 4
    assert 2.5 < forward(1.0)[0] <= 3.0  # ends at query 3 (short of it, under the head)
    assert 0.0 <= backward(1.0)[0] < 0.5  # ends at query 0
    assert forward(0.5)[1] > 0.5
    assert backward(0.5)[1] < -0.5


def test_attention_arcs_rise_higher_between_distant_tokens():
    weights = torch.zeros(6, 6)
    weights[1, 0] = weights[3, 0] = weights[5, 0] = 1.0
    arcs = drawn_arcs(plotting.attention_arcs(weights))
    heights = [arc_curve(arcs[(query, 0)])(0.5)[1] for query in (1, 3, 5)]
    assert heights[0] < heights[1] < heights[2]
    ax_top = plt.gcf().axes[0].get_ylim()[1]
    assert heights[2] < ax_top  # the highest arc fits in the axes


def test_attention_arcs_width_and_opacity_grow_with_the_weight():
    weights = torch.tensor([[0.0, 0.2, 0.0], [0.0, 0.0, 0.8], [0.4, 0.0, 0.0]])
    arcs = drawn_arcs(plotting.attention_arcs(weights, linewidth=3.0))
    assert arcs[(1, 2)].get_linewidth() == pytest.approx(3.0)  # the largest weight
    assert arcs[(0, 1)].get_linewidth() == pytest.approx(3.0 * 0.2 / 0.8)
    assert arcs[(2, 0)].get_linewidth() == pytest.approx(3.0 * 0.4 / 0.8)
    assert arcs[(0, 1)].get_alpha() < arcs[(2, 0)].get_alpha() < arcs[(1, 2)].get_alpha()


def test_attention_arcs_bool_mask_draws_every_allowed_pair_alike():
    mask = torch.ones(4, 4, dtype=torch.bool).tril()  # causal: each query sees earlier keys
    arcs = drawn_arcs(plotting.attention_arcs(mask.numpy(), linewidth=1.5))
    assert set(arcs) == {(i, j) for i in range(4) for j in range(i)}
    assert {patch.get_linewidth() for patch in arcs.values()} == {1.5}


def test_attention_arcs_highlight_draws_chosen_arcs_on_top_in_their_colour():
    weights = torch.ones(4, 4)
    fig = plotting.attention_arcs(
        weights, color="0.5", highlight=[(3, 0), (1, 2)], highlight_color="#D55E00"
    )
    arcs = drawn_arcs(fig)
    orange = matplotlib.colors.to_rgba("#D55E00")
    for pair, patch in arcs.items():
        if pair in {(3, 0), (1, 2)}:
            assert patch.get_edgecolor() == orange
            assert patch.get_zorder() > arcs[(2, 1)].get_zorder()
        else:
            assert patch.get_edgecolor() == matplotlib.colors.to_rgba("0.5", alpha=1.0)


def test_attention_arcs_labels_tokens_in_order_and_defaults_to_positions():
    fig = plotting.attention_arcs(softmax_rows(6, 6), TOKENS, title="arcs")
    ax = fig.axes[0]
    texts = sorted(ax.texts, key=lambda text: text.get_position()[0])
    assert [text.get_text() for text in texts] == TOKENS
    assert [text.get_position() for text in texts] == [(i, 0.0) for i in range(6)]
    assert ax.get_title() == "arcs"
    fig = plotting.attention_arcs(softmax_rows(3, 3))
    assert sorted(text.get_text() for text in fig.axes[0].texts) == ["0", "1", "2"]


def test_attention_arcs_draws_into_given_axes_and_keeps_style(monkeypatch):
    def fail_show(*args, **kwargs):
        raise AssertionError("attention_arcs must not call plt.show()")

    monkeypatch.setattr(plt, "show", fail_show)
    before = dict(matplotlib.rcParams)
    fig, (left, right) = plt.subplots(2, 1)
    returned = plotting.attention_arcs(softmax_rows(4, 4), TOKENS[:4], ax=right)
    assert returned is fig
    assert len(left.patches) == 0 and len(right.patches) == 12
    assert right.get_aspect() == 1.0
    changed = {key for key in before if before[key] != matplotlib.rcParams[key]}
    assert changed == set()


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: plotting.attention_arcs(torch.rand(3, 4)), ValueError, r"square \[T, T\]"),
        (lambda: plotting.attention_arcs(torch.rand(2, 3, 3)), ValueError, "weights must be 2-D"),
        (lambda: plotting.attention_arcs(-torch.rand(3, 3)), ValueError, "non-negative"),
        (
            lambda: plotting.attention_arcs(torch.full((2, 2), float("nan"))),
            ValueError,
            "finite",
        ),
        (
            lambda: plotting.attention_arcs(torch.rand(3, 3), ["a", "b"]),
            ValueError,
            "tokens has 2 tokens but weights has 3",
        ),
        (
            lambda: plotting.attention_arcs(torch.rand(3, 3), "abc"),
            TypeError,
            "tokens must be a sequence of tokens",
        ),
        (
            lambda: plotting.attention_arcs(torch.rand(3, 3), linewidth=0),
            ValueError,
            "linewidth must be a positive number",
        ),
        (
            lambda: plotting.attention_arcs(torch.rand(3, 3), linewidth="2"),
            TypeError,
            "linewidth must be a positive number",
        ),
        (
            lambda: plotting.attention_arcs(torch.rand(3, 3), highlight=[(1, 1)]),
            ValueError,
            r"highlight pair \(1, 1\) is not a drawn arc",
        ),
        (
            lambda: plotting.attention_arcs(torch.eye(3), highlight=[(2, 0)]),
            ValueError,
            r"highlight pair \(2, 0\) is not a drawn arc",
        ),
        (
            lambda: plotting.attention_arcs(torch.rand(3, 3), highlight=[(1, 5)]),
            ValueError,
            r"highlight pair \(1, 5\)",
        ),
        (
            lambda: plotting.attention_arcs(torch.rand(3, 3), highlight=[1, 0]),
            TypeError,
            r"highlight must hold \(query, key\) pairs",
        ),
    ],
)
def test_attention_arcs_rejects_bad_arguments_naming_them(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_attention_heatmap_vmax_fixes_the_top_of_the_colour_scale():
    import matplotlib.pyplot as plt

    from attention_lab import plotting

    diffuse = torch.full((4, 4), 0.25)
    default = plotting.attention_heatmap(diffuse)
    assert default.axes[0].collections[0].get_clim()[1] == pytest.approx(0.25)
    fixed = plotting.attention_heatmap(diffuse, vmax=1.0)
    assert fixed.axes[0].collections[0].get_clim() == (0.0, 1.0)
    with pytest.raises(ValueError, match="vmax"):
        plotting.attention_heatmap(diffuse, vmax=0.0)
    with pytest.raises(TypeError, match="vmax"):
        plotting.attention_heatmap(diffuse, vmax="1")
    plt.close("all")


# --- model_head_grid ---------------------------------------------------------------------------


def test_model_head_grid_draws_every_head_or_one_layer_with_tokens():
    weights = torch.softmax(torch.randn(3, 4, 5, 5, generator=torch.Generator().manual_seed(0)), -1)
    tokens = ["a", "b", "c", "d", "e"]
    every = plotting.model_head_grid(weights, tokens, title="all")
    panels = every.axes[:-1]  # the last axes is the colour bar
    assert len(panels) == 3 * 4 and panels[2 * 4 + 1].get_title() == "L2 H1"
    assert all(not ax.get_xticks().size and not ax.get_yticks().size for ax in panels)
    one = plotting.model_head_grid(weights, tokens, layer=1, title="one")
    assert len(one.axes) == 4 + 1 and one.get_suptitle() == "one"
    assert [t.get_text() for t in one.axes[0].get_yticklabels()] == tokens
    drawn = np.asarray(one.axes[3].collections[0].get_array()).reshape(5, 5)
    np.testing.assert_allclose(drawn, weights[1, 3].numpy(), rtol=0, atol=1e-7)
    plt.close("all")


@pytest.mark.parametrize(
    "layer, error", [(3, ValueError), (-1, ValueError), ("1", TypeError), (1.0, TypeError)]
)
def test_model_head_grid_rejects_a_layer_the_weights_do_not_have(layer, error):
    with pytest.raises(error, match="layer"):
        plotting.model_head_grid(torch.rand(3, 2, 4, 4), layer=layer)


def test_model_head_grid_needs_four_axes():
    with pytest.raises(ValueError, match=r"\[L, H, T, T\]"):
        plotting.model_head_grid(torch.rand(2, 4, 4))


def test_heatmap_hides_cells_and_picks_readable_text():
    fig, ax = plt.subplots()
    values = np.array([[0.0, 1.0], [1.0, 0.0]])
    hidden = np.array([[False, False], [False, True]])
    plotting.heatmap(values, ax=ax, vmin=0, vmax=1, annotate="{:.1f}", hidden=hidden)
    texts = {(t.get_position(), t.get_text()): t.get_color() for t in ax.texts}
    # viridis is dark at 0 and yellow at 1: white text on the first, dark text on the second
    assert texts == {((0.5, 0.5), "0.0"): "white", ((1.5, 0.5), "1.0"): "0.15",
                     ((0.5, 1.5), "1.0"): "0.15"}  # fmt: skip
    assert np.ma.getmaskarray(ax.collections[0].get_array()).reshape(2, 2).tolist() == (
        hidden.tolist()
    )
    assert ax.get_ylim() == (2.0, 0.0)  # row 0 on top


def test_heatmap_rejects_mismatched_shapes():
    fig, ax = plt.subplots()
    with pytest.raises(ValueError, match="hidden has shape"):
        plotting.heatmap(np.zeros((2, 3)), ax=ax, hidden=np.zeros((3, 2), bool))
    with pytest.raises(ValueError, match="annotate has shape"):
        plotting.heatmap(np.zeros((2, 3)), ax=ax, annotate=np.array([["a"]]))
    with pytest.raises(ValueError, match="row_labels has 1 tokens"):
        plotting.heatmap(np.zeros((2, 3)), ax=ax, row_labels=["a"])


def test_heatmap_leaves_nan_cells_blank():
    fig, ax = plt.subplots()
    plotting.heatmap(np.array([[np.nan, 0.5]]), ax=ax, annotate="{:.2f}")
    assert [t.get_text() for t in ax.texts] == ["0.50"]
    assert np.ma.getmaskarray(ax.collections[0].get_array()).ravel().tolist() == [True, False]
