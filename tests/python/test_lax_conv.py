"""lax_conv plugin: conv_general_dilated as Conv / ConvTranspose."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import jaxonnx
import onnx

from helpers import catalog_harness, check, check_harness, op_types
from jaxonnx.testing import Variant, expect_graph, ort_session, packed
from jaxonnx.testing import check as check_variants

# f64 is exact (im2col + float64 MatMul; onnxruntime has no double Conv): default 1e-9.
FLOATS = [(np.float32, False, 1e-4), (np.float64, True, None)]
FLOAT_IDS = ["f32", "f64"]
BATCHES = [2, "B"]

# (name, lhs shape, rhs shape, kwargs), lhs batch first. Each a distinct form.
CASES = [
    ("nchw_same", (3, 8, 8), (4, 3, 3, 3),
     dict(window_strides=(1, 1), padding="SAME")),
    ("nchw_valid_stride", (3, 8, 8), (4, 3, 3, 3),
     dict(window_strides=(2, 2), padding="VALID")),
    ("nhwc_hwio_explicit_asym", (8, 8, 3), (3, 3, 3, 4),
     dict(window_strides=(2, 1), padding=((1, 2), (0, 1)),
          dimension_numbers=("NHWC", "HWIO", "NHWC"))),
    ("negative_padding", (3, 8, 8), (4, 3, 3, 3),
     dict(window_strides=(1, 1), padding=((-1, 2), (1, -2)))),
    ("rhs_dilation", (8, 8, 3), (3, 3, 3, 4),
     dict(window_strides=(1, 1), padding="SAME", rhs_dilation=(2, 1),
          dimension_numbers=("NHWC", "HWIO", "NHWC"))),
    ("feature_groups", (6, 8, 8), (6, 2, 3, 3),
     dict(window_strides=(1, 1), padding="SAME", feature_group_count=3)),
    ("lhs_dilation_fallback", (3, 5, 5), (4, 3, 3, 3),  # strided: explicit dilation + Conv
     dict(window_strides=(2, 1), padding=((1, 1), (2, 0)), lhs_dilation=(2, 3))),
    ("lhs_dilation_convtranspose", (5, 5, 3), (3, 3, 3, 4),
     dict(window_strides=(1, 1), padding=((2, 1), (1, 2)), lhs_dilation=(2, 2),
          dimension_numbers=("NHWC", "HWIO", "NHWC"))),
    ("convtranspose_output_padding", (3, 5, 5), (4, 3, 3, 3),  # hi = k: output_padding 1
     dict(window_strides=(1, 1), padding=((1, 3), (0, 2)), lhs_dilation=(2, 2))),
    ("lhs_dilation_big_hi_fallback", (3, 5, 5), (4, 3, 3, 3),  # hi - k + 1 >= stride
     dict(window_strides=(1, 1), padding=((1, 4), (-1, 1)), lhs_dilation=(2, 2))),
    ("mixed_layout", (8, 3, 8), (3, 4, 3, 3),  # N H C W / H O I W -> N W H C
     dict(window_strides=(1, 1), padding="SAME",
          dimension_numbers=("NHCW", "HOIW", "NWHC"))),
    ("conv1d_nwc", (9, 3), (3, 3, 4),
     dict(window_strides=(2,), padding="SAME", dimension_numbers=("NWC", "WIO", "NWC"))),
    ("conv3d_ncdhw", (2, 5, 5, 5), (3, 2, 3, 3, 3),
     dict(window_strides=(1, 2, 1), padding="SAME", rhs_dilation=(1, 1, 2))),
    ("conv3d_transposed_ndhwc", (3, 3, 3, 2), (2, 2, 2, 2, 3),
     dict(window_strides=(1, 1, 1), padding=((1, 1), (1, 1), (1, 1)), lhs_dilation=(2, 2, 2),
          dimension_numbers=("NDHWC", "DHWIO", "NDHWC"))),
]


def _all_forms(*args):
    xs, ws = args[::2], args[1::2]
    return tuple(lax.conv_general_dilated(x, w, **kw) for (_, _, _, kw), x, w in zip(CASES, xs, ws))


@pytest.mark.parametrize("batch", BATCHES, ids=str)
@pytest.mark.parametrize("dtype,x64,rtol", FLOATS, ids=FLOAT_IDS)
def test_conv_general_dilated(dtype, x64, rtol, batch):
    # Every form in one model (one onnxruntime session per dtype and batch).
    shapes = [s for _, xs, ws, _ in CASES for s in ((batch, *xs), ws)]
    check(_all_forms, shapes, [dtype] * len(shapes), x64=x64, rtol=rtol, atol=rtol)


@pytest.mark.parametrize("name,xs,ws,kw", CASES, ids=[c[0] for c in CASES])
def test_conv_structure(name, xs, ws, kw):
    specs = [jax.ShapeDtypeStruct((2, *xs), np.float32), jax.ShapeDtypeStruct(ws, np.float32)]
    ops = op_types(jaxonnx.to_onnx(lambda x, w: lax.conv_general_dilated(x, w, **kw), specs))
    main = "ConvTranspose" if "convtranspose" in name or "transposed" in name else "Conv"
    assert ops.count("Conv") + ops.count("ConvTranspose") == 1 and main in ops, ops
    if "fallback" in name:  # the zeros go in with one Unsqueeze/Pad/Reshape/Slice
        assert [o for o in ops if o in ("Unsqueeze", "Pad", "Reshape")] == ["Unsqueeze", "Pad", "Reshape"]


def test_layouts_emit_minimal_transposes():
    # NCHW/OIHW: no Transpose at all.
    model = check(lambda x, w: lax.conv_general_dilated(x, w, (1, 1), "SAME"), [("B", 3, 8, 8), (4, 3, 3, 3)])
    expect_graph(model, ["Conv"], match="exact", inputs=[("B", 3, 8, 8), (4, 3, 3, 3)],
                 outputs=[("B", 4, 8, 8)])
    # NHWC/HWIO: X in, W, Y out.
    model = check(lambda x, w: lax.conv_general_dilated(
        x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")), [("B", 8, 8, 3), (3, 3, 3, 4)])
    expect_graph(model, ["Transpose -> Conv -> Transpose"] * 2, match="exact",
                 counts={"Transpose": 3})


def test_two_nhwc_convs_cancel_inner_transposes():
    dn = ("NHWC", "HWIO", "NHWC")

    def f(x, w1, w2):
        # tanh: the optimizer folds Transposes across elementwise ops (Relu's
        # Max with a scalar is not in its elementwise table yet).
        y = jnp.tanh(lax.conv_general_dilated(x, w1, (1, 1), "SAME", dimension_numbers=dn)) * 2.0
        return lax.conv_general_dilated(y, w2, (1, 1), "SAME", dimension_numbers=dn)

    model = check(f, [("B", 8, 8, 3), (3, 3, 3, 4), (3, 3, 4, 5)])
    # X in, Y out and the two weight Transposes; the pair around Tanh is gone.
    expect_graph(model, ["Transpose -> Conv -> Tanh -> Mul -> Conv -> Transpose"] * 2
                 + ["Transpose -> Conv -> Transpose"], match="exact",
                 counts={"Conv": 2, "Transpose": 4}, no_unused_inputs=True)


def test_symbolic_spatial_dims():
    # Explicit pads on symbolic H, W: both the ConvTranspose and the dilate + Conv path.
    pads = ((1, -1), (0, 2))
    check(lambda x, w: (lax.conv_general_dilated(x, w, (1, 1), pads, lhs_dilation=(2, 1), rhs_dilation=(1, 2)),
                        lax.conv_general_dilated(x, w, (2, 1), pads, lhs_dilation=(2, 1), rhs_dilation=(1, 2))),
          [("B", 3, "H", "W"), (4, 3, 3, 3)], rtol=1e-4, atol=1e-4, batches=(5, 7))


@pytest.mark.parametrize("dtype,x64,rtol", FLOATS, ids=FLOAT_IDS)
def test_strided_same_conv_over_symbolic_image_size(dtype, x64, rtol):
    """A ResNet-style stem (7x7, stride 2, SAME) on images of any size: SAME's pads
    are floordiv(...) of H and W, known only at run time."""
    w = np.random.default_rng(0).standard_normal((7, 7, 3, 4)).astype(dtype) * 0.1

    def stem(x):
        return lax.conv_general_dilated(x, jnp.asarray(w), (2, 2), "SAME",
                                        dimension_numbers=("NHWC", "HWIO", "NHWC"))
    with jax.enable_x64(x64):
        spec = jax.ShapeDtypeStruct(jax.export.symbolic_shape("B, H, W, 3"), dtype)
        assert "floordiv" in str(jax.make_jaxpr(stem)(spec)), "the pads are no longer symbolic"
    check(stem, [("B", "H", "W", 3)], [dtype], x64=x64, rtol=rtol, atol=rtol,
          batches=[{"B": 1, "H": 1, "W": 2}, {"B": 2, "H": 9, "W": 6}, {"B": 1, "H": 16, "W": 15}])


def test_same_conv_with_a_kernel_as_long_as_the_signal():
    """A 'same' correlation of a signal with a filter of its own length: pads
    floordiv(B - 1, 2) and B - 1 - floordiv(B - 1, 2)."""
    check(lambda x, k: lax.conv_general_dilated(x, k, (1,), "SAME"),
          [(1, 2, "B"), (3, 2, "B")], rtol=1e-4, atol=1e-4, batches=(1, 2, 7))


def test_opset18():
    check(lambda x, w: lax.conv_general_dilated(
        x, w, (1, 1), ((1, 0), (-1, 1)), lhs_dilation=(2, 1), dimension_numbers=("NHWC", "HWIO", "NHWC")),
        [("B", 6, 6, 3), (3, 3, 3, 4)], rtol=1e-4, atol=1e-4, opset=18)


@pytest.mark.parametrize("dtype,x64,rtol", FLOATS, ids=FLOAT_IDS)
def test_batch_group_count(dtype, x64, rtol):
    # The weight gradient of a convolution binds batch_group_count > 1.
    fn = lambda x, w: lax.conv_general_dilated(x, w, (1, 1), "VALID", batch_group_count=2)
    model = check(fn, [(4, 3, 6, 6), (6, 3, 3, 3)], [dtype, dtype], x64=x64, rtol=rtol, atol=rtol)
    assert op_types(model).count("Conv" if dtype == np.float32 else "MatMul") == 1


def test_float64_is_exact_im2col():
    # Values whose float32 rounding shows: 1 + 2^-30 is not a float32.
    def gen(s, d, rng):
        return (1.0 + rng.integers(1, 8, size=s) * 2.0 ** -30).astype(d)
    fn = lambda x, w: lax.conv_general_dilated(x, w, (2, 1), ((1, 2), (0, 1)), rhs_dilation=(1, 2),
                                               feature_group_count=2,
                                               dimension_numbers=("NHWC", "HWIO", "NHWC"))
    model = check(fn, [("B", 7, 8, 4), (3, 2, 2, 6)], [np.float64, np.float64], x64=True,
                  make_inputs=gen, rtol=1e-15, atol=0)
    ops = op_types(model)
    assert "Conv" not in ops and "Cast" not in ops and ops.count("MatMul") == 1
    # The f32 path would be off by ~1e-8 relative here.


def test_float64_gradient_of_conv():
    def loss(x, w):
        y = lax.conv_general_dilated(x, w, (2, 2), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
        return jnp.sum(jnp.tanh(y))

    check(jax.grad(loss, argnums=(0, 1)), [("B", 6, 6, 3), (3, 3, 3, 4)], x64=True)


def test_batch_group_count_from_gradient():
    def loss(x, w):
        y = lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
        return jnp.sum(jnp.sin(y))

    check(lambda x, w: jax.grad(loss, argnums=(0, 1))(x, w), [(2, 6, 6, 3), (3, 3, 3, 4)],
          rtol=1e-4, atol=1e-3)


def test_preferred_element_type_and_f16():
    # float16 operands with a float32 result: the Conv runs in float32.
    fn = lambda x, w: (lax.conv_general_dilated(x, w, (1, 1), "SAME", preferred_element_type=jnp.float32),
                       lax.conv_general_dilated(x, w, (1, 1), "SAME"))
    check(fn, [("B", 3, 6, 6), (4, 3, 3, 3)], [np.float16, np.float16], rtol=1e-2, atol=1e-2)


def test_lax_conv_and_conv_transpose_api():
    check(lambda x, w: lax.conv(x, w, (2, 2), "SAME"), [("B", 3, 8, 8), (4, 3, 3, 3)], rtol=1e-4, atol=1e-4)
    for pad in ["SAME", "VALID", ((1, 2), (0, 1))]:
        for transpose_kernel in [False, True]:
            check(lambda x, w: lax.conv_transpose(x, w, (2, 2), pad, dimension_numbers=("NHWC", "HWIO", "NHWC"),
                                                  transpose_kernel=transpose_kernel),
                  [("B", 5, 5, 3), (3, 3, 4, 3) if transpose_kernel else (3, 3, 3, 4)], rtol=1e-4, atol=1e-4)


# ------------------------------------------------------ integers, complex --

def _full_range(s, d, rng):
    """Integers over the dtype's whole range: the sums wrap."""
    info = np.iinfo(d)
    return rng.integers(info.min, info.max, size=s, endpoint=True, dtype=np.int64).astype(d)


