"""End-to-end models that exercise several plugin families at once."""

import jax
import numpy as np
import pytest
from flax import nnx

from helpers import check
from jaxonnx.testing import expect_graph


class SmallCNN(nnx.Module):
    """Conv, avg_pool, Conv, max_pool, Linear: NHWC as flax has it."""

    def __init__(self, rngs, dtype):
        self.conv1 = nnx.Conv(1, 4, kernel_size=(3, 3), param_dtype=dtype, dtype=dtype, rngs=rngs)
        self.conv2 = nnx.Conv(4, 6, kernel_size=(3, 3), strides=(1, 1), padding="VALID",
                              param_dtype=dtype, dtype=dtype, rngs=rngs)
        self.linear = nnx.Linear(3 * 3 * 6, 10, param_dtype=dtype, dtype=dtype, rngs=rngs)

    def __call__(self, x):
        x = nnx.avg_pool(jax.nn.relu(self.conv1(x)), window_shape=(2, 2), strides=(2, 2))
        x = nnx.max_pool(jax.nn.relu(self.conv2(x)), window_shape=(2, 2), strides=(2, 2))
        return self.linear(x.reshape(x.shape[0], -1))


@pytest.mark.parametrize("dtype,x64", [(np.float32, False), (np.float64, True)], ids=["f32", "f64"])
@pytest.mark.parametrize("batch", [2, "B"], ids=["static", "symbolic"])
def test_cnn_with_avg_and_max_pool(batch, dtype, x64):
    with jax.enable_x64(x64):
        model = SmallCNN(nnx.Rngs(0), dtype)
    m = check(model, [(batch, 16, 16, 1)], [dtype], x64=x64, rtol=1e-4, atol=1e-5)
    io = dict(inputs=[(batch, 16, 16, 1)], outputs=[(batch, 10)], no_unused_inputs=True)
    # The Linear on the flat features is one Gemm.
    if dtype == np.float32:
        expect_graph(m, ["Conv", "Conv", "Gemm"], absent=["Einsum", "MatMul"],
                     counts={"Conv": 2, "Gemm": 1}, **io)
    else:
        # float64 convolutions are exact im2col MatMuls (onnxruntime has no float64 Conv).
        expect_graph(m, ["Gemm"], absent=["Einsum", "Conv"], **io)
