// The one place in core/ that names ONNX ops; see onnx_ops.hpp for why.
#include "onnx_ops.hpp"

#include <set>
#include <string>
#include <utility>

namespace jaxonnx::passes::onnx_ops {
namespace {

bool default_domain(const ir::Node& n) { return n.domain.empty() || n.domain == "ai.onnx"; }

bool in(const std::set<std::string>& ops, const ir::Node& n) {
  return default_domain(n) && ops.count(n.op_type) > 0;
}

const std::pair<Op, const char*> kNamed[] = {
    {Op::Identity, "Identity"}, {Op::Transpose, "Transpose"}, {Op::Reshape, "Reshape"},
    {Op::Cast, "Cast"},         {Op::Expand, "Expand"},       {Op::Squeeze, "Squeeze"},
    {Op::Unsqueeze, "Unsqueeze"}, {Op::Flatten, "Flatten"},   {Op::Shape, "Shape"},
    {Op::Concat, "Concat"},     {Op::Gather, "Gather"},       {Op::Slice, "Slice"},
    {Op::Add, "Add"},           {Op::Mul, "Mul"},             {Op::Constant, "Constant"},
    {Op::Sub, "Sub"},           {Op::Div, "Div"},             {Op::Greater, "Greater"},
    {Op::Less, "Less"},         {Op::GreaterOrEqual, "GreaterOrEqual"},
    {Op::LessOrEqual, "LessOrEqual"}, {Op::If, "If"}, {Op::MatMul, "MatMul"},
    {Op::Max, "Max"},           {Op::Min, "Min"},
};

// Elementwise with one data input. Ops with extra optional inputs (Clip's
// bounds) are left out: a pass moving a Transpose past them would have to
// reason about those inputs' shapes too.
const std::set<std::string> kUnary = {
    "Abs",   "Acos",     "Acosh",    "Asin",        "Asinh",    "Atan",     "Atanh",
    "Cast",  "Ceil",     "Celu",     "Cos",         "Cosh",     "Elu",      "Erf",
    "Exp",   "Floor",    "Gelu",     "HardSigmoid", "HardSwish", "Identity", "IsInf",
    "IsNaN", "LeakyRelu", "Log",     "Mish",        "Neg",      "Not",      "Reciprocal",
    "Relu",  "Round",    "Selu",     "Sigmoid",     "Sign",     "Sin",      "Sinh",
    "Softplus", "Softsign", "Sqrt",  "Tan",         "Tanh",     "ThresholdedRelu",
    "BitwiseNot",
};

const std::set<std::string> kBinary = {
    "Add",  "Sub",     "Mul",  "Div",         "Pow",     "Mod",          "And",
    "Max",  "Min",
    "Or",   "Xor",     "Equal", "Less",       "Greater", "LessOrEqual",  "GreaterOrEqual",
    "BitShift", "BitwiseAnd", "BitwiseOr",    "BitwiseXor",
};

// Ops whose result is drawn at random (or depends on a training-mode seed).
const std::set<std::string> kNondeterministic = {
    "RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike",
    "Multinomial",  "Bernoulli",        "Dropout",
};

const std::set<std::string> kReshapes = {"Reshape", "Squeeze", "Unsqueeze", "Flatten"};

const std::set<std::string> kLastAxisNormalizations = {"LayerNormalization", "RMSNormalization",
                                                       "Softmax", "LogSoftmax"};

}  // namespace

Op kind(const ir::Node& node) {
  if (!default_domain(node)) return Op::Other;
  for (const auto& [op, name] : kNamed)
    if (node.op_type == name) return op;
  return Op::Other;
}

const char* op_name(Op op) {
  for (const auto& [o, name] : kNamed)
    if (o == op) return name;
  return "";
}

bool is_elementwise_unary(const ir::Node& node) {
  return in(kUnary, node) && node.inputs.size() == 1 && node.outputs.size() == 1;
}

bool is_elementwise_binary(const ir::Node& node) {
  return in(kBinary, node) && node.inputs.size() == 2 && node.outputs.size() == 1;
}

bool is_deterministic(const ir::Node& node) {
  return default_domain(node) && !kNondeterministic.count(node.op_type);
}

bool is_layout_preserving_reshape(const ir::Node& node) { return in(kReshapes, node); }

bool is_last_axis_normalization(const ir::Node& node) {
  return in(kLastAxisNormalizations, node) && !node.inputs.empty() && node.outputs.size() == 1;
}

}  // namespace jaxonnx::passes::onnx_ops