# Integer forms: strides, asymmetric and negative padding, both dilations,
# feature and batch groups, a layout; each wraps like JAX on full-range inputs.
INT_FORMS = [
    lambda x, w: lax.conv_general_dilated(x, w, (2, 1), ((1, 2), (0, -1)), rhs_dilation=(1, 2)),
    lambda x, w: lax.conv_general_dilated(x, w, (1, 1), ((1, 1), (2, 0)), lhs_dilation=(2, 1)),
    lambda x, w: lax.conv_general_dilated(x[:, :2], w[:4, :1], (1, 1), "SAME", feature_group_count=2),
    lambda x, w: lax.conv_general_dilated(x, w[:4], (1, 1), "VALID", batch_group_count=2),
    lambda x, w: lax.conv_general_dilated(jnp.transpose(x, (0, 2, 3, 1)), jnp.transpose(w, (2, 3, 1, 0)),
                                          (1, 2), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")),
]


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.uint8], ids=str)
def test_integer_conv_is_exact_and_wraps(dtype):
    fn = lambda x, w: tuple(f(x, w) for f in INT_FORMS)
    model = check(fn, [(4, 2, 6, 5), (6, 2, 3, 2)], [dtype, dtype], make_inputs=_full_range)
    ops = op_types(model)
    assert "Conv" not in ops and "ConvTranspose" not in ops and ops.count("MatMul") == len(INT_FORMS)


