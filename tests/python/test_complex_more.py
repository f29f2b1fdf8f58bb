"""Complex numbers, continued (test_complex.py has the basics): the
elementary functions of jaxonnx/complex_math.hpp, their branch cuts, and
the indexing, sorting, cumulative and window primitives on complex values.
Parity with JAX through onnxruntime in complex64 and complex128, static and
symbolic batch, full_check (tests/python/helpers' check)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import jaxonnx
from test_complex import CPLX, REAL_OF, c, r, run

# ------------------------------------------------- elementary functions --

FUNCTIONS = {
    "tanh": jnp.tanh,
    "tan": jnp.tan,
    "sinh": jnp.sinh,
    "cosh": jnp.cosh,
    "asin": jnp.arcsin,
    "acos": jnp.arccos,
    "atan": jnp.arctan,
    "asinh": jnp.arcsinh,
    "acosh": jnp.arccosh,
    "atanh": jnp.arctanh,
    "log1p": jnp.log1p,
    "expm1": jnp.expm1,
    "rsqrt": lax.rsqrt,
    "sign": jnp.sign,
    "exp2": jnp.exp2,
    "logistic": lax.logistic,
    "square": lax.square,
    "integer_pow": lambda z: lax.integer_pow(z, 5),
}


@pytest.mark.parametrize("dtype", CPLX)
@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_function(name, dtype):
    run(FUNCTIONS[name], [c(("B", 4), dtype)], dtype)


@pytest.mark.parametrize("dtype", CPLX)
def test_atan2_of_complex_operands(dtype):
    run(lambda y, x: (lax.atan2(y, x), lax.atan2(y, 2 - 1j)), [c(("B", 4), dtype), c(("B", 4), dtype)], dtype)


def points(dtype):
    """Both sides of every cut (+-1e-3 off the real and imaginary axes past
    +-1), the real and imaginary axes themselves (+0 parts, as a promoted
    real operand has), the branch points' neighbourhoods, tiny, large and
    huge values."""
    re = np.array([0, 0.5, -0.5, 1.5, -1.5, 2, -2, 1, -1, 3, -3, 1e-4, -2e-5, 1.5, -1.5, 1.5, -1.5,
                   1e-3, -1e-3, 1e-3, -1e-3, 1 + 1e-7, -1 - 1e-7, 0.7, 1e5, 3, 40, -40, 1e3, 1e20,
                   np.pi / 2, 0, 0, 0, 0, 0])
    im = np.array([0, 0, 0, 0, 0, 0, 0, 0, 0, 4, -4, 1e-4, 3e-5, 1e-3, 1e-3, -1e-3, -1e-3,
                   1.5, 1.5, -1.5, -1.5, 1e-6, 1e-6, 0.7, 3, 1e5, 1, -2, 1e3, -1e20,
                   0.01, 0.5, -0.5, 2, -2, 1 + 1e-6])
    real = REAL_OF[dtype]
    return (re.astype(real) + 1j * im.astype(real)).astype(dtype)


# Away from overflow (the huge points) and the poles of tan/tanh.
FINITE = ["asin", "acos", "atan", "asinh", "acosh", "atanh", "log1p", "sign", "rsqrt", "tanh", "tan"]


@pytest.mark.parametrize("dtype", CPLX)
@pytest.mark.parametrize("name", FINITE)
def test_function_cuts_and_edges(name, dtype):
    fn = FUNCTIONS[name]
    vals = points(dtype)
    x64 = dtype == "complex128"
    with jax.enable_x64(x64):
        model = jaxonnx.to_onnx(fn, [jax.ShapeDtypeStruct(vals.shape, dtype)], enable_double_precision=x64)
        tol = 1e-9 if x64 else 1e-5  # JAX's own float32 rsqrt(-1) is -4e-8 - 1i
        ok, why = jaxonnx.allclose(fn, model, [vals], rtol=tol, atol=tol, enable_double_precision=x64)
    assert ok, why


@pytest.mark.parametrize("dtype", CPLX)
def test_overflow_on_the_real_axis_stays_real(dtype):
    # e^x overflows but the imaginary part stays 0 (not inf * sin 0 = NaN).
    fn = lambda z: (jnp.exp(z), jnp.sinh(z), jnp.cosh(z), jnp.expm1(z), jnp.exp2(z))
    vals = np.array([800, -800, 1e5, 2], dtype=REAL_OF[dtype]).astype(dtype)
    x64 = dtype == "complex128"
    with jax.enable_x64(x64):
        model = jaxonnx.to_onnx(fn, [jax.ShapeDtypeStruct(vals.shape, dtype)], enable_double_precision=x64)
        ok, why = jaxonnx.allclose(fn, model, [vals], rtol=1e-5, atol=1e-5, enable_double_precision=x64)
    assert ok, why


@pytest.mark.parametrize("dtype", CPLX)
def test_expm1_log1p_near_zero_keep_relative_precision(dtype):
    # The answer is ~z: relative, not absolute, precision is the point.
    # (Not sinh: JAX's complex sinh cancels there, ours does not.)
    fn = lambda z: (jnp.expm1(z) / z, jnp.log1p(z) / z, jnp.tanh(z) / z, jnp.arcsin(z) / z,
                    jnp.arctanh(z) / z, jnp.arcsinh(z) / z, jnp.arctan(z) / z)
    tiny = lambda s, d, rng: ((rng.standard_normal(s) + 1j * rng.standard_normal(s)) * 1e-7).astype(d)
    run(fn, [c(("B", 4), dtype)], dtype, make_inputs=tiny)


# ---------------------------------------------------------- programs --

@pytest.mark.parametrize("dtype", CPLX)
def test_signal_processing_chain(dtype):
    # Windowed spectrum, magnitude and phase, a complex rotation and back.
    def f(x, theta):
        spec = jnp.fft.fft(x * jnp.hanning(x.shape[-1]).astype(x.real.dtype))
        mag, phase = jnp.abs(spec), jnp.angle(spec)
        rotated = spec * jnp.exp(1j * theta[:, None])
        return mag, phase, jnp.fft.ifft(rotated), jnp.tanh(rotated / 10)
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == "complex64" else {}
    run(f, [c(("B", 8), dtype), r(("B",), dtype)], dtype, **tol)


@pytest.mark.parametrize("dtype", CPLX)
def test_state_normalization_vdot_einsum(dtype):
    def f(psi, h):
        psi = psi / jnp.linalg.norm(psi, axis=-1, keepdims=True)
        energy = jnp.einsum("bi,ij,bj->b", jnp.conj(psi), h, psi)
        return psi, energy, jax.vmap(jnp.vdot)(psi, psi), jnp.arctanh(psi * 0.5)
    run(f, [c(("B", 4), dtype), c((4, 4), dtype)], dtype)


# ------------------------------------------------------- gather / scatter --
# With batch positions a complex operand is gathered and scattered part by
# part; scatter-mul scatters the product of the updates in polar form.

def inputs_with_indices(hi):
    """Random complex/real data, int32 indices in [0, hi)."""
    def make(shape, dtype, rng):
        if np.dtype(dtype) == np.int32:
            return rng.integers(0, hi, shape).astype(np.int32)
        from jaxonnx.testing import random_input
        return random_input(shape, dtype, rng)
    return make


# z: complex[5, 4] (a batch of "B" rows for vmap/take_along), i: int32[B] in [0, 3).
GATHERS = {
    "take": (lambda z, i: jnp.asarray(z)[i], (5, 4)),
    "take_axis1": (lambda z, i: jnp.take(z, i, axis=1), (5, 4)),
    "vmap_index": (lambda z, i: jax.vmap(lambda x, j: x[j])(z, i), ("B", 4)),
    "take_along_axis": (lambda z, i: jnp.take_along_axis(
        z, jnp.broadcast_to(jnp.asarray(i)[:, None], (i.shape[0], 2)), axis=1), ("B", 4)),
    "fill_or_drop": (lambda z, i: jnp.asarray(z).at[i + 3].get(mode="fill"), (5, 4)),
    "fill_value": (lambda z, i: jnp.asarray(z).at[i * 3].get(mode="fill", fill_value=-1.5), (5, 4)),
}


@pytest.mark.parametrize("dtype", CPLX)
@pytest.mark.parametrize("name", list(GATHERS))
def test_gather(name, dtype):
    fn, shape = GATHERS[name]
    run(fn, [c(shape, dtype), (("B",), "int32")], dtype, make_inputs=inputs_with_indices(3))


# z: complex[6, 4], i: int32[B] in [0, 3) (duplicates included), u: complex[B, 4].
SCATTERS = {
    "set": lambda z, i, u: jnp.asarray(z).at[i].set(u),
    "add": lambda z, i, u: jnp.asarray(z).at[i].add(u),
    "sub": lambda z, i, u: jnp.asarray(z).at[i].subtract(u),
    "mul": lambda z, i, u: jnp.asarray(z).at[i].multiply(u),
    "set_column": lambda z, i, u: jnp.asarray(z).at[:, i[0]].set(jnp.asarray(u)[0, 0]),
    "dynamic_update_slice": lambda z, i, u: lax.dynamic_update_slice(z, u[:1, :2], (i[0], jnp.int32(1))),
}


@pytest.mark.parametrize("dtype", CPLX)
@pytest.mark.parametrize("name", list(SCATTERS))
def test_scatter(name, dtype):
    run(SCATTERS[name], [c((6, 4), dtype), (("B",), "int32"), c(("B", 4), dtype)], dtype,
        make_inputs=inputs_with_indices(3))


@pytest.mark.parametrize("dtype", CPLX)
def test_vmapped_scatter_add(dtype):
    # Batching dims: each row gets its own index.
    fn = lambda z, i, u: jax.vmap(lambda x, j, v: jnp.asarray(x).at[j].add(v))(z, i, u)
    run(fn, [c(("B", 4), dtype), (("B",), "int32"), c(("B",), dtype)], dtype,
        make_inputs=inputs_with_indices(3))


# ------------------------------------------------- cumulative / windows --

CUMULATIVE = {
    "cumprod": lambda z: jnp.cumprod(z, axis=1),
    "cumprod_reverse": lambda z: lax.cumprod(z, axis=1, reverse=True),
    "cumprod_batch_axis": lambda z: lax.cumprod(z * 0.5, axis=0),
    "cumsum_reverse": lambda z: lax.cumsum(z, axis=0, reverse=True),
}


@pytest.mark.parametrize("dtype", CPLX)
@pytest.mark.parametrize("name", list(CUMULATIVE))
def test_cumulative(name, dtype):
    run(CUMULATIVE[name], [c(("B", 5), dtype)], dtype)


WINDOWS = {
    "sum": lambda z: lax.reduce_window(z, 0j, lax.add, (1, 3), (1, 1), "VALID"),
    "sum_strided_padded": lambda z: lax.reduce_window(z, 0j, lax.add, (1, 2), (1, 2), ((0, 0), (1, 2))),
    "avg_pool": lambda z: lax.reduce_window(z, 0j, lax.add, (1, 2), (1, 2), "VALID") / 2,
    "init_folded": lambda z: lax.reduce_window(z, 1 + 2j, lax.add, (2, 2), (1, 1), "SAME"),
    "max": lambda z: lax.reduce_window(z, -jnp.inf + 0j, lax.max, (1, 3), (1, 1), "VALID"),
    "max_padded": lambda z: lax.reduce_window(z, -jnp.inf + 0j, lax.max, (2, 2), (1, 2), "SAME"),
    "min_init": lambda z: lax.reduce_window(z, 0.5 + 0j, lax.min, (1, 2), (1, 1), "VALID"),
}


@pytest.mark.parametrize("dtype", CPLX)
@pytest.mark.parametrize("name", list(WINDOWS))
def test_reduce_window(name, dtype):
    run(WINDOWS[name], [c(("B", 6), dtype)], dtype, make_inputs=grid)


# ------------------------------------------------------------- ordering --
# JAX orders complex values lexicographically: real part, then imaginary.
# Inputs on a small grid so that real parts tie often.

def grid(shape, dtype, rng):
    if np.dtype(dtype).kind != "c":
        return rng.standard_normal(shape).astype(dtype)
    return (rng.integers(-2, 3, shape) + 1j * rng.integers(-2, 3, shape) +
            0.25 * (rng.random(shape) < 0.2)).astype(dtype)


ORDERING = {
    "sort": lambda z: jnp.sort(z, axis=-1),
    "sort_axis0": lambda z: jnp.sort(z, axis=0),
    "argsort": lambda z: jnp.argsort(z, axis=-1),
    "argsort_descending": lambda z: jnp.argsort(z, axis=-1, descending=True),
    "sort_key_complex_payload_real": lambda z: lax.sort((z, z.real * 2), num_keys=1),
    "sort_key_real_payload_complex": lambda z: lax.sort((jnp.abs(z), z), num_keys=1),
    "sort_two_keys": lambda z: lax.sort((z.imag, z, z * 1j), num_keys=2),
    "max_min": lambda z: (jnp.maximum(z, z[::-1]), jnp.minimum(z, 1j)),
    "reduce_max_min": lambda z: (jnp.max(z, axis=1), jnp.min(z, axis=0), jnp.max(z)),
    "cummax_cummin": lambda z: (lax.cummax(z, axis=1), lax.cummin(z, axis=0, reverse=True)),
}


@pytest.mark.parametrize("dtype", CPLX)
@pytest.mark.parametrize("name", list(ORDERING))
def test_ordering(name, dtype):
    run(ORDERING[name], [c(("B", 5), dtype)], dtype, make_inputs=grid)


# ---------------------------------------------- more primitives, end to end --

@jax.custom_jvp
def _doubled(z):
    return z * 2


_doubled.defjvp(lambda p, t: (_doubled(p[0]), t[0] * 2))

MORE = {
    "iota": lambda z: z + jnp.arange(4, dtype=z.dtype) * 1j + lax.iota(z.dtype, 4),
    "unstack": lambda z: sum(jnp.unstack(z, axis=1)),
    "jit_checkpoint_custom_jvp": lambda z: jax.jit(jax.checkpoint(lambda w: jnp.tanh(w) * w))(_doubled(z)),
    "jvp_vjp": lambda z: (jax.jvp(jnp.tanh, (z,), (z * 1j,))[1], jax.vjp(jnp.arcsinh, z)[1](z)[0]),
    "associative_scan": lambda z: lax.associative_scan(jnp.multiply, z * 0.7, axis=1),
    "fftshift_roll": lambda z: jnp.fft.fftshift(jnp.fft.fft(z), axes=1),
    "nan_reductions": lambda z: (jnp.nanmean(z, axis=1), jnp.sum(z, where=jnp.abs(z) > 1, axis=1)),
}


@pytest.mark.parametrize("dtype", CPLX)
@pytest.mark.parametrize("name", list(MORE))
def test_more_primitives(name, dtype):
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == "complex64" and name == "fftshift_roll" else {}
    run(MORE[name], [c(("B", 4), dtype)], dtype, **tol)


@pytest.mark.parametrize("dtype", CPLX)
def test_transposing_reshape_and_column_stack(dtype):
    # reshape with `dimensions` transposes the logical axes, not the packed one.
    f = lambda x: (lax.reshape(x, (x.shape[1], 2), dimensions=(1, 0)), jnp.column_stack([x[0], x[1]]))  # noqa: E731
    run(f, [c((2, "B"), dtype)], dtype)
