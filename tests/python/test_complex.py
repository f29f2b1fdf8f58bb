"""Complex numbers, carried as real tensors with a trailing dim of 2 (complex64
as float32[..., 2], complex128 as float64[..., 2]), and the fft primitive via
ONNX DFT: parity with JAX through onnxruntime (the packed output against
np.stack([z.real, z.imag], -1)), static and symbolic batch, full_check."""

import jax
import jax.numpy as jnp
import numpy as np
import onnx
import pytest
from jax import lax

import jaxonnx
import jaxonnx._core as core
from jaxonnx import _plugins
from helpers import check_harness
from jaxonnx.testing import Variant, check

CPLX = ["complex64", "complex128"]
REAL_OF = {"complex64": "float32", "complex128": "float64"}


def variants(dtype):
    real = REAL_OF[dtype]
    return [Variant(real, False), Variant(real, True)]


def run(fn, specs, dtype, **kw):
    """check() in dtype's precision, static and symbolic ("B" becomes 3 when static)."""
    return check(fn, specs, variants=variants(dtype), **kw)


def c(shape, dtype):
    return (shape, dtype)


def r(shape, dtype):
    return (shape, REAL_OF[dtype])


def _declared():
    reg = core.Registry([str(_plugins.BUNDLED_PLUGINS)])
    return {p["name"]: set(p["onnx_ops"]) for plugin in reg.plugins for p in plugin["primitives"]}


# ---------------------------------------------------------------- boundary --

def test_model_boundary_is_packed():
    spec = jax.ShapeDtypeStruct(jax.export.symbolic_shape("B, 5"), np.complex64)
    model = jaxonnx.to_onnx(lambda z: z * 2, [spec])
    for v in (model.graph.input[0], model.graph.output[0]):
        t = v.type.tensor_type
        assert t.elem_type == onnx.TensorProto.FLOAT
        assert [d.dim_param or d.dim_value for d in t.shape.dim] == ["B", 5, 2]
    with jax.enable_x64(True):
        model = jaxonnx.to_onnx(lambda z: z + 1, [jax.ShapeDtypeStruct((4,), np.complex128)],
                                enable_double_precision=True)
    assert model.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.DOUBLE


def test_allclose_packs_complex_inputs_and_outputs():
    fn = lambda z: jnp.exp(z) * 1j
    model = jaxonnx.to_onnx(fn, [jax.ShapeDtypeStruct((2, 3), np.complex64)])
    z = (np.arange(6).reshape(2, 3) + 0.5j).astype(np.complex64)
    ok, why = jaxonnx.allclose(fn, model, [z])
    assert ok, why


# ------------------------------------------------------- lax_math: parts --

@pytest.mark.parametrize("dtype", CPLX)
def test_complex_real_imag_conj(dtype):
    run(lambda a, b: lax.complex(a, b), [r(("B", 3), dtype), r(("B", 3), dtype)], dtype)
    run(lambda z: (jnp.real(z), jnp.imag(z), jnp.conj(z)), [c(("B", 3), dtype)], dtype)
    run(lambda x: lax.conj(x), [r(("B", 3), dtype)], dtype)  # real in, complex out
    run(lambda a: lax.complex(a, 2.0), [r(("B", 3), dtype)], dtype)  # a scalar part
    run(lambda z: jnp.square(z), [c(("B", 3), dtype)], dtype)


@pytest.mark.parametrize("dtype", CPLX)
def test_complex_of_broadcasting_parts(dtype):
    # lax.complex broadcasts size-1 dims: each part is expanded to the result's
    # shape before they are packed.
    run(lambda a, b: (lax.complex(a, b), lax.complex(b, a)), [r(("B", 1), dtype), r(("B", 3), dtype)], dtype)
    run(lambda a, b: lax.complex(a, b), [r((1, 4), dtype), r(("B", 1), dtype)], dtype)


