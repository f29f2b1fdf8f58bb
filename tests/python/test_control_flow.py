"""control_flow plugin: cond / switch (If), while_loop / fori_loop / scan (Loop).

Each form in f32 and f64, with a static and a symbolic batch, numeric parity
with JAX through onnxruntime (helpers.check), plus structural checks: the
If/Loop is there, a Loop carries no state it does not use, and loop-invariant
values are captured from the outer scope rather than carried.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import jaxonnx
from jaxonnx import _plugins
from helpers import check, random_input

FLOATS = [(np.float32, False), (np.float64, True)]
FLOAT_IDS = ["f32", "f64"]
BATCHES = [(2, 3), ("B", 3)]
BATCH_IDS = ["static", "symbolic"]


@functools.lru_cache(maxsize=None)
def _registry():
    return _plugins.registry()


def requires(*primitives):
    """Skips when a primitive the test needs (not a control-flow one) has no plugin yet."""
    missing = [p for p in primitives if not _registry().has(p)]
    if missing:
        pytest.skip(f"no plugin lowers {', '.join(missing)} on this branch yet")


def nodes(graph):
    """Every node of `graph` and of its subgraphs, depth first."""
    for n in graph.node:
        yield n
        for a in n.attribute:
            if a.type == a.GRAPH:
                yield from nodes(a.g)


def all_ops(model):
    return [n.op_type for n in nodes(model.graph)]


def loops(model):
    return [n for n in nodes(model.graph) if n.op_type == "Loop"]


def body(loop):
    return next(a.g for a in loop.attribute if a.name == "body")


def positive(shape, dtype, rng):
    return np.abs(random_input(shape, dtype, rng)) + 0.5


def negative(shape, dtype, rng):
    return -positive(shape, dtype, rng)


# ------------------------------------------------------------------ cond --

def two_branches(x):
    return lax.cond(jnp.sum(x) > 0, lambda v: jnp.tanh(v) * 2.0, lambda v: v - 1.0, x)


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=FLOAT_IDS)
@pytest.mark.parametrize("shape", BATCHES, ids=BATCH_IDS)
@pytest.mark.parametrize("data", [positive, negative], ids=["then", "else"])
def test_cond(dtype, x64, shape, data):
    model = check(two_branches, [shape], [dtype], x64=x64, make_inputs=data)
    assert [n.op_type for n in model.graph.node].count("If") == 1


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=FLOAT_IDS)
@pytest.mark.parametrize("shape", BATCHES, ids=BATCH_IDS)
def test_cond_captures_outer_values_and_consts(dtype, x64, shape):
    w = np.linspace(-1, 1, 3).astype(dtype)

    def f(x, y):
        return lax.cond(jnp.sum(y) > 0, lambda: x * w + y, lambda: x - 2.0 * y)

    for data in (positive, negative):
        model = check(f, [shape, shape], [dtype, dtype], x64=x64, make_inputs=data)
    (if_node,) = [n for n in model.graph.node if n.op_type == "If"]
    for a in if_node.attribute:
        assert len(a.g.input) == 0  # operands are captured, not passed
    names = {i.name for i in model.graph.input}
    used = {i for n in nodes(if_node.attribute[0].g) for i in n.input}
    assert names <= used | {i for n in nodes(if_node.attribute[1].g) for i in n.input}


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=FLOAT_IDS)
def test_cond_unused_outputs_are_dropped(dtype, x64):
    def f(x):
        a, _ = lax.cond(jnp.sum(x) > 0, lambda v: (v * 2.0, jnp.exp(v)), lambda v: (v - 1.0, v), x)
        return a

    for data in (positive, negative):
        model = check(f, [("B", 3)], [dtype], x64=x64, make_inputs=data)
    (if_node,) = [n for n in model.graph.node if n.op_type == "If"]
    assert len(if_node.output) == 1
    assert "Exp" not in all_ops(model)


def index_inputs(value):
    def make(shape, dtype, rng):
        if np.dtype(dtype) == np.int32:
            return np.asarray(value, np.int32)
        return random_input(shape, dtype, rng)
    return make


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=FLOAT_IDS)
@pytest.mark.parametrize("shape", BATCHES, ids=BATCH_IDS)
def test_switch_clamps_the_index(dtype, x64, shape):
    requires("clamp")
    branches = [lambda v: v + 1.0, lambda v: v * 2.0, lambda v: -v, lambda v: jnp.exp(v)]

    def f(i, x):
        return lax.switch(i, branches, x)

    for index in (-3, 0, 1, 2, 3, 4, 9):
        model = check(f, [(), shape], [np.int32, dtype], x64=x64, make_inputs=index_inputs(index))
    assert "If" in all_ops(model)


def cond_p_direct(n_branches):
    """cond_p bound directly: no clamp in front, so out-of-range indices reach the If."""
    from jax._src.lax.control_flow import conditionals

    fns = [lambda v, k=k: v * float(k + 1) + float(k) for k in range(n_branches)]

    def f(i, x):
        branches = tuple(jax.make_jaxpr(fn)(x) for fn in fns)
        return conditionals.cond_p.bind(i, x, branches=branches)[0]
    return f


@pytest.mark.parametrize("n", [2, 3, 5])
@pytest.mark.parametrize("dtype,x64", FLOATS, ids=FLOAT_IDS)
@pytest.mark.parametrize("shape", BATCHES, ids=BATCH_IDS)
def test_n_way_cond_out_of_range_index_runs_the_last_branch(n, dtype, x64, shape):
    f = cond_p_direct(n)
    for index in (-7, -1, 0, 1, n - 1, n, n + 5):
        check(f, [(), shape], [np.int32, dtype], x64=x64, make_inputs=index_inputs(index))


def test_n_way_cond_is_a_balanced_tree():
    model = check(cond_p_direct(8), [(), ("B", 3)], [np.int32, np.float32],
                  make_inputs=index_inputs(5))

    def depth(graph):
        return max([1 + max((depth(a.g) for a in n.attribute if a.type == a.GRAPH), default=0)
                    for n in graph.node if n.op_type == "If"] or [0])
    assert depth(model.graph) == 3  # log2(8) levels of If, not 7


# ----------------------------------------------------------------- while --

def grow_until(x):
    """Data-dependent termination: doubles |x| + 1 until every row sum passes 100."""
    def cond(c):
        i, v = c
        return jnp.min(jnp.sum(v, axis=1)) < 100.0

    def body(c):
        i, v = c
        return i + 1, jnp.abs(v) * 2.0 + 1.0

    return lax.while_loop(cond, body, (0, x))


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=FLOAT_IDS)
@pytest.mark.parametrize("shape", BATCHES, ids=BATCH_IDS)
def test_while_data_dependent_termination(dtype, x64, shape):
    model = check(grow_until, [shape], [dtype], x64=x64)
    (loop,) = loops(model)
    assert loop.input[0] == ""  # no trip count: the condition decides at run time


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=FLOAT_IDS)
@pytest.mark.parametrize("shape", BATCHES, ids=BATCH_IDS)
def test_while_with_consts_and_invariant_carry(dtype, x64, shape):
    def f(x, limit):
        scale = jnp.sum(limit)  # a body const

        def cond(c):
            i, v, lim = c
            return jnp.max(v) < jnp.max(lim)

        def body(c):
            i, v, lim = c
            return i + 1, jnp.abs(v) * 1.5 + scale * 0.0 + 0.25, lim  # lim passes through

        return lax.while_loop(cond, body, (0, x, limit + 50.0))

    model = check(f, [shape, shape], [dtype, dtype], x64=x64)
    (loop,) = loops(model)
    # carried: i and v only; lim is captured (it passes through unchanged).
    assert len(loop.input) == 2 + 2
    assert len(body(loop).input) == 2 + 2


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=FLOAT_IDS)
def test_while_drops_unused_carried_state(dtype, x64):
    def f(x):
        def cond(c):
            i, v, junk = c
            return i < 4

        def body(c):
            i, v, junk = c
            return i + 1, v * 2.0, junk * v  # junk is never read after the loop

        _, v, _ = lax.while_loop(cond, body, (0, x, x))
        return v

    model = check(f, [("B", 3)], [dtype], x64=x64)
    (loop,) = loops(model)
    assert len(loop.input) == 2 + 2  # i and v; not junk
    assert len(loop.output) == 2


# ----------------------------------------------------------------- fori --

@pytest.mark.parametrize("dtype,x64", FLOATS, ids=FLOAT_IDS)
@pytest.mark.parametrize("shape", BATCHES, ids=BATCH_IDS)
def test_fori_loop_static_bounds(dtype, x64, shape):
    def f(x):
        return lax.fori_loop(2, 7, lambda i, c: c * 0.9 + i, x)

    model = check(f, [shape], [dtype], x64=x64)
    (loop,) = loops(model)
    assert loop.input[0] != ""  # a trip count


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=FLOAT_IDS)
@pytest.mark.parametrize("shape", BATCHES, ids=BATCH_IDS)
def test_fori_loop_dynamic_bounds(dtype, x64, shape):
    def f(n, x):
        return lax.fori_loop(1, n, lambda i, c: c * 0.5 + i, x)

    for n in (0, 1, 5):
        model = check(f, [(), shape], [np.int32, dtype], x64=x64, make_inputs=index_inputs(n))
    (loop,) = loops(model)
    # the upper bound passes through the body unchanged: captured, not carried
    assert len(body(loop).input) == 2 + 2  # iter, cond, i, c


# ------------------------------------------------------------------ scan --

def rnn_like(reverse):
    def f(h0, xs):
        def step(h, x):
            h = jnp.tanh(h * 0.5 + x)
            return h, h * 2.0
        return lax.scan(step, h0, xs, reverse=reverse)
    return f


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=FLOAT_IDS)
@pytest.mark.parametrize("batch", [2, "B"], ids=BATCH_IDS)
@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
def test_scan_carry_xs_ys(dtype, x64, batch, reverse):
    model = check(rnn_like(reverse), [(batch, 3), (5, batch, 3)], [dtype, dtype], x64=x64)
    (loop,) = loops(model)
    assert ("Slice" in [n.op_type for n in model.graph.node]) == reverse


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=FLOAT_IDS)
@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
def test_scan_over_a_symbolic_length(dtype, x64, reverse):
    def f(xs):
        return lax.scan(lambda c, x: (c + x, c * x), jnp.zeros((3,), xs.dtype), xs, reverse=reverse)

    check(f, [("B", 3)], [dtype], x64=x64)


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=FLOAT_IDS)
@pytest.mark.parametrize("shape", BATCHES, ids=BATCH_IDS)
@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
def test_scan_length_only(dtype, x64, shape, reverse):
    def f(x):
        def step(c, _):
            return c * 1.1 + 1.0, c
        return lax.scan(step, x, None, length=4, reverse=reverse)

    check(f, [shape], [dtype], x64=x64)


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=FLOAT_IDS)
@pytest.mark.parametrize("batch", [2, "B"], ids=BATCH_IDS)
@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
def test_scan_several_xs_and_ys(dtype, x64, batch, reverse):
    def f(a, b, xs1, xs2):
        def step(c, x):
            c1, c2 = c
            x1, x2 = x
            n1 = c1 * x1 + x2
            n2 = c2 - jnp.sum(x2, axis=-1)
            return (n1, n2), (n1, n2 * 2.0, x1 + x2)
        return lax.scan(step, (a, b), (xs1, xs2), reverse=reverse)

    check(f, [(batch, 3), (batch,), (4, batch, 3), (4, batch, 3)], [dtype] * 4, x64=x64)


def scan_unrolled(unroll):
    def f(h0, xs):
        return lax.scan(lambda h, x: (jnp.tanh(h + x), h * x), h0, xs, unroll=unroll)
    return f


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=FLOAT_IDS)
def test_scan_unroll_does_not_change_the_model(dtype, x64):
    models = [check(scan_unrolled(u), [("B", 3), (6, "B", 3)], [dtype, dtype], x64=x64)
              for u in (1, 2, True)]
    bytes_ = {m.SerializeToString() for m in models}
    assert len(bytes_) == 1


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=FLOAT_IDS)
def test_scan_quality_no_unused_state_invariants_captured(dtype, x64):
    def f(h0, w, xs):
        def step(c, x):
            h, k, junk, count = c
            h = jnp.tanh(h * w + x * k)          # w is a const, k is an invariant carry
            return (h, k, junk + h, count + 1), h  # junk and count are never read
        (h, _, _, _), ys = lax.scan(step, (h0, 0.5, h0, 0), xs)
        return h, ys

    model = check(f, [("B", 3), (3,), (5, "B", 3)], [dtype] * 3, x64=x64)
    (loop,) = loops(model)
    assert len(loop.input) == 2 + 1   # M, cond, h only
    assert len(body(loop).input) == 2 + 1
    assert len(loop.output) == 1 + 1  # h, ys


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=FLOAT_IDS)
def test_scan_unused_ys_are_not_stacked(dtype, x64):
    def f(h0, xs):
        h, (ys1, _) = lax.scan(lambda h, x: (h + x, (h * 2.0, h * 3.0)), h0, xs)
        return h, ys1

    model = check(f, [("B", 3), (5, "B", 3)], [dtype] * 2, x64=x64)
    (loop,) = loops(model)
    assert len(loop.output) == 1 + 1


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=FLOAT_IDS)
def test_scan_swapped_carries(dtype, x64):
    """A body output that is another carry's input is copied, not aliased."""
    def f(a, b, xs):
        return lax.scan(lambda c, x: ((c[1], c[0] + x), c[0]), (a, b), xs)

    check(f, [("B", 3), ("B", 3), (5, "B", 3)], [dtype] * 3, x64=x64)


