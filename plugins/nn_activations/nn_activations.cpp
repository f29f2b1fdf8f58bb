// nn_activations: jax.nn activations (and their flax nnx / linen re-exports),
// bound through binding specs (ABI 1.2) so that each call is one ONNX op
// instead of JAX's decomposition.
//
// Each primitive takes the activation's input `x` and its static params; the
// equation also carries `reference`, the original function traced, which is
// inlined where the ONNX op does not apply: an opset older than the op, or a
// dtype onnxruntime's CPU provider has no kernel of the op for.
//
// Numerics: every op agrees with JAX to float rounding on finite inputs, in
// the absolute sense near 0 for three of them (benchmarks/differential.py
// measures it): onnxruntime's Sigmoid is within 2e-7 of JAX's in float32
// (2e-16 in float64) but not relatively close for tiny results (float32: 0
// below x = -18), and ONNX defines Elu, Celu
// and Selu as alpha (exp(x) - 1), which is 0 for |x| < 6e-8 where JAX's
// expm1 gives x. On NaN and infinity they agree (Relu(NaN) = NaN, Softmax of
// a row holding +inf gives NaN, as JAX's does) but for float64 LogSoftmax,
// whose row holding +inf is NaN there and -inf elsewhere (JAX: NaN), so
// float64 log_softmax is not bound with crisp="exact". Signed zero: Relu(-0.0)
// is -0.0 and Selu(-0.0) is 0.0 (JAX: 0.0 and -0.0).
#include <jaxonnx/plugin.hpp>

#include <cmath>
#include <string>
#include <vector>

