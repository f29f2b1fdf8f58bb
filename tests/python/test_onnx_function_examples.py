"""jax2onnx 0.17.1's onnx_function documentation examples, with the import changed.

The models are jax2onnx's (Apache-2.0): the `onnx_function` docstring, the
quickstart_functions.py model and plugins/examples/onnx_functions/*.py, with
`from jax2onnx import onnx_function` replaced by `from jaxonnx import
onnx_function`. Each converts, passes the full ONNX check, matches JAX in
onnxruntime and keeps the number of function definitions jax2onnx's test
metadata expects -- except where noted: jax2onnx applies the decorator by
patching the module attribute while converting, so a decorated function that
was handed over as a value before (`attention_fn=attention`) is not a function
there; here the decorated object itself is, so it gets its own definition.
Flax's deprecated `Variable.value` reads are written `[...]`.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import pytest
from flax import nnx

from jaxonnx import onnx_function
from helpers import check


def count_functions(model):
    return len(model.functions)


# -- the onnx_function docstring


def docstring_example():
    @onnx_function
    def my_custom_op(x, y):
        return jnp.sin(x) * y

    @onnx_function
    class MLPBlock(nnx.Module):
        def __init__(self, features, rngs):
            # The docstring writes nnx.Linear(features, rngs=rngs), which flax
            # rejects (Linear takes in_features and out_features).
            self.dense = nnx.Linear(features, features, rngs=rngs)
            self.activation = nnx.relu

        def __call__(self, x):
            return self.activation(self.dense(x))

    block = MLPBlock(16, nnx.Rngs(0))
    return (lambda x, y: block(my_custom_op(x, y))), [("B", 16), ("B", 16)], 2


# -- quickstart_functions.py


def quickstart_functions():
    @onnx_function
    class MLPBlock(nnx.Module):
        def __init__(self, dim: int, *, rngs: nnx.Rngs) -> None:
            self.linear1 = nnx.Linear(dim, dim, rngs=rngs)
            self.linear2 = nnx.Linear(dim, dim, rngs=rngs)
            self.batchnorm = nnx.BatchNorm(dim, rngs=rngs)

        def __call__(self, x: jax.Array) -> jax.Array:
            return nnx.gelu(self.linear2(self.batchnorm(nnx.gelu(self.linear1(x)))))

    class MyModel(nnx.Module):
        def __init__(self, dim: int, *, rngs: nnx.Rngs) -> None:
            self.block1 = MLPBlock(dim, rngs=rngs)
            self.block2 = MLPBlock(dim, rngs=rngs)

        def __call__(self, x: jax.Array) -> jax.Array:
            return self.block2(self.block1(x))

    # Two instances, each its own definition (unique=False).
    return MyModel(256, rngs=nnx.Rngs(0)), [(100, 256)], 2


# -- plugins/examples/onnx_functions


def _mlp_layers(num_hiddens, mlp_dim, rngs):
    return nnx.List([
        nnx.Linear(num_hiddens, mlp_dim, rngs=rngs),
        lambda x: nnx.gelu(x, approximate=False),
        nnx.Dropout(rate=0.1, rngs=rngs),
        nnx.Linear(mlp_dim, num_hiddens, rngs=rngs),
        nnx.Dropout(rate=0.1, rngs=rngs),
    ])


def _run_layers(layers, x, deterministic):
    for layer in layers:
        x = layer(x, deterministic=deterministic) if isinstance(layer, nnx.Dropout) else layer(x)
    return x


def example_000():
    class MLPBlock(nnx.Module):
        def __init__(self, num_hiddens, mlp_dim, rngs):
            self.linear1 = nnx.Linear(num_hiddens, mlp_dim, rngs=rngs)
            self.dropout1 = nnx.Dropout(rate=0.1, rngs=rngs)
            self.linear2 = nnx.Linear(mlp_dim, num_hiddens, rngs=rngs)
            self.dropout2 = nnx.Dropout(rate=0.1, rngs=rngs)

        def __call__(self, x, *, deterministic=False):
            y = self.linear1(x)
            y = nnx.gelu(y, approximate=False)
            y = self.dropout1(y, deterministic=deterministic)
            y = self.linear2(y)
            return self.dropout2(y, deterministic=deterministic)

    @onnx_function
    class SuperBlock(nnx.Module):
        def __init__(self, *, rngs):
            self.layer_norm2 = nnx.LayerNorm(3, rngs=rngs)
            self.mlp = MLPBlock(num_hiddens=3, mlp_dim=6, rngs=rngs)

        def __call__(self, x):
            return self.mlp(self.layer_norm2(x), deterministic=True)

    return SuperBlock(rngs=nnx.Rngs(0)), [("B", 10, 3)], 1


def _mlp_block(deterministic_default=True):
    """The MLPBlock of examples 001, 002, 006 and 014 (014: deterministic=False
    by default); an onnx_function where the example decorates it."""

    class MLPBlock(nnx.Module):
        def __init__(self, num_hiddens, mlp_dim, rngs):
            self.layers = _mlp_layers(num_hiddens, mlp_dim, rngs)

        def __call__(self, x, deterministic=deterministic_default):
            return _run_layers(self.layers, x, deterministic)

    return MLPBlock


def _linear_block():
    """Examples 003 and 004's NestedBlock, an onnx_function: one Linear."""

    @onnx_function
    class NestedBlock(nnx.Module):
        def __init__(self, num_hiddens, mlp_dim, rngs):
            self.linear = nnx.Linear(num_hiddens, mlp_dim, rngs=rngs)

        def __call__(self, x, deterministic=True):
            return self.linear(x)

    return NestedBlock