@pytest.mark.parametrize("form", ["reverse_scan", "batched_while", "switch"])
def test_opset_18(form):
    if form == "reverse_scan":
        check(rnn_like(True), [("B", 3), (5, "B", 3)], opset=18)
    elif form == "batched_while":
        f = jax.vmap(lambda v: lax.while_loop(lambda c: jnp.sum(c) < 50.0,
                                              lambda c: jnp.abs(c) * 2.0 + 0.5, v))
        check(f, [("B", 3)], opset=18)
    else:
        check(cond_p_direct(3), [(), ("B", 3)], [np.int32, np.float32],
              make_inputs=index_inputs(7), opset=18)


# --------------------------------------------------------------- nesting --

@pytest.mark.parametrize("dtype,x64", FLOATS, ids=FLOAT_IDS)
@pytest.mark.parametrize("shape", BATCHES, ids=BATCH_IDS)
def test_doubly_nested_loop(dtype, x64, shape):
    def f(x):
        def outer(i, c):
            return lax.fori_loop(0, 3, lambda j, d: d * 0.5 + (i * j), c)
        return lax.fori_loop(0, 4, outer, x)

    model = check(f, [shape], [dtype], x64=x64)
    assert len(loops(model)) == 2


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=FLOAT_IDS)
@pytest.mark.parametrize("shape", BATCHES, ids=BATCH_IDS)
def test_scan_in_cond_in_while(dtype, x64, shape):
    def f(x, xs):
        def body(c):
            i, v = c

            def with_scan(v):
                h, _ = lax.scan(lambda h, x: (jnp.tanh(h + x), h), v, xs)
                return h + 1.0
            v = lax.cond(i < 3, with_scan, lambda v: v * 1.5, v)
            return i + 1, v

        return lax.while_loop(lambda c: c[0] < 5, body, (0, x))

    batch = shape[0]
    model = check(f, [shape, (4, batch, 3)], [dtype, dtype], x64=x64)
    ops = all_ops(model)
    assert ops.count("Loop") == 2 and ops.count("If") == 1


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=FLOAT_IDS)
@pytest.mark.parametrize("shape", BATCHES, ids=BATCH_IDS)
def test_cond_and_while_in_scan(dtype, x64, shape):
    def f(h0, xs):
        def step(h, x):
            h = lax.cond(jnp.sum(x) > 0, lambda: h + x, lambda: h - x)
            h = lax.while_loop(lambda v: jnp.max(jnp.abs(v)) > 1.0, lambda v: v * 0.5, h)
            return h, h
        return lax.scan(step, h0, xs, reverse=True)

    batch = shape[0]
    check(f, [shape, (5, batch, 3)], [dtype, dtype], x64=x64)


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=FLOAT_IDS)
def test_scan_in_scan_symbolic_dims(dtype, x64):
    def f(xs):
        def outer(c, row):
            inner, ys = lax.scan(lambda d, x: (d + x, d * x), c, row)
            return inner, ys
        return lax.scan(outer, jnp.zeros((3,), xs.dtype), xs)

    check(f, [(4, "B", 3)], [dtype], x64=x64)