namespace {

using namespace jaxonnx::sdk;

// Lowers the equation through its `reference` jaxpr (the original function).
void lower_reference(Lowering& L) {
  std::vector<Value> outs = L.inline_jaxpr(L.param("reference").as_jaxpr(), L.inputs());
  for (size_t i = 0; i < outs.size(); ++i) L.bind(i, outs[i]);
}

// One activation: its ONNX op, the opset that op needs, the dtypes
// onnxruntime's CPU kernels take, and how params become attributes.
struct Activation {
  const char* name;      // jax.nn attribute; the primitive is jaxonnx.nn.<name>
  const char* op;        // ONNX op
  int64_t min_opset;     // first opset with the op (as used here)
  bool f64;              // onnxruntime has a float64 kernel
  std::vector<const char*> params;  // "name=expression" of the binding
  std::vector<Attr> (*attrs)(Lowering& L);
  const char* summary;
  bool reexported = true;  // flax.nnx and flax.linen re-export it (not mish, in flax 0.12)
  // Below min_opset, a form tried before the reference (false: it does not
  // fit, nothing emitted), and the ops it emits.
  bool (*older)(Lowering& L) = nullptr;
  std::vector<const char*> older_ops = {};
};

std::vector<Attr> no_attrs(Lowering&) { return {}; }

// Gelu where there is no Gelu op (opset < 20), float32; false (nothing
// emitted) for another dtype: the reference then.
//
// Exact: 0.5 x (1 + erf(x / sqrt 2)) as Mul(Add(Erf(Div(x, sqrt 2)), 1),
// Mul(x, 0.5)), the form onnxruntime's session optimizer fuses back into one
// Gelu kernel: five ops, where JAX's erfc-based definition traces to some
// sixty. Its numerics are the Gelu op's (1 + erf rounds to 0 where
// erfc(-x / sqrt 2) is below float epsilon: gelu(x) for x < -5.4 in float32 is
// -0.0 instead of a value under 1e-6 in magnitude), as at opset 20.
//
// tanh: 0.5 (1 + tanh(z)) is sigmoid(2 z), so JAX's
// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) is x sigmoid(x (c1 + c2 x^2))
// with c1 = 2 sqrt(2/pi), c2 = 0.044715 c1: six ops (Mul, Mul, Add, Mul,
// Sigmoid, Mul) for JAX's nine, which onnxruntime fuses neither way; 0.82-0.86x
// of their time (onnxruntime 1.31 CPU, [32..256, 1024]). Within float
// rounding of JAX's on finite inputs; more accurate where 1 + tanh cancels
// (x far below 0), and Sigmoid's absolute accuracy near 0 (docs/crisp_ops.md).
bool lower_gelu_older(Lowering& L) {
  const Aval x = L.in_aval(0), out = L.out_aval(0);
  if (x.dtype != dtype::f32) return false;
  if (L.param("approximate").as_bool()) {
    const double c1 = 2.0 * std::sqrt(2.0 / M_PI), c2 = 0.044715 * c1;
    Value x2 = L.op("Mul", {L.input(0), L.input(0)}, out);
    Value a = L.op("Add", {L.op("Mul", {x2, scalar(L, x.dtype, c2)}, out), scalar(L, x.dtype, c1)}, out);
    Value z = L.op("Mul", {L.input(0), a}, out);
    L.bind(0, L.op("Mul", {L.input(0), L.op("Sigmoid", {z}, out)}, out));
    return true;
  }
  Value d = L.op("Div", {L.input(0), scalar(L, x.dtype, std::sqrt(2.0))}, out);
  Value e = L.op("Add", {L.op("Erf", {d}, out), scalar(L, x.dtype, 1.0)}, out);
  L.bind(0, L.op("Mul", {e, L.op("Mul", {L.input(0), scalar(L, x.dtype, 0.5)}, out)}, out));
  return true;
}


// JAX's selu constants (jax.nn.selu), written out so ONNX's float defaults
// (rounded to f32) do not apply in float64.
constexpr double kSeluAlpha = 1.6732632423543772848170429916717;
constexpr double kSeluScale = 1.0507009873554804934193349852946;

const std::vector<Activation>& activations() {
  static const std::vector<Activation> table = {
      {"relu", "Relu", 14, true, {}, no_attrs,
       "jax.nn.relu as Relu. Relu(-0.0) is -0.0 (JAX: 0.0)"},
      {"sigmoid", "Sigmoid", 13, true, {}, no_attrs,
       "jax.nn.sigmoid as Sigmoid. onnxruntime's Sigmoid is within 2e-7 of JAX's in float32 "
       "(2e-16 in float64), not relatively close for tiny results (float32: 0 below x = -18)"},
      {"gelu", "Gelu", 20, false, {"approximate=approximate"},
       [](Lowering& L) {
         return std::vector<Attr>{
             Attr::s("approximate", L.param("approximate").as_bool() ? "tanh" : "none")};
       },
       "jax.nn.gelu (both forms) as Gelu; below opset 20, float32, the exact form as "
       "Div/Erf/Add/Mul (onnxruntime fuses it into Gelu), the tanh form as "
       "x * Sigmoid(x (c1 + c2 x^2)) (0.5 (1 + tanh z) = sigmoid(2 z): six ops for JAX's nine)",
       true, lower_gelu_older, {"Div", "Erf", "Add", "Mul", "Sigmoid"}},
      {"elu", "Elu", 6, false, {"alpha=alpha"},
       [](Lowering& L) { return std::vector<Attr>{Attr::f("alpha", L.param("alpha").as_float())}; },
       "jax.nn.elu as Elu. alpha (exp(x) - 1) as ONNX defines it: within 1.2e-7 alpha of JAX's "
       "expm1, 0 for |x| < 6e-8"},
      {"celu", "Celu", 12, false, {"alpha=alpha"},
       [](Lowering& L) { return std::vector<Attr>{Attr::f("alpha", L.param("alpha").as_float())}; },
       "jax.nn.celu as Celu. alpha (exp(x / alpha) - 1) as ONNX defines it: within 1.2e-7 "
       "alpha of JAX's expm1"},
      {"selu", "Selu", 6, false, {},
       [](Lowering&) {
         return std::vector<Attr>{Attr::f("alpha", kSeluAlpha), Attr::f("gamma", kSeluScale)};
       },
       "jax.nn.selu as Selu. alpha (exp(x) - 1) as ONNX defines it: within 2.4e-7 of JAX's "
       "expm1; Selu(-0.0) is 0.0 (JAX: -0.0)"},
      {"leaky_relu", "LeakyRelu", 16, false, {"negative_slope=negative_slope"},
       [](Lowering& L) {
         return std::vector<Attr>{Attr::f("alpha", L.param("negative_slope").as_float())};
       },
       "jax.nn.leaky_relu as LeakyRelu"},
      {"hard_sigmoid", "HardSigmoid", 6, false, {},
       [](Lowering&) { return std::vector<Attr>{Attr::f("alpha", 1.0 / 6.0), Attr::f("beta", 0.5)}; },
       "jax.nn.hard_sigmoid (relu6(x + 3) / 6) as HardSigmoid"},
      {"hard_swish", "HardSwish", 14, false, {}, no_attrs,
       "jax.nn.hard_swish (x * relu6(x + 3) / 6) as HardSwish"},
      {"softplus", "Softplus", 1, false, {}, no_attrs, "jax.nn.softplus as Softplus"},
      {"mish", "Mish", 18, false, {}, no_attrs, "jax.nn.mish as Mish", false},
  };
  return table;
}

// The modules that re-export jax.nn's functions under the same names.
const std::vector<const char*> kNamespaces = {"jax.nn", "flax.nnx", "flax.linen"};
const std::vector<const char*> kJaxOnly = {"jax.nn"};

void lower_activation(Lowering& L, const Activation& a) {
  Aval x = L.in_aval(0);
  bool typed = x.dtype == dtype::f32 || (a.f64 && x.dtype == dtype::f64);
  if (L.opset() < a.min_opset && a.older && a.older(L)) return;
  if (L.opset() < a.min_opset || !typed) return lower_reference(L);
  L.bind(0, L.op(a.op, {L.input(0)}, L.out_aval(0), a.attrs(L)));
}

// softmax / log_softmax over one axis (an int, or a 1-tuple).
void lower_softmax(Lowering& L, const char* op) {
  Aval x = L.in_aval(0);
  Param axis = L.param("axis");
  if (!(x.dtype == dtype::f32 || x.dtype == dtype::f64) || x.rank() < 1) return lower_reference(L);
  int64_t ax = 0;
  if (axis.kind() == JXO_PARAM_INT) ax = axis.as_int();
  else if (axis.kind() == JXO_PARAM_LIST && axis.size() == 1) ax = axis[0].as_int();
  else return lower_reference(L);
  if (ax < -x.rank() || ax >= x.rank()) return lower_reference(L);
  L.bind(0, L.op(op, {L.input(0)}, L.out_aval(0), {Attr::i("axis", ax)}));
}

// Binds jax.nn.<fn> and its re-exports. `leading`: the op maps over extra
// leading dims of x (true for elementwise ops and for a negative axis).
void bind_everywhere(Plugin::PrimitiveRef& ref, const std::string& fn,
                     const std::vector<const char*>& params, const std::vector<const char*>& when,
                     bool leading = true, const std::vector<const char*>& namespaces = kNamespaces) {
  for (const char* ns : namespaces) {
    Binding b(std::string(ns) + "." + fn);
    b.exact();
    b.operand("x", leading);
    for (const char* p : params) {
      std::string s(p);
      size_t eq = s.find('=');
      b.param(s.substr(0, eq), s.substr(eq + 1));
    }
    for (const char* w : when) b.when(w);
    ref.binds(b);
  }
}

}  // namespace

