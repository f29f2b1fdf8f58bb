"""to_onnx's fusion option: what each stage may fuse.

Two stages make fused ONNX ops: binding specs while tracing (flax's LayerNorm
call -> LayerNormalization) and the plugins' rewrite rules after lowering
(MatMul + Add -> Gemm). Each spec and rule declares its numerics (ABI 1.5):
"exact" (within float rounding on every input, NaN and infinity included) or
"finite" (within rounding on finite inputs). One option picks for both:

  fusion="fast"         every spec and rule within float rounding (the default)
  fusion="exact"        only exact ones
  fusion="none"         neither: JAX's own decompositions
  fusion="approximate"  also those declared "approximate" (ABI 1.8): beyond
                        float rounding by a documented, measured error (int8
                        activations in MatMulNBits; docs/quantization.md)

The older switches stay as aliases: crisp="exact" is fusion="exact";
normalization_mode="force_decomposed" is fusion="none"; crisp=False and
fuse=False turn off one stage each (specs, rules), to tell which one a
difference comes from.
"""

from __future__ import annotations

from jaxonnx._core import ConversionError

LEVELS = ("approximate", "fast", "exact", "none")  # most to least permissive


def _lower(a, b):
    return LEVELS[max(LEVELS.index(a), LEVELS.index(b))]


def levels(fusion, crisp=True, fuse=True, normalization_mode="auto"):
    """(binding level, rule level): the levels of the binding specs and of the
    rewrite rules, each one of LEVELS."""
    if fusion is None:
        fusion = "fast"
    if fusion not in LEVELS:
        raise ConversionError(f"fusion must be one of {LEVELS[1:] + LEVELS[:1]}; got {fusion!r}")
    if not (crisp is True or crisp is False or crisp == "exact"):
        raise ConversionError(f'crisp must be True, False or "exact"; got {crisp!r}')
    if not isinstance(fuse, bool):
        raise ConversionError(f"fuse must be True or False; got {fuse!r}")
    binding = rule = fusion
    if crisp == "exact":
        binding, rule = _lower(binding, "exact"), _lower(rule, "exact")
    if normalization_mode == "force_decomposed":
        binding = rule = "none"
    if crisp is False:
        binding = "none"
    if fuse is False:
        rule = "none"
    return binding, rule
