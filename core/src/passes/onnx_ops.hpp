// The ONNX op knowledge the passes need, in one table. This is the only file
// of core/ that names ONNX ops (tests/python/test_core_invariants.py allows it
// alone): a pass must know that Relu is elementwise or that a Transpose with
// the identity permutation is a no-op, but it asks here, by trait, and never
// learns anything about a plugin. Only default-domain nodes have traits: a node
// of any other domain (a function call site, a vendor op) is opaque.
#pragma once

#include "jaxonnx/core/ir.hpp"

namespace jaxonnx::passes::onnx_ops {

// The ops a pass rewrites by name. Other: every op known only by its traits.
enum class Op {
  Other,
  Identity,
  Transpose,
  Reshape,
  Cast,
  Expand,
  Squeeze,
  Unsqueeze,
  Flatten,
  Shape,
  Concat,
  Gather,
  Slice,
  Add,
  Mul,
  Constant,
  Sub,
  Div,
  Greater,
  Less,
  GreaterOrEqual,
  LessOrEqual,
  If,
  MatMul,
  Max,
  Min,
};

Op kind(const ir::Node& node);
const char* op_name(Op op);  // the op_type to emit

// One data input, one output of the same shape, each element computed from
// the element at the same index alone (Relu, Exp, Cast, ...).
bool is_elementwise_unary(const ir::Node& node);
// Two inputs under multidirectional broadcasting, elementwise (Add, Less, ...).
bool is_elementwise_binary(const ir::Node& node);
// Same inputs and attributes give the same outputs, so two such nodes may be
// merged (false for Random*, Multinomial, Bernoulli, Dropout, and for any
// node outside the default domain, whose body a pass cannot see).
bool is_deterministic(const ir::Node& node);
// Output holds the input's elements in the same row-major order, only the
// shape differs (Reshape, Squeeze, Unsqueeze, Flatten).
bool is_layout_preserving_reshape(const ir::Node& node);
// Normalizes its data input (input 0) over the axes from its `axis`
// attribute (default -1) to the last, each such slice on its own, the other
// inputs (scale, bias) broadcast along those axes; one output
// (LayerNormalization, RMSNormalization, Softmax, LogSoftmax).
bool is_last_axis_normalization(const ir::Node& node);

}  // namespace jaxonnx::passes::onnx_ops
