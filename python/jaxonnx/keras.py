"""Keras 3 models (JAX backend) to ONNX: jaxonnx.keras.export.

    import os; os.environ["KERAS_BACKEND"] = "jax"   # before keras is imported
    import jaxonnx.keras
    jaxonnx.keras.export(model, "model.onnx")        # what model.export(format="onnx") does

Keras's semantics (keras 3.15's own ONNX export on the JAX backend): the model's
own input specs when no signature is given, nested inputs flattened in Keras's
tree order, input names from the specs, every None dim symbolic ("batch" for
axis 0, "dim_<input>_<axis>" for the others), the model called with
training=False. On top: every option of jaxonnx.to_onnx (target, verify,
external_data, opset, constraints, ...), symbolic dims that the model combines
shared, a bound on the sequence length taken from the model's position tables,
and float ranges over a symbolic length made in integers. keras is imported only
when export is called (docs/keras.md).
"""

from __future__ import annotations

import contextlib
import re

import numpy as np

from jaxonnx._core import ConversionError

# Attributes of Keras and keras-hub layers that hold the longest sequence the
# layer accepts (keras_hub PositionEmbedding.sequence_length, backbones'
# max_sequence_length); a symbolic length is bounded by the smallest.
_LENGTH_ATTRS = ("sequence_length", "max_sequence_length")
_UNIFY_TRIES = 8  # a model rarely ties more inputs' dims together than this


def _keras():
    try:
        import keras
    except ImportError as e:
        raise ConversionError(f"jaxonnx.keras needs the keras package (pip install keras): {e}") \
            from None
    backend = keras.backend.backend()
    if backend != "jax":
        raise ConversionError(
            f"jaxonnx.keras.export converts Keras models of the JAX backend; this process runs "
            f"Keras on {backend!r}: set KERAS_BACKEND=jax before keras is first imported "
            f"(or in ~/.keras/keras.json) and load the model again")
    return keras


def _model_signature(keras, model):
    """The model's own input structure, as a list with one entry per positional
    argument of model(...): Functional models take their one nested input,
    Sequential their inputs, subclassed models the shapes of their first call."""
    if not model.built:
        raise ConversionError(
            f"{type(model).__name__} was never built: call it once on an example batch "
            f"(model(x)) or build it, or pass input_signature")
    if isinstance(model, keras.Sequential) or isinstance(model, keras.src.models.Functional):
        struct = getattr(model, "_inputs_struct", None)
        if struct is None:
            struct = model.inputs
        if isinstance(model, keras.Sequential):
            return list(keras.tree.flatten(struct))
        return [struct]
    shapes = getattr(model, "_build_shapes_dict", None)
    if not shapes or not getattr(model, "_called", False):
        raise ConversionError(
            f"{type(model).__name__} (a subclassed model) has never been called, so its inputs "
            f"are unknown: call it once on an example batch, or pass input_signature")
    dtype = model.input_dtype

    def spec(shape):  # a build shape: a tuple of dims, or a structure of them
        if isinstance(shape, dict):
            return {k: spec(v) for k, v in shape.items()}
        if isinstance(shape, (tuple, list)) and all(d is None or isinstance(d, int) for d in shape):
            return keras.InputSpec(shape=(None, *shape[1:]), dtype=dtype)
        if isinstance(shape, (tuple, list)):
            return type(shape)(spec(v) for v in shape)
        raise ConversionError(f"cannot read the build shape {shape!r} of {type(model).__name__}; "
                              f"pass input_signature")
    return [spec(s) for s in shapes.values()]


def _leaf(keras, index, leaf):
    """(shape, dtype, name) of one flattened input spec."""
    if isinstance(leaf, keras.InputSpec):
        if leaf.shape is None or leaf.dtype is None:
            raise ConversionError(f"input {index}: {leaf} needs a shape and a dtype")
        return tuple(leaf.shape), np.dtype(leaf.dtype), leaf.name
    if hasattr(leaf, "shape") and hasattr(leaf, "dtype"):  # KerasTensor, ShapeDtypeStruct, array
        return tuple(leaf.shape), np.dtype(keras.backend.standardize_dtype(leaf.dtype)), \
            getattr(leaf, "name", None) if isinstance(leaf, keras.KerasTensor) else None
    raise ConversionError(f"input {index}: expected a keras.InputSpec, a KerasTensor, a "
                          f"jax.ShapeDtypeStruct or an array; got {type(leaf).__name__} {leaf!r}")