def _normed_superblock(block, function=True):
    """The SuperBlock of examples 001 (function=False), 004 and 005:
    LayerNorm(256), then block(256, mlp_dim=512)."""

    class SuperBlock(nnx.Module):
        def __init__(self):
            rngs = nnx.Rngs(0)
            self.layer_norm2 = nnx.LayerNorm(256, rngs=rngs)
            self.mlp = block(256, mlp_dim=512, rngs=rngs)

        def __call__(self, x):
            return self.mlp(self.layer_norm2(x))

    return (onnx_function(SuperBlock) if function else SuperBlock)()


def example_001():
    return _normed_superblock(onnx_function(_mlp_block()), function=False), [("B", 10, 256)], 1


def example_002():
    MLPBlock = onnx_function(_mlp_block())

    @onnx_function
    class SuperBlock(nnx.Module):
        def __init__(self):
            self.mlp = MLPBlock(num_hiddens=256, mlp_dim=512, rngs=nnx.Rngs(0))

        def __call__(self, x):
            return self.mlp(x)

    return SuperBlock(), [("B", 10, 256)], 2


def example_003():
    NestedBlock = _linear_block()

    @onnx_function
    class SuperBlock(nnx.Module):
        def __init__(self, *, rngs):
            self.mlp = NestedBlock(num_hiddens=256, mlp_dim=512, rngs=rngs)

        def __call__(self, x):
            return self.mlp(x)

    return SuperBlock(rngs=nnx.Rngs(0)), [("B", 10, 256)], 2


def example_004():
    return _normed_superblock(_linear_block()), [("B", 10, 256)], 2


def example_005():
    @onnx_function
    class NestedBlock(nnx.Module):
        def __init__(self, num_hiddens, mlp_dim, dropout_rate=0.1, *, rngs):
            self.layers = _mlp_layers(num_hiddens, mlp_dim, rngs)

        def __call__(self, x, deterministic=True):
            return _run_layers(self.layers, x, deterministic)

    return _normed_superblock(NestedBlock), [("B", 10, 256)], 2


def example_006():
    MLPBlock = _mlp_block()

    @onnx_function
    class SuperBlock(nnx.Module):
        def __init__(self, *, rngs):
            self.layer_norm2 = nnx.LayerNorm(256, rngs=rngs)
            self.mlp = MLPBlock(num_hiddens=256, mlp_dim=512, rngs=rngs)

        def __call__(self, x):
            return self.mlp(self.layer_norm2(x))

    return SuperBlock(rngs=nnx.Rngs(0)), [("B", 10, 256)], 1


