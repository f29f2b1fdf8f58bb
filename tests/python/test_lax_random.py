"""lax_random plugin: random_seed / random_wrap / random_unwrap / random_bits /
random_split / random_fold_in / threefry2x32, bit-exact with JAX's threefry; rbg and
unsafe_rbg keys (their implementation on rng_bit_generator and threefry2x32).

Keys enter the models as inputs: raw uint32[2] keys (jax.random.PRNGKey) and
typed keys (jax.random.key; the model input is their uint32[2] key data).
The JAX reference compiles threefry with XLA (seconds per program and shape),
so each test jits one program that draws many things, at one batch size
(the dropout test runs two)."""

import contextlib

import jax
import jax.numpy as jnp
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from jax._src.random.threefry2x32 import threefry2x32_p  # no public API binds it

import jaxonnx
from helpers import check, check_harness, op_types, symbolic_specs

ONE_BATCH = (5,)


def keys_and_normals(shape, dtype, rng):
    """Full-range integers (uint32 key data, seeds), normal floats otherwise."""
    dtype = np.dtype(dtype)
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, size=shape, endpoint=True, dtype=dtype)
    return rng.standard_normal(size=shape).astype(dtype)


def check_raw_key(fn, x_shape, x64=False, **kw):
    """fn(raw uint32[2] key, x) through helpers.check."""
    kw.setdefault("batches", ONE_BATCH)
    dt = np.float64 if x64 else np.float32
    return check(jax.jit(fn), [(2,), x_shape], [np.uint32, dt], x64=x64,
                 make_inputs=keys_and_normals, **kw)


def check_typed_key(fn, x_shape, x64=False, seeds=(0, 42), batches=ONE_BATCH, opset=23, tol=None,
                    impl="threefry2x32"):
    """fn(typed key, x): the model takes the key's key data (uint32[2] for threefry2x32,
    uint32[4] for rbg and unsafe_rbg)."""
    dt = np.float64 if x64 else np.float32
    ctx = jax.enable_x64(True) if x64 else contextlib.nullcontext()
    fn = jax.jit(fn)
    with ctx:
        spec_x, = symbolic_specs([x_shape], [dt])
        model = jaxonnx.to_onnx(fn, [jax.random.key(0, impl=impl), spec_x], enable_double_precision=x64,
                                opset=opset)
    onnx.checker.check_model(model, full_check=True)
    key_in = model.graph.input[0].type.tensor_type
    assert key_in.elem_type == onnx.TensorProto.UINT32
    assert [d.dim_value for d in key_in.shape.dim] == [2 if impl == "threefry2x32" else 4]
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    rng = np.random.default_rng(1)
    for seed in seeds:
        for b in batches if any(isinstance(d, str) for d in x_shape) else batches[:1]:
            x = rng.standard_normal(tuple(b if isinstance(d, str) else d for d in x_shape)).astype(dt)
            with ctx:
                key = jax.random.key(seed, impl=impl)
                want = [np.asarray(e) for e in jax.tree_util.tree_leaves(fn(key, x))]
                data = np.asarray(jax.random.key_data(key))
            got = sess.run(None, dict(zip(names, [data, x])))
            assert len(got) == len(want)
            for g, w in zip(got, want):
                assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
                if tol and np.issubdtype(w.dtype, np.floating):
                    np.testing.assert_allclose(g, w, rtol=tol, atol=tol)
                else:
                    np.testing.assert_array_equal(g, w)
    return model


def dropout(k, x):
    keep = jax.random.bernoulli(k, 0.9, x.shape)
    return keep, jnp.where(keep, x / 0.9, 0).astype(x.dtype)