def _symbol(index, axis):
    return "batch" if axis == 0 else f"dim_{index}_{axis}"


def _shapes(leaves):
    """Keras's names for None dims; ints and the user's own symbol strings kept."""
    return [tuple(_symbol(i, a) if d is None else d for a, d in enumerate(shape))
            for i, (shape, _, _) in enumerate(leaves)]


def _names(leaves):
    names, seen = [], set()
    for i, (_, _, name) in enumerate(leaves):
        name = name or f"input_{i}"
        while name in seen:  # ONNX input names must be distinct
            name = f"{name}_{i}"
        seen.add(name)
        names.append(name)
    return names


def max_sequence_length(model):
    """The smallest sequence bound the model's layers declare (see _LENGTH_ATTRS), or None."""
    bounds = []
    layers = [model, *model._flatten_layers(include_self=False, recursive=True)]
    for layer in layers:
        for attr in _LENGTH_ATTRS:
            value = getattr(layer, attr, None)
            if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value > 0:
                bounds.append(int(value))
    return min(bounds) if bounds else None


def _length_constraints(shapes, ours, bound):
    """"S <= bound" for each symbol we made at axis 1 of a 2-D or 3-D input (the
    sequence axis of a text model's token ids, masks and embeddings)."""
    if bound is None:
        return []
    found = []
    for shape in shapes:
        if len(shape) in (2, 3) and isinstance(shape[1], str) and shape[1] in ours \
                and shape[1] not in found:
            found.append(shape[1])
    return [f"{s} <= {bound}" for s in found]


_SHAPE = re.compile(r"\(([^()]*)\)|\[([^\[\]]*)\]")  # (batch, T) or f32[batch,T]


def _tied(message, ours):
    """Pairs of our symbols that an error message shows where the model needs them
    equal: two shapes the message prints side by side, compared from the right (as
    broadcasting does), that differ only where both hold one of our symbols."""
    shapes = [[d.strip() for d in (a or b).split(",") if d.strip()]
              for a, b in _SHAPE.findall(message)]
    pairs = []
    for a, b in zip(shapes, shapes[1:]):
        for x, y in zip(reversed(a), reversed(b)):
            if x != y and x in ours and y in ours and {x, y} not in pairs:
                pairs.append({x, y})
    return [tuple(sorted(p, key=lambda s: (s != "batch", s))) for p in pairs]


@contextlib.contextmanager
def _integral_arange():
    """Keras's ops.arange over a symbolic length with a float step that is a whole
    number (keras-hub's XLNet: arange(klen, -qlen, -1.0, dtype="float32")): JAX's
    arange takes symbolic bounds only with integer arguments, so the range is made
    in integers and cast. The values are the same: whole numbers, which float
    arange gives exactly too."""
    from jax import export
    from keras.src.backend.jax import numpy as knp

    original = knp.arange

    def whole(x):
        return x is None or isinstance(x, (int, np.integer)) or export.is_symbolic_dim(x) or \
            (isinstance(x, (float, np.floating)) and float(x).is_integer())

    def arange(start, stop=None, step=None, dtype=None):
        args = (start, stop, step)
        if dtype is not None and any(export.is_symbolic_dim(a) for a in args) and \
                all(whole(a) for a in args):
            ints = [a if a is None or export.is_symbolic_dim(a) else int(a) for a in args]
            return knp.cast(original(*ints, dtype="int32"), dtype)
        return original(start, stop, step, dtype)

    knp.arange = arange
    try:
        yield
    finally:
        knp.arange = original