def _transformer(attention_fn=None, stack_layers=0):
    """Examples 007 (attention_fn None), 008/009 (a decorated attention
    function) and 010 (a stack of 008's blocks)."""

    @onnx_function
    class FeedForward(nnx.Module):
        def __init__(self, num_hiddens, mlp_dim, dropout_rate=0.1, *, rngs):
            self.linear1 = nnx.Linear(num_hiddens, mlp_dim, rngs=rngs)
            self.dropout1 = nnx.Dropout(rate=dropout_rate, rngs=rngs)
            self.linear2 = nnx.Linear(mlp_dim, num_hiddens, rngs=rngs)
            self.dropout2 = nnx.Dropout(rate=dropout_rate, rngs=rngs)

        def __call__(self, x, *, deterministic=True):
            x = self.linear1(x)
            x = nnx.gelu(x, approximate=False)
            x = self.dropout1(x, deterministic=deterministic)
            x = self.linear2(x)
            return self.dropout2(x, deterministic=deterministic)

    @onnx_function
    class MultiHeadAttention(nnx.Module):
        def __init__(self, num_hiddens, num_heads, attention_dropout_rate=0.1, *, rngs):
            extra = {"attention_fn": attention_fn} if attention_fn else {}
            self.attention = nnx.MultiHeadAttention(
                num_heads=num_heads, qkv_features=num_hiddens, out_features=num_hiddens,
                in_features=num_hiddens, rngs=rngs, decode=False, **extra)
            self.dropout = nnx.Dropout(rate=attention_dropout_rate, rngs=rngs)

        def __call__(self, x, *, deterministic=True):
            x = self.attention(x, deterministic=deterministic)
            return self.dropout(x, deterministic=deterministic)

    @onnx_function
    class TransformerBlock(nnx.Module):
        def __init__(self, num_hiddens, num_heads, mlp_dim, attention_dropout_rate=0.1,
                     mlp_dropout_rate=0.1, *, rngs):
            self.layer_norm1 = nnx.LayerNorm(num_hiddens, rngs=rngs)
            self.attention = MultiHeadAttention(
                num_hiddens=num_hiddens, num_heads=num_heads,
                attention_dropout_rate=attention_dropout_rate, rngs=rngs)
            self.layer_norm2 = nnx.LayerNorm(num_hiddens, rngs=rngs)
            self.mlp_block = FeedForward(num_hiddens, mlp_dim, mlp_dropout_rate, rngs=rngs)

        def __call__(self, x, *, deterministic=True):
            r = self.layer_norm1(x)
            r = self.attention(r, deterministic=deterministic)
            x = x + r
            r = self.layer_norm2(x)
            return x + self.mlp_block(r, deterministic=deterministic)

    @onnx_function
    class TransformerStack(nnx.Module):
        def __init__(self, num_hiddens, num_heads, mlp_dim, num_layers,
                     attention_dropout_rate=0.1, mlp_dropout_rate=0.1, *, rngs):
            self.blocks = nnx.List([
                TransformerBlock(num_hiddens, num_heads, mlp_dim, attention_dropout_rate,
                                 mlp_dropout_rate, rngs=rngs)
                for _ in range(num_layers)])

        def __call__(self, x, *, deterministic=True):
            for block in self.blocks:
                x = block(x, deterministic=deterministic)
            return x

    if stack_layers:
        return TransformerStack(256, 8, 512, stack_layers, rngs=nnx.Rngs(0))
    return TransformerBlock(256, 8, 512, rngs=nnx.Rngs(0))


def example_007():
    return _transformer(), [("B", 10, 256)], 3


def _attention():
    @onnx_function
    def attention(*args: Any, **kwargs: Any) -> jnp.ndarray:
        return nnx.dot_product_attention(*args, **kwargs)

    return attention


def example_008():
    # jax2onnx: 3 (attention, passed as a value, is not a function there).
    return _transformer(_attention()), [("B", 10, 256)], 4


def example_010():
    # jax2onnx: 19 = the stack + 6 x (block, attention, feed-forward); here
    # the one attention function (no weights, same shapes) is shared: 20.
    return _transformer(_attention(), stack_layers=6), [("B", 10, 256)], 20