def test_distributions_f32_raw_key_opset18():
    """uniform / normal / bernoulli / categorical / randint / permutation / bits on a
    raw key; counters depend on the symbolic batch (B*10 of them). At opset 18."""
    def fn(k, x):
        a, b = jax.random.split(k)
        return (jax.random.uniform(k, x.shape, minval=-1.0, maxval=2.0),
                jax.random.normal(a, x.shape),
                *dropout(b, x),
                jax.random.categorical(k, x, axis=-1),
                jax.random.randint(a, x.shape, -5, 100),
                jax.random.permutation(b, 9),
                jax.random.permutation(k, x[0]),  # JAX needs a static size
                jax.random.bits(k, x.shape, jnp.uint8), jax.random.bits(a, (3,), jnp.uint16),
                jax.random.bits(k, ()), jax.random.uniform(k, (0, 3)),
                jax.random.split(b, 4), jax.random.fold_in(k, 2**31 + 9))
    model = check_raw_key(fn, ("B", 10), atol=1e-6, rtol=1e-6, opset=18)  # erf_inv is approximated
    ops = set(op_types(model))
    assert {"BitShift", "BitwiseXor", "Add", "Range"} <= ops and "Loop" not in ops


CLOSED_KEY = jax.random.key(5)


@pytest.mark.parametrize("x64", [False, True], ids=["f32", "f64"])
def test_draws_over_a_dim_that_is_zero_at_run_time(x64):
    """Noise over frames of a VALID window (T - 2 of them, none at T = 2) and over
    jnp.diff (B - 1 rows, none at B = 1): the draws' Reshape takes a runtime 0 as 0."""
    def fn(x):
        frames = jax.lax.reduce_window(x, 0.0, jax.lax.add, (1, 3), (1, 1), "VALID")
        steps = jnp.diff(x, axis=0)
        return (frames + jax.random.normal(CLOSED_KEY, frames.shape, x.dtype),
                steps * jax.random.uniform(CLOSED_KEY, steps.shape, x.dtype))
    check(fn, [("B", "T")], x64=x64, atol=1e-6, rtol=1e-6,
          batches=[{"B": 1, "T": 2}, {"B": 1, "T": 5}, {"B": 3, "T": 2}, {"B": 4, "T": 6}])


def test_distributions_f64():
    """f64 uniform (64-bit words) and normal, 64-bit bits, int64 randint (uint64 rem and
    select_n), and a closed-over typed key."""
    def fn(k, x):
        return (jax.random.uniform(k, x.shape, jnp.float64), jax.random.normal(k, x.shape, jnp.float64),
                jax.random.bits(k, (2, 3), jnp.uint64), jax.random.randint(k, x.shape, -5, 100),
                x + jax.random.normal(CLOSED_KEY, x.shape, jnp.float64))
    with jax.enable_x64(True):
        check_typed_key(fn, ("B", 3), x64=True, tol=1e-12)


def test_dropout_mask_typed_key():
    """End to end: a dropout mask from a key passed in as a model input, bit for bit."""
    # The mask is compared exactly; x / 0.9 within 1 ulp (XLA may multiply by 1/0.9).
    model = check_typed_key(dropout, ("B", 16), seeds=(0, 123456789), batches=(1, 7), tol=1e-6)
    assert "Loop" not in op_types(model)  # threefry is unrolled


def test_split_fold_in_chain_typed_key():
    def chain(k, x):
        a, b = jax.random.split(k)  # slices and squeezes typed keys
        c = jax.random.fold_in(b, 7)
        d = jax.random.split(c, (2, 3))
        e = jax.vmap(jax.vmap(jax.random.fold_in), (0, None))(d, jnp.arange(3, dtype=jnp.int32) - 1)
        f = jax.random.fold_in(a, (x[0, 0] * 1000).astype(jnp.int32))  # data known at run time only
        g = jax.lax.cond(x[0, 1] > 0, lambda k: jax.random.split(k)[1], lambda k: k, c)

        def step(carry, row):  # keys carried through a scan (an ONNX Loop)
            k, acc = carry
            k, sub = jax.random.split(k)
            return (k, acc + jax.random.uniform(sub, row.shape)), jax.random.key_data(sub)
        (h, acc), subs = jax.lax.scan(step, (f, jnp.zeros_like(x[0])), x)
        return (jax.random.key_data(d), jax.random.key_data(e), jax.random.key_data(f),
                jax.random.uniform(a, x.shape), jax.random.bits(e[1, 2], (4,)),
                jax.random.key_data(jnp.where(x[0, 0] > 0, a, b)),  # select_n on keys
                jax.random.key_data(g), jax.random.key_data(h), acc, subs)
    check_typed_key(chain, ("B", 5), seeds=(0, 2**31 + 5), tol=1e-6)


