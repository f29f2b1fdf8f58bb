"""jaxonnx.keras.export (python/jaxonnx/keras.py), its CLI (_cli_keras.py) and
to_onnx(constraints=): Keras models of the JAX backend, each compared with
model.predict through onnxruntime at two batch sizes."""

from __future__ import annotations

import os

os.environ["KERAS_BACKEND"] = "jax"  # before keras is first imported

import importlib.util
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import onnx
import onnxruntime as ort
import pytest

keras = pytest.importorskip("keras")
from keras import layers, ops  # noqa: E402

import jaxonnx  # noqa: E402
import jaxonnx.keras  # noqa: E402
from jaxonnx.__main__ import main  # noqa: E402

RNG = np.random.default_rng(0)


def _load(path):
    model = onnx.load(str(path))
    onnx.checker.check_model(model, full_check=True)
    return model, ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def _dims(model):
    return {i.name: [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim]
            for i in model.graph.input}


def _agree(session, model, feeds, x, atol=1e-5):
    """session's outputs against model.predict(x) (flattened as JAX flattens them)."""
    got = session.run(None, feeds)
    want = jax.tree_util.tree_leaves(model.predict(x, verbose=0))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, np.asarray(w), rtol=1e-5, atol=atol)


def _floats(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def test_sequential_at_two_batch_sizes(tmp_path):
    model = keras.Sequential([keras.Input((10,), name="features"), layers.Dense(8, activation="relu"),
                              layers.BatchNormalization(), layers.Dropout(0.5), layers.Dense(3)])
    model.layers[1].moving_mean.assign(RNG.standard_normal(8).astype(np.float32))  # not identity
    path = jaxonnx.keras.export(model, tmp_path / "seq.onnx")
    proto, session = _load(path)
    assert _dims(proto) == {"features": ["batch", 10]}  # the Input's name, None as "batch"
    for b in (3, 7):  # training=False: BatchNormalization's statistics, no Dropout
        x = _floats(b, 10)
        _agree(session, model, {"features": x}, x)


def test_functional_two_inputs_names_from_specs(tmp_path):
    a, b = keras.Input((6,), name="left"), keras.Input((4,), name="right")
    out = layers.Dense(5)(layers.Concatenate()([layers.Dense(3, activation="tanh")(a), b]))
    model = keras.Model([a, b], out)
    proto, session = _load(jaxonnx.keras.export(model, tmp_path / "f.onnx"))
    assert _dims(proto) == {"left": ["batch", 6], "right": ["batch", 4]}
    for n in (2, 5):
        x = [_floats(n, 6), _floats(n, 4)]
        _agree(session, model, {"left": x[0], "right": x[1]}, x)


class TwoBranch(keras.Model):
    def __init__(self):
        super().__init__()
        self.dense = layers.Dense(4)
        self.norm = layers.LayerNormalization()

    def call(self, x, training=False):
        return self.norm(ops.relu(self.dense(x))) * 2.0


def test_subclassed_model_from_its_first_call(tmp_path):
    model = TwoBranch()
    model(_floats(2, 7))  # a subclassed model's inputs are the shapes of its first call
    proto, session = _load(jaxonnx.keras.export(model, tmp_path / "s.onnx"))
    assert list(_dims(proto).values()) == [["batch", 7]]
    name = session.get_inputs()[0].name
    for n in (1, 6):
        x = _floats(n, 7)
        _agree(session, model, {name: x}, x)


def test_nested_dict_inputs(tmp_path):
    """A dict of inputs: flattened in Keras's (sorted-key) order, each named by its spec."""
    ins = {"tokens": keras.Input((5,), name="tokens", dtype="int32"),
           "dense": keras.Input((3,), name="dense")}
    emb = layers.Flatten()(layers.Embedding(11, 2)(ins["tokens"]))
    model = keras.Model(ins, layers.Dense(2)(layers.Concatenate()([emb, ins["dense"]])))
    proto, session = _load(jaxonnx.keras.export(model, tmp_path / "d.onnx"))
    assert _dims(proto) == {"dense": ["batch", 3], "tokens": ["batch", 5]}
    for n in (2, 4):
        x = {"tokens": RNG.integers(0, 11, (n, 5)).astype(np.int32), "dense": _floats(n, 3)}
        _agree(session, model, dict(x), x)


def test_explicit_signature_with_named_symbol_and_list_input(tmp_path):
    """input_signature as Keras takes it, with a list as the one argument; a string
    dim is a symbol of that name."""
    class AddPair(keras.Model):
        def call(self, pair):
            return pair[0] * 2.0 + pair[1]

    model = AddPair()
    sig = [[keras.InputSpec(shape=(None, 3), dtype="float32", name="x"),
            jax.ShapeDtypeStruct(("batch", 3), np.float32)]]
    proto, session = _load(jaxonnx.keras.export(model, tmp_path / "p.onnx", input_signature=sig,
                                                input_names=["x", "y"]))
    assert _dims(proto) == {"x": ["batch", 3], "y": ["batch", 3]}
    for n in (2, 5):
        x = [_floats(n, 3), _floats(n, 3)]
        np.testing.assert_allclose(session.run(None, {"x": x[0], "y": x[1]})[0],
                                   x[0] * 2 + x[1], rtol=1e-6)


def test_bidirectional_lstm(tmp_path):
    """Keras skips its own BiLSTM export test on JAX (jax2onnx lacks reverse scan)."""
    inputs = keras.Input((4, 5))
    x = layers.Bidirectional(layers.LSTM(6, return_sequences=True), merge_mode="sum")(inputs)
    out = layers.Bidirectional(layers.LSTM(3, return_sequences=True), merge_mode="concat")(x)
    model = keras.Model(inputs, out)
    proto, session = _load(jaxonnx.keras.export(model, tmp_path / "lstm.onnx"))
    name = session.get_inputs()[0].name
    assert _dims(proto)[name] == ["batch", 4, 5]
    for n in (3, 6):
        x = _floats(n, 4, 5)
        _agree(session, model, {name: x}, x)


class PositionTable(layers.Layer):
    """A learned table of `sequence_length` positions sliced to the input's length
    (keras-hub's PositionEmbedding does the same)."""

    def __init__(self, sequence_length, **kw):
        super().__init__(**kw)
        self.sequence_length = sequence_length

    def build(self, shape):
        self.table = self.add_weight(shape=(self.sequence_length, shape[-1]),
                                     initializer="random_normal")

    def call(self, x):
        return x + ops.convert_to_tensor(self.table)[: ops.shape(x)[1]]

    def compute_output_shape(self, shape):  # Keras cannot infer it through the slice
        return shape


def _transformer(max_len=16, vocab=20, dim=8):
    tokens = keras.Input((None,), dtype="int32", name="token_ids")
    x = PositionTable(max_len)(layers.Embedding(vocab, dim)(tokens))
    attn = layers.MultiHeadAttention(num_heads=2, key_dim=4)(x, x, use_causal_mask=True)
    x = layers.LayerNormalization()(x + attn)
    ffn = layers.Dense(dim)(layers.Dense(2 * dim, activation="gelu")(x))
    return keras.Model(tokens, layers.LayerNormalization()(x + ffn))


def test_transformer_block_with_a_symbolic_sequence_length(tmp_path):
    """(None, None) token ids: the position table's length bounds the sequence dim,
    so slicing it to the input's length traces; valid at any length up to it."""
    model = _transformer()
    assert jaxonnx.keras.max_sequence_length(model) == 16
    # verify: onnxruntime against Keras at lengths within the bound, before writing
    proto, session = _load(jaxonnx.keras.export(model, tmp_path / "t.onnx", verify=True))
    assert _dims(proto) == {"token_ids": ["batch", "dim_0_1"]}
    for n, t in ((2, 5), (3, 16)):
        x = RNG.integers(0, 20, (n, t)).astype(np.int32)
        _agree(session, model, {"token_ids": x}, x, atol=2e-5)


def test_without_a_bound_the_error_names_the_constraint(tmp_path):
    """A table slice with nothing bounding the length: a ConversionError naming the
    constraint that decides it and the line that sliced (not a raw traceback)."""
    class Unbounded(PositionTable):
        def __init__(self, n, **kw):
            super().__init__(n, **kw)
            self.rows = self.sequence_length
            del self.sequence_length  # no declared bound

        def build(self, shape):
            self.table = self.add_weight(shape=(self.rows, shape[-1]))

    tokens = keras.Input((None, 4))
    model = keras.Model(tokens, Unbounded(12)(tokens))
    with pytest.raises(jaxonnx.ConversionError,
                       match=r"constraints=\['dim_0_1 <= 12'\].*") as e:
        jaxonnx.keras.export(model, tmp_path / "u.onnx")
    assert "test_keras.py" in str(e.value) and "(call)" in str(e.value)
    # ... and stating it is the way through; past the bound the model is not valid
    proto, session = _load(jaxonnx.keras.export(model, tmp_path / "u.onnx",
                                                constraints=["dim_0_1 <= 12"]))
    for n, t in ((1, 3), (2, 12)):
        x = _floats(n, t, 4)
        _agree(session, model, {session.get_inputs()[0].name: x}, x)


def test_tied_dims_of_two_inputs_are_shared(tmp_path):
    """Token ids and a mask, each (None, None): Keras names the two lengths apart; the
    model multiplies them together, so the export finds they are one dim."""
    ids, mask = keras.Input((None,), dtype="int32", name="ids"), keras.Input((None,), name="mask")
    emb = layers.Embedding(9, 3)(ids) * ops.expand_dims(mask, -1)
    model = keras.Model([ids, mask], layers.GlobalAveragePooling1D()(emb))
    proto, session = _load(jaxonnx.keras.export(model, tmp_path / "m.onnx"))
    assert _dims(proto) == {"ids": ["batch", "dim_0_1"], "mask": ["batch", "dim_0_1"]}
    for n, t in ((2, 3), (4, 7)):
        x = [RNG.integers(0, 9, (n, t)).astype(np.int32), (RNG.random((n, t)) > 0.3).astype(np.float32)]
        _agree(session, model, {"ids": x[0], "mask": x[1]}, x)


def test_float_arange_over_a_symbolic_length(tmp_path):
    """ops.arange(T, -T, -1.0, dtype="float32") (keras-hub's XLNet relative positions):
    JAX's arange takes a symbolic bound only with integer arguments; the export makes
    the same whole numbers in integers."""
    class RelativePositions(layers.Layer):
        def call(self, x):
            t = ops.shape(x)[1]
            pos = ops.arange(t, -t, -1.0, dtype="float32")
            return ops.mean(x, axis=-1, keepdims=True) + ops.sum(pos) + pos[: t][None, :, None]

        def compute_output_shape(self, shape):
            return (*shape[:2], 1)

    inputs = keras.Input((None, 3))
    model = keras.Model(inputs, RelativePositions()(inputs))
    proto, session = _load(jaxonnx.keras.export(model, tmp_path / "arange.onnx"))
    name = session.get_inputs()[0].name
    for n, t in ((2, 3), (1, 8)):
        x = _floats(n, t, 3)
        _agree(session, model, {name: x}, x)


def test_options_pass_through(tmp_path):
    """to_onnx's options: opset, target, verify (against Keras), external data."""
    model = keras.Sequential([keras.Input((300,)), layers.Dense(4)])
    path = jaxonnx.keras.export(model, tmp_path / "o.onnx", opset=17, target="portable",
                                verify=True, external_data=True)
    proto, session = _load(path)
    assert [o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")] == [17]
    assert (tmp_path / "o.onnx.data").exists()
    x = _floats(2, 300)
    _agree(session, model, {session.get_inputs()[0].name: x}, x)


def test_clear_errors(tmp_path, monkeypatch):
    with pytest.raises(jaxonnx.ConversionError, match="never built"):
        jaxonnx.keras.export(keras.Sequential([layers.Dense(2)]), tmp_path / "a.onnx")
    with pytest.raises(jaxonnx.ConversionError, match="never been called"):
        model = TwoBranch()
        model.build((None, 3))
        jaxonnx.keras.export(model, tmp_path / "b.onnx")
    with pytest.raises(jaxonnx.ConversionError, match="takes a keras.Model"):
        jaxonnx.keras.export(layers.Dense(2), tmp_path / "c.onnx")
    with pytest.raises(jaxonnx.ConversionError, match="output_path= is not an option"):
        jaxonnx.keras.export(keras.Sequential([keras.Input((2,)), layers.Dense(2)]),
                             tmp_path / "d.onnx", output_path="x.onnx")
    monkeypatch.setattr(keras.backend, "backend", lambda: "tensorflow")
    with pytest.raises(jaxonnx.ConversionError, match="KERAS_BACKEND=jax"):
        jaxonnx.keras.export(keras.Sequential([keras.Input((2,)), layers.Dense(2)]), tmp_path / "e")


def test_cli_converts_a_saved_model(tmp_path, capsys):
    model = keras.Sequential([keras.Input((5,), name="x"), layers.Dense(3, activation="relu")])
    model.save(tmp_path / "m.keras")
    out = tmp_path / "m.onnx"
    assert main(["keras", str(tmp_path / "m.keras"), str(out), "--opset", "18", "--verify"]) == 0
    assert capsys.readouterr().out.strip() == str(out)
    proto, session = _load(out)
    assert _dims(proto) == {"x": ["batch", 5]}
    x = _floats(4, 5)
    _agree(session, model, {"x": x}, x)
    assert main(["keras", str(tmp_path / "missing.keras"), str(out)]) == 2
    assert "cannot load" in capsys.readouterr().err


# ------------------------------------------------------------- to_onnx(constraints=)

def _table_slice(x):
    return x + jnp.arange(512.0, dtype=x.dtype)[: x.shape[1]]


def test_to_onnx_constraints_decide_a_slice():
    with pytest.raises(jaxonnx.ConversionError, match=r"constraints=\['T <= 512'\]"):
        jaxonnx.to_onnx(_table_slice, [("B", "T")])
    model = jaxonnx.to_onnx(_table_slice, [("B", "T")], constraints=["T <= 512"])
    onnx.checker.check_model(model, full_check=True)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for shape in ((1, 1), (3, 40), (2, 512)):
        x = _floats(*shape)
        np.testing.assert_allclose(session.run(None, {"in_0": x})[0], _table_slice(x), rtol=1e-6)


def test_to_onnx_constraints_decide_a_comparison():
    def pad_short(x):  # Python branches on the length: JAX must know T > 4
        return x * 2.0 if x.shape[0] > 4 else x
    with pytest.raises(jaxonnx.ConversionError, match=r"'T > 4'.*constraints="):
        jaxonnx.to_onnx(pad_short, [("T",)])
    # verify runs it at sizes the constraint allows (9, 10, 13: not 1)
    model = jaxonnx.to_onnx(pad_short, [("T",)], constraints="T >= 5", verify=True)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    x = _floats(9)
    np.testing.assert_allclose(session.run(None, {"in_0": x})[0], 2 * x)


def test_to_onnx_constraints_checked():
    with pytest.raises(jaxonnx.ConversionError, match="constraints must be a list of strings"):
        jaxonnx.to_onnx(_table_slice, [("B", "T")], constraints=[512])
    with pytest.raises(jaxonnx.ConversionError, match="constraints"):
        jaxonnx.to_onnx(_table_slice, [("B", "T")], constraints=["T << 512"])
    own = jax.export.symbolic_shape("B, T")  # made in a scope without the constraint
    with pytest.raises(jaxonnx.ConversionError, match="scope of its own"):
        jaxonnx.to_onnx(_table_slice, [jax.ShapeDtypeStruct(own, np.float32)],
                        constraints=["T <= 512"])


def test_minimum_as_shape_names_the_way():
    def head(x):
        return jnp.zeros((jnp.minimum(x.shape[0], 4),))
    with pytest.raises(jaxonnx.ConversionError, match="used as a shape") as e:
        jaxonnx.to_onnx(head, [("T",)])
    assert "test_keras.py" in str(e.value)


# ------------------------------------------- Keras's own ONNX tests, through jaxonnx

def test_keras_own_onnx_export_tests_pass_through_jaxonnx(tmp_path):
    """keras 3.15's keras/src/export/onnx_test.py with `jax2onnx` a module that
    forwards to jaxonnx (Keras's JAX path imports jax2onnx.to_onnx)."""
    spec = importlib.util.find_spec("keras.src.export.onnx_test")
    if spec is None or not spec.origin:
        pytest.skip("this keras does not ship its export tests")
    shim = tmp_path / "shim"
    shim.mkdir()
    calls = tmp_path / "calls.txt"
    (shim / "jax2onnx.py").write_text(
        "import jaxonnx\n"
        "from jaxonnx import allclose, onnx_function\n"
        "def to_onnx(*args, **kwargs):\n"
        f"    open({str(calls)!r}, 'a').write('call\\n')\n"
        "    return jaxonnx.to_onnx(*args, **kwargs)\n")
    env = dict(os.environ, KERAS_BACKEND="jax",
               PYTHONPATH=os.pathsep.join([str(shim), os.environ.get("PYTHONPATH", "")]))
    # importlib mode: pytest's default puts the test file's root (site-packages) first on
    # sys.path, ahead of the shim, so an installed jax2onnx (./scripts/bench adds it) would win.
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "-p", "no:xdist", "--import-mode=importlib", spec.origin], cwd=tmp_path, env=env,
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert " passed" in run.stdout and "failed" not in run.stdout
    assert calls.read_text().count("call") >= 10  # every export went through jaxonnx


def test_jaxonnx_imports_without_keras():
    """keras is imported when jaxonnx.keras.export is called, not before."""
    code = ("import sys, jaxonnx, jaxonnx.keras; assert 'keras' not in sys.modules; "
            "assert callable(jaxonnx.keras.export)")
    subprocess.run([sys.executable, "-c", code], check=True, env=dict(os.environ, KERAS_BACKEND="jax"))
