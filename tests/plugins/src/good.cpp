// The "good" test plugin: two primitives, both with an abstract eval that
// returns the input's aval (symbolic dims included), and a test equation
// each (test.scale's with its outputs given, test.identity's from its
// abstract eval).
//   test.identity(x)            -> Identity(x)
//   test.scale(x, factor=2.0)   -> Mul(x, factor as a scalar of x's dtype)
//   test.target(x)              -> Identity(x) where the target has guard Ifs,
//                                  else Neg(x); Attention(x, x, x) with the
//                                  param `attention` (ABI 1.5 target profiles);
//                                  com.microsoft FastGelu with param `contrib`
#include <jaxonnx/plugin.hpp>

namespace sdk = jaxonnx::sdk;

namespace {

void same_aval(sdk::AbstractEval& A) {
  if (A.num_inputs() != 1) throw sdk::Error("expects exactly one input");
  A.add_output(A.in_aval(0));
}

void lower_identity(sdk::Lowering& L) {
  L.bind(0, L.op("Identity", {L.input(0)}, L.out_aval(0)));
}

void lower_scale(sdk::Lowering& L) {
  double factor = L.has_param("factor") ? L.param("factor").as_float() : 2.0;
  sdk::Aval in = L.in_aval(0);
  sdk::Value k = scalar(L, in.dtype, factor);
  L.bind(0, L.op("Mul", {L.input(0), k}, L.out_aval(0)));
}

void lower_target(sdk::Lowering& L) {
  if (L.has_param("contrib")) {  // whether or not the target runs com.microsoft: the host decides
    L.bind(0, L.op_n("FastGelu", {L.input(0)}, {L.out_aval(0)}, {}, "com.microsoft", 1)[0]);
    return;
  }
  if (L.has_param("own_domain")) {  // a domain no profile knows: the plugin's own, any target
    L.bind(0, L.op_n("Foo", {L.input(0)}, {L.out_aval(0)}, {}, "test.ops", 1)[0]);
    return;
  }
  if (L.has_param("attention")) {
    L.bind(0, L.op("Attention", {L.input(0), L.input(0), L.input(0)}, L.out_aval(0),
                   {sdk::Attr::i("q_num_heads", 1), sdk::Attr::i("kv_num_heads", 1)}));
    return;
  }
  L.bind(0, L.op(L.target_supports("if_guard") ? "Identity" : "Neg", {L.input(0)}, L.out_aval(0)));
}

}  // namespace

JAXONNX_PLUGIN("test_good", "1.2.3") {
  plugin.primitive("test.identity", lower_identity)
      .emits({"Identity"})
      .summary("returns its input")
      .abstract_eval(same_aval)
      .test({sdk::Aval(sdk::dtype::f32, {2, 3})});
  plugin.primitive("test.scale", lower_scale)
      .emits({"Mul"})
      .summary("multiplies by the float param 'factor' (default 2)")
      .abstract_eval(same_aval)
      .test({sdk::Aval(sdk::dtype::f64, {sdk::Dim::sym("B"), 4})},
            {sdk::Aval(sdk::dtype::f64, {sdk::Dim::sym("B"), 4})});
  plugin.primitive("test.target", lower_target)
      .emits({"Identity", "Neg", "Attention", "com.microsoft.FastGelu", "test.ops.Foo"})
      .summary("Identity where the target has guard Ifs, else Neg; Attention with `attention`; "
               "com.microsoft FastGelu with `contrib`; test.ops Foo with `own_domain`")
      .abstract_eval(same_aval);
}