def test_batched_keys():
    # vmap over keys: random_bits / random_split on key data of shape (B, 2).
    def fn(ks, x):
        wrap = jax.random.wrap_key_data
        return (jax.vmap(lambda k: jax.random.bits(wrap(k), (3, 4)))(ks),
                jax.random.key_data(jax.vmap(lambda k: jax.random.split(wrap(k), 3))(ks)))
    check(jax.jit(fn), [("B", 2), (1,)], [np.uint32, np.float32], make_inputs=keys_and_normals,
          batches=ONE_BATCH)


@pytest.mark.parametrize("x64", [False, True], ids=["32bit", "64bit"])
def test_seed(x64):
    # Seeds of 64 bits fill both key words; narrower ones leave the high word 0.
    dts = [np.int64, np.uint64] if x64 else [np.int32, np.uint32]
    def fn(s, u):
        key = jax.vmap(jax.random.key)
        return (jax.random.key_data(key(s)), jax.random.key_data(key(u)), jax.random.PRNGKey(s[0]),
                jax.random.bits(jax.random.key(u[0]), (3,)))
    ctx = jax.enable_x64(True) if x64 else contextlib.nullcontext()
    with ctx:
        check(jax.jit(fn), [("B",), ("B",)], dts, x64=x64, make_inputs=keys_and_normals,
              batches=ONE_BATCH)


def test_threefry2x32_primitive():
    def fn(k, x):
        bits = jax.lax.bitcast_convert_type(x, jnp.uint32)
        k1, k2 = (jnp.broadcast_to(w, bits[0].shape) for w in k)  # the primitive wants equal ranks
        return threefry2x32_p.bind(k1, k2, bits[0], bits[1])
    check_raw_key(fn, (2, "B"))
    # Known-answer vector from the Random123 paper (as in JAX's own tests).
    k = np.array([0x13198A2E, 0x03707344], np.uint32)
    x = np.array([0x243F6A88, 0x85A308D3], np.uint32).view(np.float32).reshape(2, 1)
    m = jaxonnx.to_onnx(fn, [k, x])
    got = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {m.graph.input[0].name: k, m.graph.input[1].name: x})
    assert [int(g[0]) for g in got] == [0xC4923A9C, 0x483DF7A0]


def test_wrap_unwrap_are_identities():
    model = jaxonnx.to_onnx(lambda k: jax.random.key_data(k), [jax.random.key(0)])
    assert set(op_types(model)) <= {"Identity"}
    model = jaxonnx.to_onnx(lambda k: jax.random.key_data(jax.random.wrap_key_data(k)),
                            [jax.ShapeDtypeStruct((2,), jnp.uint32)])
    assert set(op_types(model)) <= {"Identity"}


def test_legacy_threefry_refused():
    with jax.threefry_partitionable(False):
        with pytest.raises(ValueError, match="jax_threefry_partitionable"):
            jaxonnx.to_onnx(lambda k, x: jax.random.uniform(k, x.shape), [jax.random.key(0), (3,)])


# ------------------------------------------------------ rbg and unsafe_rbg keys --
# Their random_* primitives become JAX's implementation on the uint32[4] key data:
# threefry2x32 (split and fold_in of rbg), rng_bit_generator (bits; split and fold_in
# of unsafe_rbg), iota_2x32_shape, all bit for bit with XLA.

RBG_IMPLS = ["rbg", "unsafe_rbg"]


