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