def test_integer_conv_symbolic_batch():
    fn = lambda x, w: lax.conv_general_dilated(x, w, (2, 2), "SAME", rhs_dilation=(2, 1),
                                               dimension_numbers=("NHWC", "HWIO", "NHWC"))
    check(fn, [("B", 7, 6, 3), (3, 2, 3, 4)], [np.int32, np.int32], make_inputs=_full_range)


def test_integer_conv_preferred_element_type():
    # int8 operands accumulated as int16/int32 (the operands widen first, then wrap in
    # the wider type), or as floats.
    fn = lambda x, w: tuple(lax.conv_general_dilated(x, w, (1, 1), "SAME", preferred_element_type=t)
                            for t in (jnp.int8, jnp.int16, jnp.int32, jnp.float32, jnp.float16))
    check(fn, [("B", 3, 6, 5), (4, 3, 3, 3)], [np.int8, np.int8], make_inputs=_full_range,
          rtol=1e-2, atol=1e-2)


def test_int64_conv_wraps():
    fn = lambda x, w: lax.conv_general_dilated(x, w, (1, 2), ((1, 0), (1, 1)), feature_group_count=2)
    model = check(fn, [("B", 4, 5, 6), (4, 2, 2, 3)], [np.int64, np.int64], x64=True,
                  make_inputs=_full_range)
    assert "Cast" not in op_types(model)