def example_016():
    @onnx_function
    class NestedBlock(nnx.Module):
        def __init__(self, num_hiddens, mlp_dim, dropout_rate=0.1, *, rngs):
            self.linear1 = nnx.Linear(num_hiddens, mlp_dim, rngs=rngs)
            self.dropout1 = nnx.Dropout(rate=dropout_rate, rngs=rngs)
            self.linear2 = nnx.Linear(mlp_dim, num_hiddens, rngs=rngs)
            self.dropout2 = nnx.Dropout(rate=dropout_rate, rngs=rngs)

        def __call__(self, x, deterministic=True):
            x = self.linear1(x)
            x = nnx.gelu(x, approximate=False)
            x = self.dropout1(x, deterministic=deterministic)
            x = self.linear2(x)
            return self.dropout2(x, deterministic=deterministic)

    @onnx_function
    class SuperBlock(nnx.Module):
        def __init__(self, *, rngs):
            self.layer_norm2 = nnx.LayerNorm(256, rngs=rngs)
            self.mlp = NestedBlock(256, mlp_dim=512, rngs=rngs)

        def __call__(self, x, deterministic=True):
            return self.mlp(self.layer_norm2(x), deterministic=deterministic)

    return SuperBlock(rngs=nnx.Rngs(0)), [("B", 10, 256)], 2


def _superblock_014(deterministic_default):
    MLPBlock = _mlp_block(deterministic_default=False)

    @onnx_function
    class SuperBlock(nnx.Module):
        def __init__(self):
            rngs = nnx.Rngs(0)
            self.layer_norm2 = nnx.LayerNorm(3, rngs=rngs)
            self.mlp = MLPBlock(num_hiddens=3, mlp_dim=6, rngs=rngs)

        def __call__(self, x, deterministic=deterministic_default):
            return self.mlp(self.layer_norm2(x), deterministic=deterministic)

    return SuperBlock()


def example_014():
    # The testcase without input_params (its call parameter keeps its default).
    return _superblock_014(True), [("B", 10, 3)], 1


def example_017():
    @onnx_function(unique=True)
    def square_shift(x, *, shift):
        """Shift the input and square the result."""
        return jnp.square(x + shift)

    class DoubleSquareShift(nnx.Module):
        def __init__(self, shift):
            self.shift = shift

        def __call__(self, x):
            first = square_shift(x, shift=self.shift)
            return square_shift(first, shift=self.shift)

    return DoubleSquareShift(0.25), [("N", 4)], 1