# ------------------------------------------------------------------ vmap --

@pytest.mark.parametrize("dtype,x64", FLOATS, ids=FLOAT_IDS)
@pytest.mark.parametrize("shape", BATCHES, ids=BATCH_IDS)
def test_vmap_cond(dtype, x64, shape):
    f = jax.vmap(lambda v: lax.cond(jnp.sum(v) > 0, lambda u: u * 2.0, lambda u: u - 1.0, v))
    check(f, [shape], [dtype], x64=x64)


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=FLOAT_IDS)
@pytest.mark.parametrize("shape", BATCHES, ids=BATCH_IDS)
@pytest.mark.parametrize("data", [positive, negative], ids=["then", "else"])
def test_vmap_cond_unbatched_predicate_stays_an_if(dtype, x64, shape, data):
    def f(x, y):
        return jax.vmap(lambda v: lax.cond(jnp.sum(y) > 0, lambda u: u * 2.0, lambda u: u - y,
                                           v))(x)

    model = check(f, [shape, (3,)], [dtype, dtype], x64=x64, make_inputs=data)
    assert "If" in all_ops(model)


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=FLOAT_IDS)
@pytest.mark.parametrize("shape", BATCHES, ids=BATCH_IDS)
def test_vmap_while_batched_predicate(dtype, x64, shape):
    f = jax.vmap(lambda v: lax.while_loop(lambda c: jnp.sum(c[1]) < 50.0,
                                          lambda c: (c[0] + 1, jnp.abs(c[1]) * 2.0 + 0.5),
                                          (0, v)))
    model = check(f, [shape], [dtype], x64=x64)
    assert "Loop" in all_ops(model)


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=FLOAT_IDS)
@pytest.mark.parametrize("shape", BATCHES, ids=BATCH_IDS)
def test_vmap_scan_and_fori(dtype, x64, shape):
    def one(v):
        h, ys = lax.scan(lambda c, x: (c * 0.5 + x, c), 0.0, v)
        return h + lax.fori_loop(0, 3, lambda i, c: c * 2.0, jnp.sum(ys))
    check(jax.vmap(one), [shape], [dtype], x64=x64)