def rbg_draws(impl, fdt):
    closed = jax.random.key(11, impl=impl)  # a key literal of the program

    def fn(k, x):
        a, b = jax.random.split(k)
        ks = jax.random.split(b, (2, 3))
        made = jax.random.key((x[0, 0] * 1000).astype(jnp.int32), impl=impl)  # a seed known at run time
        wide = jnp.uint64 if fdt == jnp.float64 else jnp.uint32
        return (jax.random.bits(k, x.shape, jnp.uint8), jax.random.bits(a, (3,), jnp.uint16),
                jax.random.bits(b, x.shape, wide), jax.random.bits(k, ()),
                jax.random.uniform(k, x.shape, fdt, minval=-1.0, maxval=2.0), jax.random.normal(a, x.shape, fdt),
                jax.random.randint(a, x.shape, -5, 100), jax.random.permutation(b, 9),
                jax.random.permutation(k, x[0]), jax.random.categorical(k, x, axis=-1),
                jax.random.key_data(jax.random.split(b, 4)), jax.random.key_data(jax.random.fold_in(k, 2**31 + 9)),
                jax.random.key_data(jax.vmap(jax.vmap(jax.random.fold_in), (0, None))(ks, jnp.arange(3) - 1)),
                jax.vmap(lambda kk: jax.random.bits(kk, (2,)))(ks[0]),  # batched keys
                x + jax.random.normal(closed, x.shape, fdt),
                jax.random.key_data(made), jax.random.uniform(made, x.shape, fdt))
    return fn


@pytest.mark.parametrize("impl", RBG_IMPLS)
@pytest.mark.parametrize("x64", [False, True], ids=["f32", "f64"])
def test_rbg_typed_key_distributions(impl, x64):
    """bits / uniform / normal / randint / permutation / categorical / split / fold_in on a
    typed rbg key input, keys made from a seed and closed-over keys, symbolic and static batch.
    Integers and keys are bit for bit; floats exact but for erf_inv's rounding (normal)."""
    fn = rbg_draws(impl, jnp.float64 if x64 else jnp.float32)
    tol = 1e-12 if x64 else 1e-6
    with jax.enable_x64(x64):
        check_typed_key(fn, ("B", 5), x64=x64, seeds=(0, 2**31 + 5), batches=(1, 6), tol=tol, impl=impl)
        check_typed_key(fn, (3, 4), x64=x64, seeds=(7,), tol=tol, impl=impl)


@pytest.mark.parametrize("impl", RBG_IMPLS)
def test_rbg_key_data_inputs(impl):
    """Batched rbg key data (uint32[B, 4]) wrapped in the program, through helpers.check;
    gamma (JAX maps _gamma_one over non-threefry keys with a scan) to rounding."""
    def fn(kd, x):
        ks = jax.random.wrap_key_data(kd, impl=impl)
        return (jax.vmap(lambda k: jax.random.uniform(k, (3,)))(ks),
                jax.random.key_data(jax.vmap(lambda k: jax.random.split(k, 3))(ks)),
                jax.random.key_data(jax.vmap(jax.random.fold_in)(ks, jnp.arange(kd.shape[0]))),
                jax.random.gamma(ks[0], jnp.abs(x) + 0.1))
    check(jax.jit(fn), [("B", 4), (2, 3)], [np.uint32, np.float32], make_inputs=keys_and_normals,
          batches=(1, 5), rtol=2e-5, atol=2e-5)


def test_rbg_default_impl_raw_keys():
    """jax_default_prng_impl='rbg': jax.random.PRNGKey gives raw uint32[4] keys; also a
    split under the legacy threefry split (rbg splits through threefry2x32 either way)."""
    def fn(k, x):
        a, b = jax.random.split(k)
        return (jax.random.uniform(a, x.shape), jax.random.normal(b, x.shape), jax.random.split(k, 3),
                jax.random.fold_in(k, 3), jax.random.PRNGKey(7), jax.random.randint(k, x.shape, 0, 10))
    with jax.default_prng_impl("rbg"):
        check(jax.jit(fn), [(4,), ("B", 3)], [np.uint32, np.float32], make_inputs=keys_and_normals,
              batches=ONE_BATCH, rtol=1e-6, atol=1e-6)
        with jax.threefry_partitionable(False):
            check(jax.jit(lambda k: jax.random.split(k, (2, 3))), [(4,)], [np.uint32],
                  make_inputs=keys_and_normals)