@pytest.mark.parametrize("name", [
    "lhs_int8_2_3_9_10_rhs_int8_3_3_4_5_windowstrides_1_1_padding_0_0_0_0_lhsdilation_1_1_rhsdilation_1_1_"
    "dimensionnumbers_NCHW_OIHW_NCHW_featuregroupcount_1_batchgroupcount_1_precision_None_preferred_int8_"
    "enablexla_True",
    "lhs_int16_2_3_9_10_rhs_int16_3_3_4_5_windowstrides_1_1_padding_0_0_0_0_lhsdilation_1_1_rhsdilation_1_1_"
    "dimensionnumbers_NCHW_OIHW_NCHW_featuregroupcount_1_batchgroupcount_1_precision_None_preferred_int32_"
    "enablexla_True",
    "lhs_int32_2_3_9_10_rhs_int32_3_3_4_5_windowstrides_1_1_padding_0_0_0_0_lhsdilation_1_1_rhsdilation_1_1_"
    "dimensionnumbers_NCHW_OIHW_NCHW_featuregroupcount_1_batchgroupcount_1_precision_None_preferred_float32_"
    "enablexla_True",
], ids=["int8", "int16_to_int32", "int32_to_float32"])
def test_catalog_preferred(name):
    check_harness("conv_general_dilated", "preferred_" + name)