@pytest.mark.parametrize("shapes", ["lhs_float32_3_2_rhs_float32_3_1_", "lhs_float32_3_1_rhs_float32_3_2_"])
def test_catalog_complex_broadcast(shapes):
    check_harness("complex", f"broadcast_{shapes}")


# ------------------------------------------------- lax_elementwise: math --

UNARY = {
    "neg": lambda z: -z,
    "abs": jnp.abs,
    "exp": jnp.exp,
    "log": jnp.log,
    "sqrt": jnp.sqrt,
    "integer_pow": lambda z: z ** 3,
    "integer_pow_neg": lambda z: z ** -2,
    "pow": lambda z: (z ** 2.5, z ** (1 - 0.5j), 2.0 ** z),
    "cumsum": lambda z: (jnp.cumsum(z, axis=-1), lax.cumsum(z, axis=1, reverse=True)),
    "copy": lambda z: z,
    "sin": jnp.sin,
    "cos": jnp.cos,
    "sin_small_imag": lambda z: jnp.sin(z.real + 1e-3j * z.imag) + jnp.cos(z.real - 0.05j * z.imag),
}


@pytest.mark.parametrize("dtype", CPLX)
@pytest.mark.parametrize("name", list(UNARY))
def test_unary(name, dtype):
    run(UNARY[name], [c(("B", 4), dtype)], dtype)


@pytest.mark.parametrize("dtype", CPLX)
def test_abs_log_sqrt_edges(dtype):
    real = np.dtype(REAL_OF[dtype])
    big = np.finfo(real).max / 4
    vals = np.array([0, 1, -1, 1j, -1j, -4, -4 - 0j, 3 + 4j, -3 - 4j, big + big * 1j, 1e-30 + 1e-30j,
                     -2.5 + 1e-3j, -2.5 - 1e-3j, np.inf, -np.inf + 1j], dtype=dtype)
    fn = lambda z: (jnp.abs(z), jnp.sqrt(z), jnp.log(z))
    model = jaxonnx.to_onnx(fn, [jax.ShapeDtypeStruct(vals.shape, dtype)],
                            enable_double_precision=dtype == "complex128")
    ok, why = jaxonnx.allclose(fn, model, [vals], rtol=1e-5 if real == np.float32 else 1e-12,
                               atol=1e-6 if real == np.float32 else 1e-12,
                               enable_double_precision=dtype == "complex128")
    assert ok, why


BINARY = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "eq": lambda a, b: (a == b, a == a),
    "ne": lambda a, b: (a != b, a != a),
    "select_n": lambda a, b: jnp.where(jnp.real(a) > 0, a, b),
    "scalar_literal": lambda a, b: a * (2 - 3j) + b / (1 + 1j) - 1j,
}


@pytest.mark.parametrize("dtype", CPLX)
@pytest.mark.parametrize("name", list(BINARY))
def test_binary(name, dtype):
    run(BINARY[name], [c(("B", 4), dtype), c(("B", 4), dtype)], dtype)


@pytest.mark.parametrize("dtype", CPLX)
def test_mixed_real_and_complex(dtype):
    run(lambda x, z: (x * z, z + x, z / x, x - z), [r(("B", 4), dtype), c(("B", 4), dtype)], dtype)


@pytest.mark.parametrize("dtype", CPLX)
def test_convert_element_type(dtype):
    real = REAL_OF[dtype]
    run(lambda x: x.astype(dtype) * 1j, [r(("B", 4), dtype)], dtype)
    run(lambda z: lax.convert_element_type(z, np.dtype(real)), [c(("B", 4), dtype)], dtype)
    run(lambda z: lax.convert_element_type(z, np.bool_), [c(("B", 4), dtype)], dtype,
        make_inputs=lambda s, d, rng: np.where(rng.random(s) < 0.3, 0, 1 + 1j).astype(d) *
        (rng.random(s) < 0.5))
    run(lambda x: lax.convert_element_type(x, np.dtype(dtype)), [(("B", 4), "int32")], dtype)