def test_unsupported_key_impl_is_refused():
    with pytest.raises(jaxonnx.ConversionError, match="'random_bits' on PRNG keys of the 'philox4x32' "
                       r"implementation at .*test_lax_random.py:\d+.*only rbg, threefry2x32, unsafe_rbg"):
        jaxonnx.to_onnx(lambda k, x: jax.random.uniform(k, x.shape), [jax.random.key(0, impl="philox4x32"), (3,)])


# ------------------------------------------------------------ random_gamma --

def test_loggamma_f64_opset18():
    # log_space=True (also what beta and dirichlet use for small alphas).
    fn = lambda k, x: jax.random.loggamma(k, jnp.abs(x) * 3 + 0.05)
    with jax.enable_x64(True):
        check_typed_key(fn, ("B", 4), x64=True, seeds=(3,), tol=1e-12, opset=18)


def test_gamma_with_batched_keys():
    # vmap over keys: the key has batch dims, each key splits over its row of alphas (alphas
    # from 0.05, boosted: alpha < 1, up). The bits are exact; erf_inv / log / pow round like
    # XLA's to an ulp or so. (XLA compiles each gamma for seconds: the programs stay small;
    # a gamma from a closed-over key is in the coverage gate.)
    def fn(ks, x):
        draw = lambda k, a: jax.random.gamma(jax.random.wrap_key_data(k), a)
        return jax.vmap(draw)(ks, jnp.abs(x) * 3 + 0.05)
    check(jax.jit(fn), [("B", 2), ("B", 3)], [np.uint32, np.float32], make_inputs=keys_and_normals,
          batches=ONE_BATCH, rtol=2e-5, atol=2e-5)


def test_gamma_legacy_threefry_refused():
    with jax.threefry_partitionable(False):
        with pytest.raises(ValueError, match="jax_threefry_partitionable"):
            jaxonnx.to_onnx(lambda k, a: jax.random.gamma(k, a), [jax.random.key(0), (3,)])


# ------------------------------------------------------- rng_bit_generator --

RBG_KEYS = ([1, 2, 3, 4], [0xFFFFFFFF, 7, 0xFFFFFFFE, 0xFFFFFFFF],  # the counter's low word wraps
            [5, 6, 0xFFFFFFFF, 0xFFFFFFFF])


@pytest.mark.parametrize("alg,x64", [("RNG_DEFAULT", False), ("RNG_PHILOX", True), ("RNG_THREE_FRY", False),
                                     ("RNG_THREE_FRY", True)],
                         ids=["default-32bit", "philox-64bit", "threefry-32bit", "threefry-64bit"])
def test_rng_bit_generator(alg, x64):
    # XLA's CPU expansion, bit for bit: state and bits, odd and even shapes, narrow types.
    algorithm = getattr(jax.lax.RandomAlgorithm, alg)
    dts = [jnp.uint64, jnp.uint32] if x64 else [jnp.uint32, jnp.uint8, jnp.uint16]

    def fn(k):
        outs = []
        for shape, dt in zip([(3, 5), (), (2, 4, 7)], dts * 2):
            k, bits = jax.lax.rng_bit_generator(k, shape, dtype=dt, algorithm=algorithm)
            outs.append(bits)
        return k, outs

    ctx = jax.enable_x64(True) if x64 else contextlib.nullcontext()
    with ctx:
        model = jaxonnx.to_onnx(fn, [jax.ShapeDtypeStruct((4,), jnp.uint32)], enable_double_precision=x64, opset=18)
        onnx.checker.check_model(model, full_check=True)
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        for key in RBG_KEYS:
            key = np.array(key, np.uint32)
            want = [np.asarray(w) for w in jax.tree_util.tree_leaves(jax.jit(fn)(key))]
            got = sess.run(None, {sess.get_inputs()[0].name: key})
            for g, w in zip(got, want):
                assert g.dtype == w.dtype and g.shape == w.shape
                np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("x64", [False, True], ids=["32bit", "64bit"])
