"""A random program generator for jaxonnx, and a crash-safe runner.

A program is drawn from a seed: 1-3 inputs (float32/float64/int32/int64/bool,
ranks 0-3, size-1 dims for implicit broadcasting, sometimes the symbolic
batch "B"), then 2-8 operations over bundled primitives, each applied to
values already made. Every result is checked the way the suite checks a
hand-written program: the ONNX checker, onnxruntime against JAX (floats
within rounding, integers exactly), the unoptimized model against the
optimized one.

Inputs hold edge values: integer inputs include 0, -1 and the type's minimum
(so integer division by zero and INT_MIN // -1 are exercised), float inputs
include 0, -0 and values near 1.

Run as a script it checks a range of seeds in this process and prints one
line per seed ("seed N ok" / "seed N FAIL <reason>"); run_seeds() drives it
in a child process and survives the child crashing (a segfault in
onnxruntime or in a plugin is a finding, not the end of the run).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import traceback

import numpy as np

FLOATS = ("float32", "float64")
INTS = ("int32", "int64")

# name -> (arity, kinds accepted, fn builder). Kinds: "f" float, "i" int, "b" bool.
def _ops():
    import jax.numpy as jnp
    from jax import lax

    def safe_log(x):
        return jnp.log(jnp.abs(x) + 1)

    def safe_div(x, y):
        return x / (jnp.abs(y) + 1)
    return {
        "sin": (1, "f", jnp.sin), "cos": (1, "f", jnp.cos), "tanh": (1, "f", jnp.tanh),
        "exp_small": (1, "f", lambda x: jnp.exp(jnp.tanh(x))), "log1": (1, "f", safe_log),
        "sqrt_abs": (1, "f", lambda x: jnp.sqrt(jnp.abs(x))), "floor": (1, "f", jnp.floor),
        "ceil": (1, "f", jnp.ceil), "round": (1, "f", jnp.round), "abs": (1, "fi", jnp.abs),
        "neg": (1, "fi", jnp.negative), "sign": (1, "fi", jnp.sign),
        "logistic": (1, "f", lax.logistic), "erf": (1, "f", lax.erf),
        "atan": (1, "f", jnp.arctan), "square": (1, "fi", jnp.square),
        "add": (2, "fi", jnp.add), "sub": (2, "fi", jnp.subtract), "mul": (2, "fi", jnp.multiply),
        "fdiv": (2, "f", safe_div), "max": (2, "fi", jnp.maximum), "min": (2, "fi", jnp.minimum),
        "atan2": (2, "f", jnp.arctan2), "nextafter": (2, "f", jnp.nextafter),
        "idiv": (2, "i", lax.div), "irem": (2, "i", lax.rem), "floordiv": (2, "i", jnp.floor_divide),
        "fmod": (2, "f", lambda x, y: lax.rem(x, jnp.abs(y) + 1)),
        "and": (2, "ib", jnp.bitwise_and), "or": (2, "ib", jnp.bitwise_or),
        "xor": (2, "ib", jnp.bitwise_xor), "not": (1, "ib", jnp.invert),
        "less": (2, "fi", jnp.less), "eq": (2, "fib", jnp.equal),
        "where": (3, "fi", None),
        "sum": (1, "fi", "reduce"), "max_r": (1, "fi", "reduce"), "cumsum": (1, "fi", "cumsum"),
        "transpose": (1, "fib", "transpose"), "reshape": (1, "fib", "reshape"),
        "astype": (1, "fib", "astype"), "concat": (2, "fib", "concat"), "dot": (2, "f", "dot"),
        "slice": (1, "fib", "slice"), "sort": (1, "fi", "sort"),
    }


def kind_of(dtype) -> str:
    dt = np.dtype(dtype)
    return "b" if dt == np.bool_ else "i" if np.issubdtype(dt, np.integer) else "f"


class Program:
    """A random program: `specs` (shapes with "B" allowed, dtypes) and `fn`."""

    def __init__(self, seed: int):
        self.seed = seed
        self.plan = None
        rng = np.random.default_rng(seed)
        self.rng = rng
        self.x64 = bool(rng.integers(0, 2))
        dtypes = (FLOATS + INTS + ("bool",)) if self.x64 else ("float32", "int32", "bool")
        rank = int(rng.integers(0, 4))
        base = [int(rng.choice([1, 2, 3, 4])) for _ in range(rank)]
        self.symbolic = rank > 0 and bool(rng.integers(0, 3) == 0)
        n_in = int(rng.integers(1, 4))
        self.shapes, self.dtypes = [], []
        main = str(rng.choice(dtypes[:2] if self.x64 else dtypes[:1]))
        for i in range(n_in):
            shape = list(base)
            for a in range(rank):  # implicit broadcasting: some dims are 1
                if i > 0 and rng.integers(0, 4) == 0:
                    shape[a] = 1
            if self.symbolic and shape and shape[0] != 1:
                shape[0] = "B"
            dt = main if i == 0 else str(rng.choice(dtypes))
            self.shapes.append(tuple(shape))
            self.dtypes.append(dt)
        self.steps = []
        ops = _ops()
        names = sorted(ops)
        for _ in range(int(rng.integers(2, 9))):
            self.steps.append((str(rng.choice(names)), int(rng.integers(0, 1 << 30))))
        self.ops = ops

    def describe(self) -> str:
        return json.dumps({"seed": self.seed, "x64": self.x64, "shapes": self.shapes,
                           "dtypes": self.dtypes, "steps": [s for s, _ in self.steps]})

    def fn(self, *args):
        import jax.numpy as jnp
        from jax import lax
        # Which values each step reads, and whether it applies, depend on
        # shapes: decided on the first call (the symbolic trace) and replayed
        # on concrete inputs, so both run the same program.
        record = self.plan is None
        if record:
            self.plan = []
        values = list(args)
        for k, (name, r) in enumerate(self.steps):
            pick_rng = np.random.default_rng(r)  # which values (recorded)
            rng = np.random.default_rng(r + 1)  # the op's own parameters (replayed)
            arity, kinds, impl = self.ops[name]
            if record:
                pick = [i for i, v in enumerate(values) if kind_of(v.dtype) in kinds]
                if not pick:
                    self.plan.append(None)
                    continue
                ia = pick[int(pick_rng.integers(0, len(pick)))]
                a = values[ia]
                same = [i for i in pick if values[i].dtype == a.dtype
                        and _broadcastable(values[i].shape, a.shape)]
                ib = same[int(pick_rng.integers(0, len(same)))]
                self.plan.append((ia, ib, len(values)))
            else:
                if self.plan[k] is None:
                    continue
                ia, ib, _ = self.plan[k]
            a, b = values[ia], values[ib]
            if impl is None:  # where(a > b, a, b)
                out = jnp.where(a > b, a, b)
            elif impl == "reduce":
                if a.ndim == 0:
                    continue
                axis = int(rng.integers(0, a.ndim))
                out = jnp.sum(a, axis=axis) if name == "sum" else jnp.max(a, axis=axis)
            elif impl == "cumsum":
                if a.ndim == 0:
                    continue
                out = jnp.cumsum(a, axis=int(rng.integers(0, a.ndim)))
            elif impl == "transpose":
                out = jnp.transpose(a, rng.permutation(a.ndim))
            elif impl == "reshape":
                out = a.reshape(a.shape[0], -1) if a.ndim >= 1 else a.reshape(1)
            elif impl == "astype":
                target = str(rng.choice(["float32", "int32", "bool"]))
                if kind_of(a.dtype) == "f" and target != "float32":
                    a = jnp.clip(a, -100, 100)  # float -> int is only defined in range
                out = a.astype(target)
            elif impl == "concat":
                if a.ndim == 0:
                    continue
                out = jnp.concatenate([a, a], axis=a.ndim - 1)
            elif impl == "dot":
                if a.ndim < 2:
                    continue
                out = jnp.matmul(a, jnp.swapaxes(a, -1, -2))
            elif impl == "slice":
                if a.ndim == 0:
                    continue
                out = a[..., 1:]
            elif impl == "sort":
                if a.ndim == 0:
                    continue
                out = jnp.sort(a, axis=-1)
            elif arity == 1:
                out = impl(a)
            else:
                out = impl(a, b)
            values.append(out)
        made = values[len(args):]
        return tuple(made) if made else values[0] + 0

    def inputs(self, batch: int):
        rng = np.random.default_rng(self.seed + 1)
        out = []
        for shape, dt in zip(self.shapes, self.dtypes):
            shape = tuple(batch if d == "B" else d for d in shape)
            k = kind_of(dt)
            if k == "b":
                v = rng.integers(0, 2, size=shape).astype(bool)
            elif k == "i":
                info = np.iinfo(dt)
                pool = np.array([0, -1, 1, 2, -3, 7, info.min, info.max, -20, 20], dt)
                v = rng.choice(pool, size=shape)
            else:
                pool = np.array([0.0, -0.0, 1.0, -1.0, 0.5, 2.5, -3.75, 1e-3], dt)
                v = np.where(rng.integers(0, 3, size=shape) == 0, rng.choice(pool, size=shape),
                             rng.standard_normal(size=shape)).astype(dt)
            out.append(np.asarray(v, dt))
        return out


def _broadcastable(s1, s2) -> bool:
    if len(s1) != len(s2):
        return False
    return all(a == b or a == 1 or b == 1 for a, b in zip(s1, s2))


def check_seed(seed: int) -> None:
    """Converts and checks program `seed`; raises AssertionError on a mismatch."""
    import jax
    import onnx
    import onnxruntime as ort
    from jax import export

    import jaxonnx

    p = Program(seed)
    with jax.enable_x64(p.x64):
        scope = export.SymbolicScope()
        specs = [jax.ShapeDtypeStruct(
            export.symbolic_shape(", ".join(map(str, s)), scope=scope) if s else (), d)
            for s, d in zip(p.shapes, p.dtypes)]
        try:
            model = jaxonnx.to_onnx(p.fn, specs, enable_double_precision=p.x64)
            raw = jaxonnx.to_onnx(p.fn, specs, enable_double_precision=p.x64, optimize=False)
        except jaxonnx.ConversionError as e:
            # A clear refusal is allowed only for what ONNX cannot express.
            if "cannot carry" in str(e) or "not supported" in str(e):
                return
            raise AssertionError(f"conversion failed: {e}") from e
        onnx.checker.check_model(model, full_check=True)
        # An empty batch too: JAX defines it, and onnxruntime kernels often
        # do not (bool reductions, Attention, Reshape's -1 next to a 0).
        for batch in ((0, 1, 3) if p.symbolic else (2,)):
            args = p.inputs(batch)
            try:
                expected = [np.asarray(e) for e in jax.tree_util.tree_leaves(p.fn(*args))]
            except Exception:
                if batch == 0:
                    continue  # JAX refuses this program on an empty batch
                raise
            for m in (model, raw):
                sess = ort.InferenceSession(m.SerializeToString(),
                                            providers=["CPUExecutionProvider"])
                feed = {i.name: a for i, a in zip(sess.get_inputs(), args)}
                got = sess.run(None, feed)
                for g, e in zip(got, expected):
                    assert g.dtype == e.dtype and g.shape == e.shape, (g.dtype, g.shape, e.dtype,
                                                                       e.shape)
                    if np.issubdtype(e.dtype, np.floating):
                        tol = 1e-9 if e.dtype == np.float64 else 2e-5
                        np.testing.assert_allclose(g, e, rtol=tol * 50, atol=tol * 50,
                                                   equal_nan=True)
                    else:
                        np.testing.assert_array_equal(g, e)


def run_seeds(seeds, timeout=600) -> dict[int, str]:
    """Checks `seeds` in child processes; returns {seed: failure} (crashes included)."""
    failures: dict[int, str] = {}
    todo = list(seeds)
    env = dict(os.environ, JAXONNX_VERIFY_IR="1")
    while todo:
        cmd = [sys.executable, __file__] + [str(s) for s in todo]
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        done = set()
        for line in run.stdout.splitlines():
            parts = line.split(" ", 3)
            if len(parts) >= 3 and parts[0] == "seed" and parts[2] in ("ok", "FAIL"):
                s = int(parts[1])
                done.add(s)
                if parts[2] == "FAIL":
                    failures[s] = parts[3] if len(parts) > 3 else "?"
        rest = [s for s in todo if s not in done]
        if run.returncode != 0 and rest:
            # The child died on rest[0] (a signal: a crash in native code).
            failures[rest[0]] = (f"the process died (exit {run.returncode}) while checking it:\n"
                                 f"{run.stderr[-2000:]}")
            rest = rest[1:]
        elif rest:
            raise RuntimeError(f"fuzz child exited early: {run.stderr[-2000:]}")
        todo = rest
    return failures


if __name__ == "__main__":
    import warnings
    warnings.simplefilter("ignore")
    crash = os.environ.get("JAXONNX_FUZZ_CRASH_SEED")  # for the runner's own test
    for arg in sys.argv[1:]:
        seed = int(arg)
        print(f"seed {seed} start", flush=True)
        if crash is not None and seed == int(crash):
            os.abort()
        try:
            check_seed(seed)
            print(f"seed {seed} ok", flush=True)
        except Exception as e:  # noqa: BLE001 - every failure is a finding
            reason = f"{Program(seed).describe()}: {type(e).__name__}: {e}"
            reason += " | " + traceback.format_exc().replace("\n", " | ")[-1500:]
            print(f"seed {seed} FAIL {reason}".replace("\n", " "), flush=True)