# --------------------------------------------------------- end to end: nnx --

def nnx_rnn(cell_type, dtype):
    from flax import nnx

    cell = cell_type(3, 4, rngs=nnx.Rngs(0), param_dtype=dtype, dtype=dtype)
    graphdef, state = nnx.split(nnx.RNN(cell, rngs=False))
    lstm = cell_type is nnx.LSTMCell

    def f(x):
        rnn = nnx.merge(graphdef, state, copy=True)
        z = jnp.zeros((x.shape[0], 4), x.dtype)
        return rnn(x, initial_carry=(z, z) if lstm else z)
    return f


@pytest.mark.parametrize("dtype,x64", FLOATS, ids=FLOAT_IDS)
@pytest.mark.parametrize("batch", [2, "B"], ids=BATCH_IDS)
@pytest.mark.parametrize("cell", ["LSTMCell", "GRUCell"])
def test_nnx_rnn(cell, dtype, x64, batch):
    from flax import nnx

    with jax.enable_x64(x64):
        fn = nnx_rnn(getattr(nnx, cell), dtype)
        prims = set()

        def walk(j):
            for e in j.eqns:
                prims.add(e.primitive.name)
                for v in e.params.values():
                    for b in v if isinstance(v, tuple) else (v,):
                        if hasattr(b, "eqns"):
                            walk(b)
                        elif hasattr(b, "jaxpr"):
                            walk(b.jaxpr)
        walk(jax.make_jaxpr(fn)(jnp.ones((2, 5, 3), dtype)).jaxpr)
    requires(*sorted(prims))
    model = check(fn, [(batch, 5, 3)], [dtype], x64=x64, rtol=1e-4 if not x64 else None,
                  atol=1e-5 if not x64 else None)
    assert "Loop" in all_ops(model)


# ------------------------------------------------ symbolic dims in subgraphs --

@pytest.mark.parametrize("dtype,x64", FLOATS, ids=FLOAT_IDS)
def test_symbolic_dims_inside_subgraphs(dtype, x64):
    """Shapes computed from the symbolic batch before, inside and after the
    subgraphs: the memo of a closed branch must never leak out of it."""
    w = np.arange(3, dtype=dtype)

    def f(x, xs):
        def step(h, x_t):
            h = jnp.tanh(h + jnp.broadcast_to(w, h.shape) * x_t)
            r = lax.cond(jnp.sum(h) > 0, lambda: jnp.reshape(h, (-1,)),
                         lambda: jnp.reshape(h * 2.0, (h.shape[0] * 3,)))
            return h, r
        h, ys = lax.scan(step, x, xs)
        return jnp.broadcast_to(w, x.shape) + h, jnp.reshape(ys, (xs.shape[0], x.shape[0], 3))

    check(f, [("B", 3), (4, "B", 3)], [dtype, dtype], x64=x64)