def test_rng_bit_generator_symbolic_shape(x64):
    # Philox over a block count known at run time: element counts that are and are not
    # multiples of 4, 64-bit words, and the state advanced by the blocks used.
    dts = [np.uint64, np.uint32] if x64 else [np.uint32, np.uint8]

    def fn(k, x):
        k, a = jax.lax.rng_bit_generator(k, x.shape, dtype=dts[0])
        k, b = jax.lax.rng_bit_generator(k, (x.shape[0], 2), dtype=dts[1],
                                         algorithm=jax.lax.RandomAlgorithm.RNG_PHILOX)
        return k, a, b
    check(fn, [(4,), ("B", 3)], [np.uint32, np.float32], x64=x64, make_inputs=keys_and_normals,
          batches=(1, 2, 4, 7))


def test_rng_bit_generator_symbolic_three_fry_is_refused():
    specs = symbolic_specs([(4,), ("B", 3)], [np.uint32, np.float32])
    with pytest.raises(jaxonnx.ConversionError, match="rng_bit_generator.*RNG_THREE_FRY.*must be static"):
        jaxonnx.to_onnx(lambda k, x: jax.lax.rng_bit_generator(
            k, x.shape, algorithm=jax.lax.RandomAlgorithm.RNG_THREE_FRY)[1], specs)


# ------------------------------------------------------------- rng_uniform --

def test_rng_uniform_opset21():
    # XLA's stateful RNG differs between calls in JAX itself: no parity to check, only its
    # contract (shape, dtype, [a, b), fresh draws per equation and per run, stable model bytes).
    def fn(x):
        lo = x[0, 0]
        return (lax_rng_uniform(lo, lo + 2, (2000,)), lax_rng_uniform(lo, lo + 2, (2000,)),
                lax_rng_uniform(jnp.int32(-3), jnp.int32(4), x.shape))
    with jax.enable_x64(True):
        specs = symbolic_specs([("B", 3)], [np.float64])
        model = jaxonnx.to_onnx(fn, specs, enable_double_precision=True, opset=21)
        assert model.SerializeToString() == jaxonnx.to_onnx(
            fn, specs, enable_double_precision=True, opset=21).SerializeToString()
    onnx.checker.check_model(model, full_check=True)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    x = np.full((5, 3), 1.5)
    a, b, c = sess.run(None, {sess.get_inputs()[0].name: x})
    a2 = sess.run(None, {sess.get_inputs()[0].name: x})[0]
    assert a.dtype == np.float64 and a.shape == (2000,) and c.dtype == np.int32 and c.shape == (5, 3)
    assert 1.5 <= a.min() and a.max() < 3.5 and abs(a.mean() - 2.5) < 0.05
    assert -3 <= c.min() and c.max() <= 3
    assert not np.array_equal(a, b) and not np.array_equal(a, a2)


def lax_rng_uniform(a, b, shape):
    return jax.lax.rng_uniform(a, b, shape)


def test_rng_uniform_is_refused_from_opset_22():
    with pytest.raises(jaxonnx.ConversionError, match="rng_uniform.*opset 21"):
        jaxonnx.to_onnx(lambda x: lax_rng_uniform(x, x + 1, (3,)), [jax.ShapeDtypeStruct((), np.float32)])


@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16], ids=["f16", "bf16"])
def test_uniform_half_floats_bit_exact(dtype):
    """uniform in float16/bfloat16: random uint16 bits bitcast to the 16-bit float
    (lax_bitwise), compared exactly (as float32: onnxruntime's Python API has no bfloat16)."""
    def fn(k, x):
        return jax.random.uniform(k, (x.shape[0], 64), dtype).astype(jnp.float32)

    check_typed_key(fn, ("B", 6), batches=(1, 7))


@pytest.mark.parametrize("group,name", [("random_uniform", "shape_float16_5_4_"), ("random_uniform", "shape_float16_"),
                                        ("random_categorical", "shape_float16_5_4_axis_1"),
                                        ("random_categorical", "shape_float16_8_axis_0")])
def test_half_float_draws_catalog(group, name):
    # float16 only (onnxruntime's Python API has no bfloat16 arrays; bfloat16 draws are
    # compared above through float32).
    check_harness(group, name)