@pytest.mark.parametrize("dtype", CPLX)
def test_convert_complex_to_int_takes_the_real_part(dtype):
    # As a float converts: truncation toward zero, saturation, NaN -> 0; the imaginary part is dropped.
    def edges(s, d, rng):
        re = np.array([-2.7, -0.5, 0.5, 2.7, 1e10, -1e10, np.nan, np.inf, 300.0, -129.0])
        return np.resize(re + 1j * np.resize(rng.standard_normal(re.size) * 1e3, re.size), s).astype(d)
    for dst in (np.int8, np.uint8, np.int16, np.int32, np.uint32):
        run(lambda z: lax.convert_element_type(z, np.dtype(dst)), [c(("B", 10), dtype)], dtype, make_inputs=edges)


def test_complex64_to_complex128():
    run(lambda z: z.astype(np.complex128) * 2, [c(("B", 4), "complex64")], "complex128")
    run(lambda z: z.astype(np.complex64) * 2, [c(("B", 4), "complex128")], "complex128")


# --------------------------------------------------------------- shapes --

SHAPES = {
    "reshape": lambda z: z.reshape(z.shape[0], 2, 6),
    "transpose": lambda z: jnp.transpose(z, (2, 0, 1)),
    "broadcast_in_dim": lambda z: jnp.broadcast_to(z[:, None], (z.shape[0], 5, 3, 4)),
    "squeeze": lambda z: jnp.squeeze(z[:, :1], 1),
    "expand_dims": lambda z: jnp.expand_dims(z, 1),
    "slice": lambda z: (z[:, 1:3], lax.slice(z, (0, 1, 0), (z.shape[0], 3, 4), (1, 1, 2))),
    "concatenate": lambda z: jnp.concatenate([z, z * 1j], axis=1),
    "dynamic_slice": lambda z: lax.dynamic_slice_in_dim(z, 1, 2, axis=2),
    "rev": lambda z: jnp.flip(z, (1, 2)),
    "pad": lambda z: jnp.pad(z, ((0, 0), (1, 2), (0, 1)), constant_values=1 - 2j),
    "reduce_sum": lambda z: (z.sum(axis=(1, 2)), z.sum(axis=0), z.sum()),
    "split": lambda z: jnp.split(z, 2, axis=2),
}


@pytest.mark.parametrize("dtype", CPLX)
def test_generic_reduce_max_min_is_lexicographic(dtype):
    # lax.reduce with a max/min body: JAX's lexicographic order (real part, then
    # imaginary), the init folded in the same way; real parts tie often here.
    def ties(s, d, rng):
        return (rng.integers(-2, 3, s) + 1j * rng.integers(-3, 4, s)).astype(d)

    def f(z):
        init = np.array(1 + 2j, dtype)
        return (lax.reduce(z, init, lax.max, (1,)), lax.reduce(z, init, lax.min, (0, 1)),
                lax.reduce((z, z.real), (init, np.array(0, z.real.dtype)), lambda a, b: (lax.max(a[0], b[0]),
                           lax.min(a[1], b[1])), (0,)))
    run(f, [c(("B", 5), dtype)], dtype, make_inputs=ties, batches=(2, 7))  # XLA skips the init over 1 row


@pytest.mark.parametrize("dtype", CPLX)
@pytest.mark.parametrize("name", list(SHAPES))
def test_shape_primitives(name, dtype):
    run(SHAPES[name], [c(("B", 3, 4), dtype)], dtype)


# ---------------------------------------------------------- dot_general --

DOTS = {
    "matmul": (lambda a, b: a @ b, [("B", 3), (3, 5)], (True, True)),
    "complex_real": (lambda a, b: a @ b, [("B", 3), (3, 5)], (True, False)),
    "real_complex": (lambda a, b: a @ b, [("B", 3), (3, 5)], (False, True)),
    "batched": (lambda a, b: jnp.einsum("bij,bjk->bik", a, b), [("B", 2, 3), ("B", 3, 4)], (True, True)),
    "vdot": (lambda a, b: jnp.vdot(a, b), [(4,), (4,)], (True, True)),
}