JAXONNX_PLUGIN("nn_activations", "0.1.0") {
  for (const Activation& a : activations()) {
    auto ref = plugin.primitive(std::string("jaxonnx.nn.") + a.name,
                                [&a](Lowering& L) { lower_activation(L, a); })
                   .emits({a.op})
                   .doc(onnx_doc(a.op))
                   .summary(a.summary);
    for (const char* op : a.older_ops) ref.emits({op});
    bind_everywhere(ref, a.name, a.params, {}, true, a.reexported ? kNamespaces : kJaxOnly);
  }
  for (auto [name, op] : {std::pair{"softmax", "Softmax"}, std::pair{"log_softmax", "LogSoftmax"}}) {
    auto ref = plugin.primitive(std::string("jaxonnx.nn.") + name,
                                [op = op](Lowering& L) { lower_softmax(L, op); })
                   .emits({op})
                   .doc(onnx_doc(op))
                   .summary(std::string("jax.nn.") + name + " over one axis as " + op +
                            (std::string(name) == "log_softmax"
                                 ? ". float64: a row holding +inf gives NaN there and -inf "
                                   "elsewhere (JAX: NaN), so float64 is not bound with "
                                   "crisp=\"exact\""
                                 : ""));
    // onnxruntime's float64 LogSoftmax differs on +inf (see the top).
    std::vector<const char*> when = {"where is None"};
    if (std::string(name) == "log_softmax") when.push_back("not jaxonnx_exact or x.dtype != 'float64'");
    // axis as a negative int, so that it holds when a vmap adds leading
    // dims; an axis tuple falls to the second spec, which maps over none.
    bind_everywhere(ref, name, {"axis=axis - x.ndim * (axis >= 0)"}, when);
    bind_everywhere(ref, name, {"axis=axis"}, when, false);
  }
}