def _vision_transformer(reshape_with_minus_one):
    """Examples 012 (the batch reshaped by its symbolic size) and 013 (by -1)."""

    @onnx_function
    class ConvEmbedding(nnx.Module):
        def __init__(self, W=28, H=28, embed_dims=(32, 64, 128), kernel_size=3,
                     strides=(1, 2, 2), dropout_rate=0.5, *, rngs):
            conv = functools.partial(nnx.Conv, kernel_size=(kernel_size, kernel_size),
                                     padding="SAME", rngs=rngs)
            self.conv1 = conv(1, embed_dims[0], strides=(strides[0], strides[0]))
            self.conv2 = conv(embed_dims[0], embed_dims[1], strides=(strides[1], strides[1]))
            self.conv3 = conv(embed_dims[1], embed_dims[2], strides=(strides[2], strides[2]))
            self.layer_norm = nnx.LayerNorm(num_features=embed_dims[-1] * W // 4 * H // 4,
                                            reduction_axes=(1, 2, 3), feature_axes=(1, 2, 3),
                                            rngs=rngs)
            self.dropout = nnx.Dropout(rate=dropout_rate, rngs=rngs)

        def __call__(self, x, *, deterministic=True):
            x = nnx.gelu(self.conv1(x), approximate=False)
            x = nnx.gelu(self.conv2(x), approximate=False)
            x = nnx.gelu(self.conv3(x), approximate=False)
            x = self.dropout(self.layer_norm(x), deterministic=deterministic)
            batch_size, height, width, channels = x.shape
            if reshape_with_minus_one:
                return jnp.reshape(x, (-1, height * width, channels))
            return jnp.reshape(x, (batch_size, height * width, channels))

    @onnx_function
    class ClassificationHead(nnx.Module):
        def __init__(self, num_hiddens, num_classes, *, rngs):
            self.layer_norm = nnx.LayerNorm(num_features=num_hiddens, rngs=rngs)
            self.dense = nnx.Linear(num_hiddens, num_classes, rngs=rngs)

        def __call__(self, x):
            x = self.layer_norm(x)
            return nnx.log_softmax(self.dense(x[:, 0, :]))

    @onnx_function
    class ConcatClsToken(nnx.Module):
        def __init__(self, num_hiddens, *, rngs):
            self.cls_token = nnx.Param(jax.random.normal(rngs.params(), (1, 1, num_hiddens)))

        def __call__(self, x):
            cls_tokens = jnp.tile(self.cls_token[...], (x.shape[0], 1, 1))
            return jnp.concatenate([cls_tokens, x], axis=1)

    def sinusoidal(num_patches, num_hiddens):
        position = jnp.arange(num_patches + 1)[:, jnp.newaxis]
        div_term = jnp.exp(jnp.arange(0, num_hiddens, 2) * -(jnp.log(10000.0) / num_hiddens))
        emb = jnp.zeros((num_patches + 1, num_hiddens))
        emb = emb.at[:, 0::2].set(jnp.sin(position * div_term))
        return emb.at[:, 1::2].set(jnp.cos(position * div_term))

    @onnx_function
    class PositionalEmbedding(nnx.Module):
        def __init__(self, num_patches, num_hiddens):
            self.positional_embedding = nnx.Param(sinusoidal(num_patches, num_hiddens))

        def __call__(self, x):
            return x + self.positional_embedding[...]

    @onnx_function
    class VisionTransformer(nnx.Module):
        def __init__(self, height, width, num_hiddens, num_classes, stack,
                     embed_dims=(32, 128, 256), *, rngs):
            self.embedding = ConvEmbedding(embed_dims=embed_dims, dropout_rate=0.1, rngs=rngs)
            self.concat_cls_token = ConcatClsToken(num_hiddens=num_hiddens, rngs=rngs)
            self.positional_embedding = PositionalEmbedding((height // 4) * (width // 4),
                                                            num_hiddens)
            self.transformer_stack = stack
            self.classification_head = ClassificationHead(num_hiddens, num_classes, rngs=rngs)

        def __call__(self, x, *, deterministic=True):
            x = self.embedding(x, deterministic=deterministic)
            x = self.positional_embedding(self.concat_cls_token(x))
            x = self.transformer_stack(x, deterministic=deterministic)
            return self.classification_head(x)

    stack = _transformer(_attention(), stack_layers=6)
    # The ViT, its 4 parts, the stack's 20 (see example_010).
    return VisionTransformer(28, 28, 256, 10, stack, rngs=nnx.Rngs(0)), [("B", 28, 28, 1)], 25


def example_012():
    return _vision_transformer(False)


def example_013():
    return _vision_transformer(True)


EXAMPLES = [docstring_example, quickstart_functions, example_000, example_001, example_002,
            example_003, example_004, example_005, example_006, example_007, example_008,
            example_010, example_012, example_013, example_014, example_016, example_017]


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda e: e.__name__)
def test_jax2onnx_example(example):
    fn, shapes, expected = example()
    model = check(fn, shapes, rtol=1e-4, atol=1e-5)
    assert count_functions(model) == expected
    # Every definition is called: from the main graph or from another definition.
    called = {(n.domain, n.op_type) for g in [model.graph, *model.functions] for n in g.node}
    assert all((f.domain, f.name) in called for f in model.functions)


@pytest.mark.xfail(strict=True, reason="a traced `deterministic` (input_params) reaching "
                   "nnx.Dropout is not convertible yet, with or without functions")
def test_jax2onnx_example_014_015_with_input_params():
    import jaxonnx
    jaxonnx.to_onnx(_superblock_014(True), [(5, 10, 3)], input_params={"deterministic": True})