@pytest.mark.parametrize("dtype", CPLX)
@pytest.mark.parametrize("name", list(DOTS))
def test_dot_general(name, dtype):
    fn, shapes, cplx = DOTS[name]
    specs = [c(s, dtype) if k else r(s, dtype) for s, k in zip(shapes, cplx)]
    run(fn, specs, dtype)


# ------------------------------------------------------------------ fft --

FFTS = {
    "fft": (jnp.fft.fft, ("B", 8), True),
    "fft_odd": (jnp.fft.fft, ("B", 7), True),
    "fft_n": (lambda z: jnp.fft.fft(z, n=10), ("B", 7), True),
    "ifft": (jnp.fft.ifft, ("B", 8), True),
    "ifft_odd": (jnp.fft.ifft, ("B", 9), True),
    "rfft": (jnp.fft.rfft, ("B", 8), False),
    "rfft_odd": (jnp.fft.rfft, ("B", 15), False),
    "irfft": (jnp.fft.irfft, ("B", 5), True),
    "irfft_odd_n": (lambda z: jnp.fft.irfft(z, n=9), ("B", 5), True),
    "irfft_n_pads": (lambda z: jnp.fft.irfft(z, n=16), ("B", 5), True),
    "fft2": (jnp.fft.fft2, ("B", 4, 6), True),
    "ifft2": (jnp.fft.ifft2, ("B", 4, 6), True),
    "fftn": (lambda z: jnp.fft.fftn(z, axes=(1, 2, 3)), ("B", 2, 3, 4), True),
    "ifftn": (lambda z: jnp.fft.ifftn(z, axes=(1, 2, 3)), ("B", 2, 3, 4), True),
    "rfft2": (jnp.fft.rfft2, ("B", 6, 8), False),
    "irfft2": (jnp.fft.irfft2, ("B", 6, 5), True),
    "rfftn": (lambda x: jnp.fft.rfftn(x, axes=(1, 2, 3)), ("B", 2, 4, 6), False),
    "irfftn": (lambda z: jnp.fft.irfftn(z, s=(2, 4, 7), axes=(1, 2, 3)), ("B", 2, 4, 4), True),
    "fft_axis0": (lambda z: jnp.fft.fft(z, axis=0), (6, "B"), True),
    "fft_long": (jnp.fft.fft, (2, 1000), True),
    "norm_ortho": (lambda z: jnp.fft.fft(z, norm="ortho"), ("B", 8), True),
}


@pytest.mark.parametrize("dtype", CPLX)
@pytest.mark.parametrize("name", list(FFTS))
def test_fft(name, dtype):
    fn, shape, cplx = FFTS[name]
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == "complex64" else {}
    models = run(fn, [c(shape, dtype) if cplx else r(shape, dtype)], dtype, **tol)
    for m in models.values():
        assert "DFT" in {n.op_type for n in m.graph.node}
        # Only forward DFTs: onnxruntime's inverse DFT is imprecise in float64.
        assert all(a.i == 0 for n in m.graph.node if n.op_type == "DFT"
                   for a in n.attribute if a.name == "inverse")


@pytest.mark.parametrize("dtype", CPLX)
def test_fft_over_a_symbolic_length(dtype):
    # Variable-length signals: the transformed axis itself is symbolic (runs at
    # lengths 1 and 7: float32 computes in float64, the length being unknown).
    def f(z, x):
        return jnp.fft.fft(z), jnp.fft.ifft(z), jnp.fft.fft2(z), jnp.fft.ifft2(z), jnp.fft.rfft(x), jnp.fft.rfft2(x)
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == "complex64" else {}
    run(f, [c(("B", "T"), dtype), r(("B", "T"), dtype)], dtype, **tol)