def test_catalog_complex64():
    # Sums of 60 products of unit-sized parts cancel to ~0.5 out of ~200: float32
    # rounding of that order, so the tolerance scales with max|JAX| (as the
    # catalog's does) rather than check_harness's absolute 1e-5.
    h = catalog_harness("conv_general_dilated",
                        "preferred_lhs_complex64_2_3_9_10_rhs_complex64_3_3_4_5_windowstrides_1_1_padding_0_0_0_0_"
                        "lhsdilation_1_1_rhsdilation_1_1_dimensionnumbers_NCHW_OIHW_NCHW_featuregroupcount_1_"
                        "batchgroupcount_1_precision_None_preferred_complex64_enablexla_True")
    args = h.dyn_args_maker(np.random.RandomState(0))
    model = jaxonnx.to_onnx(h.dyn_fun, args)
    onnx.checker.check_model(model, full_check=True)
    sess = ort_session(model)
    (got,) = sess.run(None, {i.name: packed(a) for i, a in zip(sess.get_inputs(), args)})
    expected = packed(jax.jit(h.dyn_fun)(*args))
    assert got.shape == expected.shape and got.dtype == expected.dtype == np.float32
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6 * np.abs(expected).max())


COMPLEX = [("complex64", "float32", 1e-4), ("complex128", "float64", None)]


@pytest.mark.parametrize("cdtype,real,tol", COMPLEX, ids=["c64", "c128"])
def test_complex_conv(cdtype, real, tol):
    # Three real convolutions of the parts (JAX's own Gauss form), through each
    # path of the real one.
    def fn(x, w, xb):
        return (lax.conv_general_dilated(x, w, (2, 1), ((1, 2), (0, -1)), rhs_dilation=(1, 2)),
                lax.conv_general_dilated(x, w, (1, 1), ((1, 1), (2, 0)), lhs_dilation=(2, 2)),
                lax.conv_general_dilated(x[:, :2], w[:4, :1], (1, 1), "SAME", feature_group_count=2),
                lax.conv_general_dilated(xb, w[:4], (1, 1), "VALID", batch_group_count=2))
    variants = [Variant(real, False), Variant(real, True)]
    models = check_variants(fn, [(("B", 2, 6, 5), cdtype), ((6, 2, 3, 2), cdtype), ((4, 2, 5, 5), cdtype)],
                            variants=variants, rtol=tol, atol=tol)
    ops = op_types(next(iter(models.values())))
    assert ops.count("Conv") + ops.count("ConvTranspose") + ops.count("MatMul") == 4 * 3


def test_complex64_conv_to_complex128():
    # The part sums round in complex64 as in JAX's lowering, the convolutions run
    # in float64: JAX's result to float64 rounding (four products per term would not be).
    fn = lambda x, w: lax.conv_general_dilated(x, w, (1, 2), "SAME", preferred_element_type=jnp.complex128)
    check_variants(fn, [(("B", 3, 7, 6), "complex64"), ((4, 3, 3, 2), "complex64")],
                   variants=[Variant("float64", False), Variant("float64", True)])


