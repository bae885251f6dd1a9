"""A small, tested PyTorch library for learning how attention works.

``attention_lab`` holds the code the course runs: attention masks, positional encodings and
scaled dot-product and multi-head attention, each checked against PyTorch's own implementation.

Submodules:

- ``attention_lab.masks``: boolean attention masks (causal, padding) and how to combine them.
- ``attention_lab.positional``: the sinusoidal positional encoding (a function and a module),
  learned absolute position embeddings and rotary embeddings (RoPE).
- ``attention_lab.attention``: scaled dot-product attention, one-head self-attention and
  multi-head attention.
- ``attention_lab.layers``: the Transformer block: feed-forward network, encoder and decoder
  layers (post-norm or pre-norm), and a small token encoder.
- ``attention_lab.efficient``: exact attention computed block by block with an online softmax,
  never holding the ``[Tq, Tk]`` weights (``from attention_lab import efficient``).
- ``attention_lab.data``: synthetic token sequences, padding, a patterned (reversal) task, and
  pandas frames with validation (imported on demand: ``from attention_lab import data``).
- ``attention_lab.plotting``: figures of weights, masks and encodings (imported on demand,
  ``from attention_lab import plotting``, so that the models do not load matplotlib).

Shapes in docstrings use these letters:

- ``B``: batch size.
- ``H``: number of attention heads.
- ``T``: sequence length; ``Tq`` for queries and ``Tk`` for keys and values when they differ.
- ``D``: model width (embedding size).
- ``Dh``: width of one head, ``D // H``; ``Dk`` and ``Dv`` for query/key and value widths.
- ``...``: any number of leading batch dimensions.

A mask is always a ``torch.bool`` tensor in which ``True`` means "may attend", broadcastable to
``[..., Tq, Tk]``, the convention of ``torch.nn.functional.scaled_dot_product_attention``.

Importing the package prints nothing, changes no global setting and downloads nothing.
"""

from attention_lab import attention, layers, masks, positional

__all__ = ["attention", "layers", "masks", "positional"]
__version__ = "0.1.0"