@contextlib.contextmanager
def _raw_tracebacks(keras):
    """Keras's traceback filtering off while tracing: it drops the frames that name
    the failing line and rewrites the message of JAX's errors."""
    was = keras.config.is_traceback_filtering_enabled()
    keras.config.disable_traceback_filtering()
    try:
        yield
    finally:
        if was:
            keras.config.enable_traceback_filtering()


def export(model, path, input_signature=None, **to_onnx_options):
    """Writes the ONNX model of a JAX-backend Keras model to `path` and returns path.

    input_signature: what the model takes, as Keras's model.export takes it: a
        list with one entry per positional argument of model(...), each a
        keras.InputSpec, a KerasTensor, a jax.ShapeDtypeStruct or an array, or a
        dict/list/tuple of them (one spec alone is the one argument). None dims
        become symbolic; a string dim ("T") is a symbol of that name. Default:
        the model's own inputs (built or called models only).
    to_onnx_options: any keyword of jaxonnx.to_onnx (opset, target, verify,
        external_data, constraints, input_names, fusion, ...). enable_double_precision
        defaults to True when an input is 64-bit. The model's maximum sequence
        length (the smallest sequence_length / max_sequence_length of its
        layers), when it has one, adds "S <= length" for each symbolic dim at
        axis 1 of a 2-D or 3-D input that constraints= does not already name.

    Symbolic dims the model needs equal (a token-id and a padding-mask input of
    one length) are found while tracing and shared, so the model traces; the
    ONNX inputs then name the one dim alike. Raises ConversionError.
    """
    keras = _keras()
    if not isinstance(model, keras.Model):
        raise ConversionError(f"jaxonnx.keras.export takes a keras.Model; got {type(model).__name__}")
    for key in ("return_mode", "output_path"):
        if key in to_onnx_options:
            raise ConversionError(f"jaxonnx.keras.export writes `path`; {key}= is not an option here")
    import jax

    from jaxonnx import _input_specs, to_onnx

    if input_signature is None:
        signature = _model_signature(keras, model)
    elif isinstance(input_signature, (list, tuple)):
        signature = list(input_signature)
    else:
        signature = [input_signature]
    flat = keras.tree.flatten(signature)
    if not flat:
        raise ConversionError(f"{type(model).__name__} takes no inputs to export")
    leaves = [_leaf(keras, i, leaf) for i, leaf in enumerate(flat)]
    shapes = _shapes(leaves)
    ours = {d for (shape, _, _), s in zip(leaves, shapes) for d0, d in zip(shape, s)
            if d0 is None}
    options = dict(to_onnx_options)
    options.setdefault("input_names", _names(leaves))
    options.setdefault("enable_double_precision",
                       any(dt.itemsize == 8 and dt.kind in "iuf" for _, dt, _ in leaves))
    given = list(_input_specs.constraints_of(options.pop("constraints", None)))
    named = set(re.findall(r"[A-Za-z_]\w*", " ".join(given)))
    bound = max_sequence_length(model)

    def fn(*args):
        packed = keras.tree.pack_sequence_as(signature, list(args))
        return model(*packed, training=False)

    fn.__qualname__ = f"{type(model).__name__}.call"
    for _ in range(_UNIFY_TRIES):
        derived = _length_constraints(shapes, ours - named, bound)
        specs = [jax.ShapeDtypeStruct(s, dt) for s, (_, dt, _) in zip(shapes, leaves)]
        try:
            with _raw_tracebacks(keras), _integral_arange():
                return to_onnx(fn, specs, return_mode="file", output_path=str(path),
                               constraints=given + derived or None, **options)
        except ConversionError as e:
            pairs = _tied(str(e), ours)
            if not pairs:
                raise
            for keep, drop in pairs:  # the model adds them: one symbol
                shapes = [tuple(keep if d == drop else d for d in s) for s in shapes]
                ours.discard(drop)
    raise ConversionError(f"{type(model).__name__}: could not settle which symbolic dims the "
                          f"model needs equal after {_UNIFY_TRIES} tries; give them one name "
                          f"in input_signature (a jax.ShapeDtypeStruct with ('batch', 'T'))")