def test_bool_conv_is_or_of_ands():
    # XLA's bool convolution: products are AND, sums OR (an int32 count, nonzero).
    fn = lambda x, w: (lax.conv_general_dilated(x, w, (1, 1), "SAME"),
                       lax.conv_general_dilated(x, w, (2, 1), ((0, 1), (1, 0)), lhs_dilation=(1, 2)))
    gen = lambda s, d, rng: rng.random(s) < 0.2
    check(fn, [("B", 3, 6, 5), (4, 3, 3, 2)], [np.bool_, np.bool_], make_inputs=gen)


# ---------------------------------------------------------------- flax nnx --

nnx = pytest.importorskip("flax.nnx")


def test_nnx_conv():
    kws = [dict(padding="SAME"), dict(padding="VALID", strides=2), dict(padding="SAME", kernel_dilation=2),
           dict(padding="SAME", feature_group_count=3, strides=(2, 1))]
    ms = [nnx.Conv(6, 6, (3, 3), rngs=nnx.Rngs(0), **kw) for kw in kws]
    model = check(lambda x: tuple(m(x) for m in ms), [("B", 8, 8, 6)], rtol=1e-4, atol=1e-4)
    assert op_types(model).count("Conv") == len(kws)


def test_nnx_conv_transpose():
    kws = [dict(padding="SAME", strides=2), dict(padding="VALID", strides=2), dict(padding="SAME", strides=1),
           dict(padding="SAME", strides=2, kernel_dilation=2)]
    ms = [nnx.ConvTranspose(3, 4, (3, 3), rngs=nnx.Rngs(0), **kw) for kw in kws]
    model = check(lambda x: tuple(m(x) for m in ms), [("B", 5, 5, 3)], rtol=1e-4, atol=1e-4)
    ops = op_types(model)
    assert ops.count("ConvTranspose") + ops.count("Conv") == len(kws), ops


# ------------------------------------------------------------ empty results --

@pytest.mark.parametrize("dtype,x64,tol", FLOATS, ids=FLOAT_IDS)
@pytest.mark.parametrize("batch", BATCHES, ids=["static", "sym"])
def test_kernel_larger_than_input_is_empty(dtype, x64, tol, batch):
    # JAX's output size max(0, ...) is 0 where the dilated kernel (or the
    # kernel over a cropping pad) is larger than the padded input: the model
    # gives that empty result, not a negative dim or a Conv that fails.
    def f(x, w):
        return (lax.conv_general_dilated(x, w, (1, 1), "VALID", rhs_dilation=(3, 3)),
                lax.conv_general_dilated(x, w, (1, 1), ((0, -2), (0, 0))),
                lax.conv_general_dilated(x, w, (2, 1), "VALID", rhs_dilation=(1, 4),
                                         dimension_numbers=("NCHW", "OIHW", "NHWC")))
    model = check(f, [(batch, 2, 3, 3), (4, 2, 2, 2)], [dtype, dtype], x64=x64)
    assert "Conv" not in op_types(model) and "MatMul" not in op_types(model)


@pytest.mark.parametrize("name", [
    "rhs_oob_lhs_float32_2_3_9_10_rhs_float32_3_3_10_5_windowstrides_1_1_padding_0_0_0_0_lhsdilation_1_1_"
    "rhsdilation_1_1_dimensionnumbers_NCHW_OIHW_NCHW_featuregroupcount_1_batchgroupcount_1_precision_None_"
    "preferred_float64_enablexla_True",
    "rhs_oob_after_dilation_lhs_float32_2_3_9_10_rhs_float32_3_3_4_5_windowstrides_1_1_padding_0_0_0_0_"
    "lhsdilation_1_1_rhsdilation_2_3_dimensionnumbers_NCHW_OIHW_NCHW_featuregroupcount_1_batchgroupcount_1_"
    "precision_None_preferred_float64_enablexla_True"], ids=["kernel", "dilated_kernel"])
def test_catalog_kernel_larger_than_input(name):
    check_harness("conv_general_dilated", name)