@pytest.mark.parametrize("opset", [18, 19, 20, 23])
def test_fft_across_opsets(opset):
    check(lambda x: jnp.fft.irfft(jnp.fft.rfft(x) * 2), [("B", 8)],
          variants=[Variant("float32", True), Variant("float64", False)], opset=opset,
          rtol=1e-4, atol=1e-4)


def test_fft_declares_dft_and_its_kernels():
    assert "DFT" in _declared()["fft"]


# ------------------------------------------------------------- programs --

def spectral_filter(x):
    """A low-pass filter: rfft, zero the upper half of the band, irfft."""
    spec = jnp.fft.rfft(x, axis=-1)
    mask = (jnp.arange(spec.shape[-1]) < spec.shape[-1] // 2).astype(x.dtype)
    return jnp.fft.irfft(spec * mask, n=x.shape[-1], axis=-1)


def fft_convolve(x, k):
    """Linear convolution of each row of x with kernel k, via zero-padded FFTs."""
    n = x.shape[-1] + k.shape[-1] - 1
    return jnp.fft.irfft(jnp.fft.rfft(x, n=n) * jnp.fft.rfft(k, n=n), n=n)


@pytest.mark.parametrize("dtype", CPLX)
def test_spectral_filter(dtype):
    run(spectral_filter, [r(("B", 64), dtype)], dtype,
        **(dict(rtol=1e-4, atol=1e-4) if dtype == "complex64" else {}))


@pytest.mark.parametrize("dtype", CPLX)
def test_fft_convolution_matches_direct_convolution(dtype):
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == "complex64" else {}
    run(fft_convolve, [r(("B", 20), dtype), r((5,), dtype)], dtype, **tol)
    x = np.random.default_rng(1).standard_normal((2, 20))
    k = np.random.default_rng(2).standard_normal(5)
    model = jaxonnx.to_onnx(fft_convolve, [x.astype(np.float32), k.astype(np.float32)])
    import onnxruntime as ort
    got = ort.InferenceSession(model.SerializeToString()).run(
        None, dict(zip([i.name for i in model.graph.input],
                       [x.astype(np.float32), k.astype(np.float32)])))[0]
    np.testing.assert_allclose(got, np.stack([np.convolve(row, k) for row in x]), atol=1e-4)


@pytest.mark.parametrize("dtype", CPLX)
def test_complex_mlp_layer(dtype):
    # A complex-valued linear layer with a modReLU-like gate.
    def layer(z, w):
        y = z @ w
        return y * (jnp.abs(y) > 0.5) + jnp.conj(y).sum(axis=-1, keepdims=True)
    run(layer, [c(("B", 6), dtype), c((6, 4), dtype)], dtype)


# ----------------------------------------------------------- control flow --
# Loop and If carry complex values packed: carried state, stacked ys, sliced
# xs and If outputs are float[..., 2].


def phase_scan(z, w):
    # A running complex product (phase rotation) carried, every step stacked.
    def step(acc, x):
        acc = acc * x * jnp.exp(1j * jnp.angle(w))
        return acc, acc + jnp.conj(x)
    return lax.scan(step, z, jnp.stack([w, w * 0.5, w + 1j]))


@pytest.mark.parametrize("dtype", CPLX)
def test_scan_complex_carry_and_stacked_ys(dtype):
    run(phase_scan, [c(("B", 4), dtype), c(("B", 4), dtype)], dtype)


@pytest.mark.parametrize("dtype", CPLX)
def test_scan_complex_xs_reverse(dtype):
    # xs sliced along axis 0 (the leading axis; the trailing 2 stays last),
    # a real carry beside a complex one, reversed stacking.
    def f(xs, s):
        def step(carry, x):
            n, acc = carry
            acc = acc * x + s
            return (n + jnp.abs(x).sum(), acc), acc.real * 2 + x
        return lax.scan(step, (jnp.zeros((), xs.real.dtype), jnp.ones_like(xs[0])), xs, reverse=True)
    run(f, [c((5, "B", 3), dtype), c(("B", 3), dtype)], dtype)


@pytest.mark.parametrize("dtype", CPLX)
def test_fori_loop_complex_state(dtype):
    def f(z):
        return lax.fori_loop(0, 4, lambda i, c: c * (0.5 + 0.5j) + i, z)
    run(f, [c(("B", 3), dtype)], dtype)


@pytest.mark.parametrize("dtype", CPLX)
def test_while_loop_complex_carry_real_predicate(dtype):
    # Rotate and grow until the modulus passes 10 (a real predicate on a
    # complex carry); dynamic bounds.
    def f(z):
        def cond(s):
            k, v = s
            return (jnp.abs(v).max() < 10.0) & (k < 50)
        def body(s):
            k, v = s
            return k + 1, v * (1.1 + 0.3j) + 0.1j
        return lax.while_loop(cond, body, (0, z))
    run(f, [c(("B", 3), dtype)], dtype)


@pytest.mark.parametrize("dtype", CPLX)
def test_batched_while_loop_complex_carry(dtype):
    # vmap of a while_loop whose predicate depends on the batch: finished
    # elements keep their complex value (Where on the packed carry).
    def one(z):
        return lax.while_loop(lambda v: jnp.abs(v) < 5.0, lambda v: v * (1.2 + 0.4j) + 0.5, z)
    run(jax.vmap(one), [c(("B",), dtype)], dtype)


@pytest.mark.parametrize("dtype", CPLX)
def test_cond_and_switch_return_complex(dtype):
    def f(z, x):
        a = lax.cond(x.sum() > 0, lambda z: z * 1j, lambda z: jnp.conj(z), z)
        i = jnp.argmax(x[0]).astype(jnp.int32)
        b = lax.switch(i, [lambda z: z + 1, lambda z: z * z, lambda z: z.real + 0j], z)
        return a, b
    run(f, [c(("B", 3), dtype), r(("B", 3), dtype)], dtype)


@pytest.mark.parametrize("dtype", CPLX)
def test_vmapped_cond_and_switch_select_complex(dtype):
    # Under vmap a batched predicate turns cond/switch into select_n on the
    # complex cases: an int32 index among two and among three cases.
    def f(z, x):
        a = jax.vmap(lambda z, x: lax.cond(x > 0, lambda z: z * 1j, jnp.conj, z))(z, x)
        i = jnp.clip(jnp.round(x), -1, 3).astype(jnp.int32)
        b = jax.vmap(lambda i, z: lax.switch(i, [lambda z: z + 1, lambda z: z * z, jnp.conj], z))(i, z)
        return a, b
    run(f, [c(("B", 4), dtype), r(("B",), dtype)], dtype)


# ------------------------------------------------------------- refusals --

Z3 = [jax.ShapeDtypeStruct((3,), np.complex64)]


def test_unlowered_complex_operand_is_refused_naming_plugin_and_dtype():
    # What no plugin lowers for complex operands fails naming plugin,
    # primitive and aval.
    with pytest.raises(jaxonnx.ConversionError,
                       match=r"plugin 'lax_reduction' failed to lower 'reduce' \(inputs: complex64\[3\], complex64\[\]\)"
                             r".*'mul' body over complex operands"):
        jaxonnx.to_onnx(lambda z: lax.reduce(z, np.complex64(5), lax.mul, (0,)), Z3)
    with pytest.raises(jaxonnx.ConversionError, match=r"'argmax'.*complex64.*JAX itself cannot evaluate it"):
        jaxonnx.to_onnx(jnp.argmax, Z3)
    with pytest.raises(jaxonnx.ConversionError, match=r"'clamp'.*complex64.*order for it is unspecified"):
        jaxonnx.to_onnx(lambda z: lax.clamp(0j, z, 1 + 1j), Z3)
    with pytest.raises(jaxonnx.ConversionError, match=r"'cumlogsumexp'.*complex64.*takes a floating operand"):
        jaxonnx.to_onnx(lambda z: lax.cumlogsumexp(z), Z3)

