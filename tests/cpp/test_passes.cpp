// The optimizer passes on hand-built IR: each rewrite, and each case a pass
// must refuse. Numerics are checked end to end by the Python tests.
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "jaxonnx/core/converter.hpp"
#include "jaxonnx/core/passes.hpp"

#include "graph_builders.hpp"

using namespace jaxonnx;
namespace passes = jaxonnx::passes;
using namespace jaxonnx::test;

namespace {

void run(ir::Graph& g, std::unique_ptr<passes::Pass> pass) {
  passes::Pipeline p;
  p.push_back(std::move(pass));
  p.push_back(passes::dead_code_elimination());
  passes::PassManager(std::move(p)).run(g);
}

std::vector<float> floats_of(const Tensor& t) {
  std::vector<float> v(t.nbytes / 4);
  std::memcpy(v.data(), t.data, t.nbytes);
  return v;
}
std::vector<int64_t> ints_of(const Tensor& t) {
  std::vector<int64_t> v(t.nbytes / 8);
  std::memcpy(v.data(), t.data, t.nbytes);
  return v;
}

const Aval kB3 = f32({S("B"), N(3)});
const Aval k3B = f32({N(3), S("B")});

}  // namespace

TEST_CASE("no-op elimination removes Identity, same-type Cast/Expand, identity Transpose") {
  GraphBuilder b;
  ir::ValueId x = b.input(kB3, "x");
  ir::ValueId shape = b.ints({1, 3});
  ir::Attribute to = int_attr("to", JXO_DTYPE_FLOAT32);
  ir::ValueId a = b.op("Identity", {x}, kB3);
  ir::ValueId c = b.op("Cast", {a}, kB3, {to});
  ir::ValueId t = b.transpose(c, {0, 1});
  ir::ValueId e = b.op("Expand", {t}, kB3);
  b.g.nodes.back().inputs.push_back(shape);
  ir::ValueId r = b.op("Relu", {e}, kB3);
  b.output(r, "out");
  run(b.g, passes::no_op_elimination());
  REQUIRE(b.g.nodes.size() == 1);
  CHECK(b.g.nodes[0].op_type == "Relu");
  CHECK(b.g.nodes[0].inputs[0] == x);
  CHECK(b.g.initializers.empty());
}

TEST_CASE("no-op elimination: Squeeze/Unsqueeze pairs cancel, Reshape chains collapse") {
  GraphBuilder b;
  ir::ValueId x = b.input(kB3, "x");
  ir::ValueId axes = b.ints({1});
  ir::ValueId u = b.op("Unsqueeze", {x, axes}, f32({S("B"), N(1), N(3)}));
  ir::ValueId s = b.op("Squeeze", {u, axes}, kB3);
  ir::ValueId r1 = b.op("Reshape", {s, b.ints({3, -1})}, k3B);
  ir::ValueId r2 = b.op("Reshape", {r1, b.ints({-1})}, f32({S("3*B")}));
  b.output(r2, "out");
  run(b.g, passes::no_op_elimination());
  REQUIRE(b.g.nodes.size() == 1);
  CHECK(b.g.nodes[0].op_type == "Reshape");
  CHECK(b.g.nodes[0].inputs[0] == x);
  CHECK(b.g.nodes[0].outputs[0] == r2);
}

TEST_CASE("no-op elimination collapses a Reshape whose shape has a 0 by spelling out its type") {
  GraphBuilder b;
  ir::ValueId x = b.input(f32({N(2), N(3)}), "x");
  ir::ValueId r1 = b.op("Reshape", {x, b.ints({6, 1})}, f32({N(6), N(1)}));
  // 0 copies r1's first dim (6); read from x it would copy 2: the shape becomes [6, 1, 1].
  ir::ValueId r2 = b.op("Reshape", {r1, b.ints({0, 1, 1})}, f32({N(6), N(1), N(1)}));
  b.output(b.op("Relu", {r2}, f32({N(6), N(1), N(1)})), "out");
  run(b.g, passes::no_op_elimination());
  CHECK(b.producer(r2)->inputs[0] == x);
  const ir::ValueId shape = b.producer(r2)->inputs[1];
  const Tensor* t = nullptr;
  for (const ir::Initializer& init : b.g.initializers)
    if (init.value == shape) t = init.tensor.get();
  REQUIRE(t != nullptr);
  CHECK(ints_of(*t) == std::vector<int64_t>{6, 1, 1});
}

TEST_CASE("no-op elimination refuses to collapse a Reshape whose 0s its type cannot spell out") {
  GraphBuilder b;
  ir::ValueId x = b.input(f32({S("B"), S("T"), N(4)}), "x");
  ir::ValueId r1 = b.op("Reshape", {x, b.ints({0, 0, 2, 2})}, f32({S("B"), S("T"), N(2), N(2)}));
  // Two symbolic dims: no constant shape without a 0 gives [B, T, 1, 4].
  ir::ValueId r2 = b.op("Reshape", {r1, b.ints({0, 0, 1, 4})}, f32({S("B"), S("T"), N(1), N(4)}));
  b.output(b.op("Relu", {r2}, f32({S("B"), S("T"), N(1), N(4)})), "out");
  run(b.g, passes::no_op_elimination());
  CHECK(b.count_op("Reshape") == 2);
  CHECK(b.producer(r2)->inputs[0] == r1);
}

TEST_CASE("no-op elimination keeps graph outputs and their names") {
  GraphBuilder b;
  ir::ValueId x = b.input(kB3, "x");
  b.output(b.op("Identity", {x}, kB3), "copy");  // an input cannot be renamed
  ir::ValueId r = b.op("Relu", {x}, kB3);
  ir::ValueId out = b.op("Identity", {r}, kB3);
  b.output(out, "out");
  ir::ValueId n = b.op("Neg", {r}, kB3);  // another reader of r
  b.output(n, "neg");
  run(b.g, passes::no_op_elimination());
  CHECK(b.count_op("Identity") == 1);  // the copy of the input stays
  const ir::Node* relu = b.producer(out);
  REQUIRE(relu);
  CHECK(relu->op_type == "Relu");  // Relu now writes the named output
  CHECK(b.g.values[out].name == "out");
  CHECK(b.producer(n)->inputs[0] == out);
  CHECK(b.g.outputs == std::vector<ir::ValueId>{b.g.outputs[0], out, n});
}

TEST_CASE("transpose folding cancels a pair across an elementwise chain") {
  // x.T + 1 then .T, then relu: no Transpose left, intermediate types un-permuted.
  GraphBuilder b;
  ir::ValueId x = b.input(kB3, "x");
  ir::ValueId one = b.floats({1.f}, {});
  ir::ValueId t = b.transpose(x, {1, 0});
  ir::ValueId a = b.op("Add", {t, one}, k3B);
  ir::ValueId e = b.op("Exp", {a}, k3B);
  ir::ValueId back = b.transpose(e, {1, 0});
  b.output(b.op("Relu", {back}, kB3), "out");
  run(b.g, passes::transpose_folding());
  CHECK(b.count_op("Transpose") == 0);
  REQUIRE(b.g.nodes.size() == 3);
  CHECK(b.g.nodes[0].inputs[0] == x);
  CHECK(b.g.values[a].type.str() == "float32[B,3]");
  CHECK(b.g.nodes[2].inputs[0] == e);
}

TEST_CASE("transpose folding permutes a constant operand read only by the chain") {
  GraphBuilder b;
  ir::ValueId x = b.input(f32({N(2), N(3)}), "x");
  ir::ValueId c = b.floats({0, 1, 2, 3, 4, 5}, {3, 2});  // laid out like x.T
  ir::ValueId t = b.transpose(x, {1, 0});
  ir::ValueId m = b.op("Mul", {c, t}, f32({N(3), N(2)}));
  b.output(b.transpose(m, {1, 0}), "out");
  run(b.g, passes::transpose_folding());
  CHECK(b.count_op("Transpose") == 0);
  REQUIRE(b.g.initializers.size() == 1);
  const Tensor& k = *b.g.initializers[0].tensor;
  CHECK(k.dims == std::vector<int64_t>{2, 3});
  CHECK(floats_of(k) == std::vector<float>{0, 2, 4, 1, 3, 5});
  CHECK(b.g.values[b.g.outputs[0]].name == "out");
  CHECK(b.producer(b.g.outputs[0])->op_type == "Mul");
}

TEST_CASE("transpose folding refuses a branching consumer") {
  GraphBuilder b;
  ir::ValueId x = b.input(kB3, "x");
  ir::ValueId t = b.transpose(x, {1, 0});
  ir::ValueId e = b.op("Exp", {t}, k3B);
  b.output(b.transpose(e, {1, 0}), "out");
  b.output(b.op("Neg", {e}, k3B), "other");  // e is read twice
  run(b.g, passes::transpose_folding());
  CHECK(b.count_op("Transpose") == 2);
}

namespace {
// x: float32[2,3,4] -> Transpose(first) -> middle -> Transpose(second) -> out,
// after transpose folding.
GraphBuilder fold_transposes_around(std::vector<int64_t> first, const char* middle,
                                    std::vector<int64_t> second,
                                    std::vector<ir::Attribute> attrs = {}) {
  GraphBuilder b;
  ir::ValueId t = b.transpose(b.input(f32({2, 3, 4}), "x"), std::move(first));
  ir::ValueId m = b.op(middle, {t}, b.g.values[t].type, std::move(attrs));
  b.output(b.transpose(m, std::move(second)), "out");
  run(b.g, passes::transpose_folding());
  return b;
}
}  // namespace

TEST_CASE("transpose folding refuses a non-elementwise op in the middle") {
  GraphBuilder b = fold_transposes_around({0, 2, 1}, "Softmax", {0, 2, 1}, {int_attr("axis", -1)});
  CHECK(b.count_op("Transpose") == 2);
}

TEST_CASE("transpose folding refuses permutations that do not cancel across a chain") {
  GraphBuilder b = fold_transposes_around({1, 0, 2}, "Relu", {0, 2, 1});
  CHECK(b.count_op("Transpose") == 2);
}

TEST_CASE("transpose folding merges back-to-back Transposes") {
  GraphBuilder b;
  ir::ValueId x = b.input(f32({N(2), N(3), N(4)}), "x");
  ir::ValueId t = b.transpose(x, {1, 0, 2});
  b.output(b.transpose(t, {0, 2, 1}), "out");
  run(b.g, passes::transpose_folding());
  REQUIRE(b.g.nodes.size() == 1);
  CHECK(b.g.nodes[0].inputs[0] == x);
  // out[i] = x[p[q[i]]] with p = (1,0,2), q = (0,2,1)
  CHECK(b.g.nodes[0].attrs[0].ints == std::vector<int64_t>{1, 2, 0});
}

TEST_CASE("transpose folding reads past a Transpose that others read too") {
  GraphBuilder b;
  ir::ValueId x = b.input(f32({N(2), N(3), N(4)}), "x");
  ir::ValueId t = b.transpose(x, {1, 0, 2});
  b.output(b.op("Relu", {t}, f32({N(3), N(2), N(4)})), "other");
  b.output(b.op("Neg", {b.transpose(t, {1, 0, 2})}, f32({N(2), N(3), N(4)})), "undone");
  b.output(b.op("Neg", {b.transpose(t, {0, 2, 1})}, f32({N(3), N(4), N(2)})), "moved");
  run(b.g, passes::transpose_folding());
  CHECK(b.count_op("Transpose") == 2);  // t for the Relu; one Transpose(x) for "moved"
  for (const ir::Node& n : b.g.nodes) {
    if (n.op_type == "Neg" && b.g.values[n.outputs[0]].name == "undone") CHECK(n.inputs[0] == x);
    if (n.op_type == "Transpose" && n.inputs[0] == x && n.outputs[0] != t)
      CHECK(n.attrs[0].ints == std::vector<int64_t>{1, 2, 0});
  }
}

TEST_CASE("transpose folding sinks two equal Transposes below a binary op") {
  GraphBuilder b;
  ir::ValueId x = b.input(kB3, "x"), y = b.input(kB3, "y");
  ir::ValueId s = b.op("Sub", {b.transpose(x, {1, 0}), b.transpose(y, {1, 0})}, k3B);
  b.output(s, "out");
  run(b.g, passes::transpose_folding());
  REQUIRE(b.g.nodes.size() == 2);
  CHECK(b.g.nodes[0].op_type == "Sub");
  CHECK(b.g.nodes[0].inputs == std::vector<ir::ValueId>{x, y});
  CHECK(b.g.values[b.g.nodes[0].outputs[0]].type.str() == "float32[B,3]");
  CHECK(b.g.nodes[1].op_type == "Transpose");
  CHECK(b.g.nodes[1].outputs[0] == s);
}

TEST_CASE("transpose folding squeezes before a Transpose, which then folds with the next") {
  // The decode step's attention output: [B, 2, 4, 1, 64] by (0, 1, 4, 2, 3),
  // squeezed, then transposed back: no Transpose is left.
  GraphBuilder b;
  ir::ValueId x = b.input(f32({S("B"), N(2), N(4), N(1), N(64)}), "x");
  ir::ValueId t = b.transpose(x, {0, 1, 4, 2, 3});
  ir::ValueId s = b.op("Squeeze", {t, b.ints({4})}, f32({S("B"), N(2), N(64), N(4)}));
  b.output(b.transpose(s, {0, 1, 3, 2}), "out");
  run(b.g, passes::transpose_folding());
  CHECK(b.count_op("Transpose") == 0);
  REQUIRE(b.count_op("Squeeze") == 1);
  for (const ir::Node& n : b.g.nodes) {
    if (n.op_type != "Squeeze") continue;
    CHECK(n.inputs[0] == x);
    CHECK(b.g.values[n.outputs[0]].name == "out");
    CHECK(b.g.values[n.outputs[0]].type.str() == "float32[B,2,4,64]");
  }
  // Squeezing the moved axis of [2, 3, 1] by (2, 0, 1) leaves (0, 1): no Transpose.
  GraphBuilder c;
  ir::ValueId y = c.input(f32({N(2), N(3), N(1)}), "y");
  c.output(c.op("Squeeze", {c.transpose(y, {2, 0, 1}), c.ints({0})}, f32({N(2), N(3)})), "out");
  run(c.g, passes::transpose_folding());
  CHECK(c.count_op("Transpose") == 0);
  // A Reshape that only drops the size-1 axis is that Squeeze (the decode step's query).
  GraphBuilder r;
  ir::ValueId q = r.input(f32({S("B"), N(1), N(2), N(4), N(64)}), "q");
  ir::ValueId qt = r.transpose(q, {0, 2, 4, 1, 3});
  r.output(r.op("Reshape", {qt, r.ints({-1, 2, 64, 4})}, f32({S("B"), N(2), N(64), N(4)})), "out");
  run(r.g, passes::transpose_folding());
  CHECK(r.count_op("Reshape") == 0);
  REQUIRE(r.count_op("Transpose") == 1);
  for (const ir::Node& n : r.g.nodes) {
    if (n.op_type == "Squeeze") CHECK(r.g.values[n.outputs[0]].type.str() == "float32[B,2,4,64]");
    if (n.op_type == "Transpose") CHECK(n.attrs[0].ints == std::vector<int64_t>{0, 1, 3, 2});
  }
  // A Transpose left after the Squeeze: [4, 1, 3] by (2, 1, 0), axis 1 dropped -> (1, 0).
  GraphBuilder d;
  ir::ValueId z = d.input(f32({N(4), N(1), N(3)}), "z");
  d.output(d.op("Squeeze", {d.transpose(z, {2, 1, 0}), d.ints({-2})}, f32({N(3), N(4)})), "out");
  run(d.g, passes::transpose_folding());
  REQUIRE(d.count_op("Transpose") == 1);
  for (const ir::Node& n : d.g.nodes) {
    if (n.op_type == "Squeeze") CHECK(d.g.values[n.outputs[0]].type.str() == "float32[4,3]");
    if (n.op_type == "Transpose") CHECK(n.attrs[0].ints == std::vector<int64_t>{1, 0});
  }
}

TEST_CASE("deduplication merges equal nodes, constants and initializers, not random ones") {
  GraphBuilder b;
  ir::ValueId x = b.input(kB3, "x");
  ir::ValueId c1 = b.floats({2.f}, {}), c2 = b.floats({2.f}, {});
  ir::ValueId m1 = b.op("Mul", {x, c1}, kB3), m2 = b.op("Mul", {x, c2}, kB3);
  ir::ValueId r1 = b.op("RandomNormalLike", {x}, kB3), r2 = b.op("RandomNormalLike", {x}, kB3);
  ir::ValueId s1 = b.op("Add", {m1, r1}, kB3), s2 = b.op("Add", {m2, r2}, kB3);
  b.output(b.op("Sub", {s1, s2}, kB3), "out");
  run(b.g, passes::deduplication());
  CHECK(b.g.initializers.size() == 1);
  CHECK(b.count_op("Mul") == 1);
  CHECK(b.count_op("RandomNormalLike") == 2);
  CHECK(b.count_op("Add") == 2);
}

TEST_CASE("constant folding evaluates static shape arithmetic within the caps") {
  // Reshape(x, concat(shape(x)[1:2] * 1, unsqueeze(shape(x)[0]))): all static.
  GraphBuilder b;
  ir::ValueId x = b.input(f32({N(4), N(6)}), "x");
  ir::ValueId shape = b.op("Shape", {x}, i64({N(2)}));
  ir::ValueId d0 = b.op("Gather", {shape, b.ints({0}, {})}, i64({}), {int_attr("axis", 0)});
  ir::ValueId d1 = b.op("Slice", {shape, b.ints({1}), b.ints({2})}, i64({N(1)}));
  ir::ValueId same = b.op("Mul", {d1, b.ints({1}, {})}, i64({N(1)}));
  ir::ValueId col = b.op("Unsqueeze", {d0, b.ints({0})}, i64({N(1)}));
  ir::ValueId target = b.op("Concat", {same, col}, i64({N(2)}), {int_attr("axis", 0)});
  b.output(b.op("Reshape", {x, target}, f32({N(6), N(4)})), "out");
  run(b.g, passes::constant_folding());
  REQUIRE(b.g.nodes.size() == 1);
  CHECK(b.g.nodes[0].inputs[1] == target);
  REQUIRE(b.g.initializers.size() == 1);
  CHECK(ints_of(*b.g.initializers[0].tensor) == std::vector<int64_t>{6, 4});
}

TEST_CASE("constant folding clamps int constants with Max / Min") {
  // A gather's constant starts clamped to [0, dim - size]: Min(Max(starts, 0), hi).
  GraphBuilder b;
  ir::ValueId x = b.input(f32({S("B"), N(10)}), "x");
  ir::ValueId lo = b.op("Max", {b.ints({-3, 4, 9}), b.ints({0}, {})}, i64({N(3)}));
  ir::ValueId starts = b.op("Min", {lo, b.ints({5, 5, 5})}, i64({N(3)}));
  b.output(b.op("Gather", {x, starts}, f32({S("B"), N(3)}), {int_attr("axis", 1)}), "out");
  run(b.g, passes::constant_folding());
  CHECK(b.count_op("Max") == 0);
  CHECK(b.count_op("Min") == 0);
  REQUIRE(b.g.nodes.size() == 1);
  bool found = false;
  for (const auto& init : b.g.initializers)
    if (init.value == b.g.nodes[0].inputs[1]) {
      found = true;
      CHECK(ints_of(*init.tensor) == std::vector<int64_t>{0, 4, 5});
    }
  CHECK(found);
}

TEST_CASE("constant folding casts int constants between int32 and int64, wrapping as the runtime") {
  // An int32 index meeting Shape's int64: Slice starts = Cast(const), ends = starts + dim.
  GraphBuilder b;
  ir::ValueId x = b.input(f32({S("T"), N(3)}), "x");
  std::vector<int32_t> one = {1};
  ir::ValueId start32 = b.constant(Tensor::copy_of(JXO_DTYPE_INT32, {1}, one.data(), 4));
  ir::ValueId start = b.op("Cast", {start32}, i64({N(1)}), {int_attr("to", JXO_DTYPE_INT64)});
  ir::ValueId big = b.op("Cast", {b.ints({(int64_t{1} << 32) + 5})}, Aval(JXO_DTYPE_INT32, {N(1)}),
                         {int_attr("to", JXO_DTYPE_INT32)});
  b.output(b.op("Slice", {x, start, b.ints({2}), b.ints({0})}, f32({N(1), N(3)})), "out");
  b.output(b.op("Neg", {big}, Aval(JXO_DTYPE_INT32, {N(1)})), "wrapped");
  run(b.g, passes::constant_folding());
  CHECK(b.count_op("Cast") == 0);
  int found = 0;
  for (const auto& init : b.g.initializers) {
    if (init.value == start) {
      ++found;
      CHECK(init.tensor->dtype == JXO_DTYPE_INT64);
      CHECK(ints_of(*init.tensor) == std::vector<int64_t>{1});
    }
    if (init.value == big) {
      ++found;
      REQUIRE(init.tensor->dtype == JXO_DTYPE_INT32);
      int32_t v = 0;
      std::memcpy(&v, init.tensor->data, 4);
      CHECK(v == 5);
    }
  }
  CHECK(found == 2);
}

TEST_CASE("constant folding joins a Concat of constants only it reads, not a shared one") {
  GraphBuilder b;
  ir::ValueId x = b.input(f32({S("B"), N(2)}), "x");
  ir::ValueId w1 = b.floats({1, 2, 3, 4}, {2, 2}), w2 = b.floats({5, 6}, {2, 1});
  ir::ValueId w = b.op("Concat", {w1, w2}, f32({N(2), N(3)}), {int_attr("axis", 1)});
  b.output(b.op("MatMul", {x, w}, f32({S("B"), N(3)})), "out");
  ir::ValueId s1 = b.floats({7, 8}, {2}), s2 = b.floats({9}, {1});
  ir::ValueId joined = b.op("Concat", {s1, s2}, f32({N(3)}), {int_attr("axis", 0)});
  b.output(b.op("Neg", {joined}, f32({N(3)})), "joined");
  b.output(b.op("Neg", {s1}, f32({N(2)})), "shared");  // s1 read elsewhere: the Concat stays
  run(b.g, passes::constant_folding());
  CHECK(b.count_op("Concat") == 1);
  bool found = false;
  for (const auto& init : b.g.initializers)
    if (init.value == w) {
      found = true;
      CHECK(init.tensor->dims == std::vector<int64_t>{2, 3});
      CHECK(floats_of(*init.tensor) == std::vector<float>{1, 2, 5, 3, 4, 6});
    }
  CHECK(found);
}

TEST_CASE("constant folding turns a reshaped constant into an initializer of that shape") {
  GraphBuilder b;
  ir::ValueId x = b.input(kB3, "x");
  ir::ValueId bias = b.floats({1, 2, 3}, {3});
  ir::ValueId row = b.op("Reshape", {bias, b.ints({1, 3})}, f32({N(1), N(3)}));
  b.output(b.op("Add", {x, row}, kB3), "out");
  run(b.g, passes::constant_folding());
  REQUIRE(b.g.nodes.size() == 1);
  REQUIRE(b.g.initializers.size() == 1);
  CHECK(b.g.initializers[0].value == row);
  CHECK(b.g.initializers[0].tensor->dims == std::vector<int64_t>{1, 3});
  CHECK(floats_of(*b.g.initializers[0].tensor) == std::vector<float>{1, 2, 3});
}

TEST_CASE("constant folding reads the static dims of a symbolic Shape, not the others") {
  GraphBuilder b;
  ir::ValueId x = b.input(f32({S("B"), N(6)}), "x");
  ir::ValueId shape = b.op("Shape", {x}, i64({N(2)}));
  ir::ValueId six = b.op("Gather", {shape, b.ints({1}, {})}, i64({}));
  ir::ValueId batch = b.op("Gather", {shape, b.ints({0}, {})}, i64({}));
  ir::ValueId tail = b.op("Slice", {shape, b.ints({1}), b.ints({2})}, i64({N(1)}));
  b.output(b.op("Add", {six, batch}, i64({})), "sum");
  b.output(b.op("Neg", {tail}, i64({N(1)})), "tail");
  run(b.g, passes::constant_folding());
  CHECK(b.count_op("Shape") == 1);
  CHECK(b.count_op("Gather") == 1);  // the batch dim stays symbolic
  CHECK(b.count_op("Slice") == 0);
  bool found = false;
  for (const ir::Initializer& i : b.g.initializers)
    if (i.value == six) found = ints_of(*i.tensor) == std::vector<int64_t>{6};
  CHECK(found);
}

TEST_CASE("constant folding refuses symbolic shapes and results over the cap") {
  GraphBuilder b;
  ir::ValueId x = b.input(kB3, "x");
  ir::ValueId shape = b.op("Shape", {x}, i64({N(2)}));
  std::vector<int64_t> big(600, 1);
  ir::ValueId a = b.ints(big);
  ir::ValueId cat = b.op("Concat", {a, a}, i64({N(1200)}), {int_attr("axis", 0)});
  b.output(shape, "shape");
  b.output(b.op("Neg", {cat}, i64({N(1200)})), "big");
  run(b.g, passes::constant_folding());
  CHECK(b.count_op("Shape") == 1);
  CHECK(b.count_op("Concat") == 1);
}

TEST_CASE("dead code elimination drops dead nodes, initializers and captures") {
  GraphBuilder b;
  ir::ValueId x = b.input(kB3, "x"), cond = b.input(Aval(JXO_DTYPE_BOOL, {}), "cond");
  ir::ValueId unused = b.floats({1.f}, {});
  b.op("Neg", {x, unused}, kB3);  // dead
  auto body = std::make_shared<ir::Graph>();
  ir::ValueId inner_x = body->add_value("x_inner"), inner_dead = body->add_value("dead_inner");
  body->captures = {{inner_x, x}, {inner_dead, unused}};
  body->outputs = {inner_x};
  ir::Attribute branch{"then_branch", ir::kAttrGraph};
  branch.graph = body;
  ir::Attribute other = branch;  // both branches the same body
  other.name = "else_branch";
  ir::ValueId y = b.value(kB3, "y");
  b.g.nodes.push_back(ir::Node{"if", "If", "", {cond}, {y}, {branch, other}});
  b.output(y, "y");
  prune(b.g);
  CHECK(b.g.nodes.size() == 1);
  CHECK(b.g.initializers.empty());
  REQUIRE(body->captures.size() == 1);
  CHECK(body->captures[0].outer == x);
}

TEST_CASE("passes run inside subgraphs, and a replaced outer value updates captures") {
  GraphBuilder b;
  ir::ValueId x = b.input(kB3, "x"), cond = b.input(Aval(JXO_DTYPE_BOOL, {}), "cond");
  ir::ValueId id = b.op("Identity", {x}, kB3);
  auto body = std::make_shared<ir::Graph>();
  ir::ValueId inner = body->add_value("cap");
  body->captures = {{inner, id}};
  ir::ValueId i1 = body->add_value("i1"), i2 = body->add_value("i2");
  for (ir::ValueId v : {inner, i1, i2}) body->values[v].has_type = true, body->values[v].type = kB3;
  body->nodes.push_back(ir::Node{"inner_id", "Identity", "", {inner}, {i1}, {}});
  body->nodes.push_back(ir::Node{"inner_relu", "Relu", "", {i1}, {i2}, {}});
  body->outputs = {i2};
  ir::Attribute branch{"then_branch", ir::kAttrGraph};
  branch.graph = body;
  ir::ValueId y = b.value(kB3, "y");
  b.g.nodes.push_back(ir::Node{"if", "If", "", {cond}, {y}, {branch}});
  b.output(y, "y");
  passes::PassManager(passes::default_pipeline()).run(b.g);
  CHECK(b.count_op("Identity") == 0);
  CHECK(body->captures[0].outer == x);
  REQUIRE(body->nodes.size() == 1);
  CHECK(body->nodes[0].inputs[0] == inner);
  CHECK(ir::to_text(b.g).find("inner_relu") != std::string::npos);
}

namespace {
// Claims a change every time: the manager must stop at its round cap.
struct Restless : passes::Pass {
  int* runs;
  explicit Restless(int* r) : runs(r) {}
  const char* name() const override { return "restless"; }
  passes::Properties needs() const override { return {}; }
  passes::Properties guarantees() const override { return {}; }
  bool run(ir::Graph&) override { return ++*runs > 0; }
};
}  // namespace

TEST_CASE("the manager stops at a fixed point or at the round cap, and dumps every run") {
  GraphBuilder b;
  ir::ValueId x = b.input(kB3, "x");
  b.output(b.op("Relu", {b.op("Identity", {x}, kB3)}, kB3), "out");
  auto dir = std::filesystem::temp_directory_path() / "jaxonnx_test_passes_dump";
  std::filesystem::remove_all(dir);
  passes::ManagerOptions options;
  options.dump_dir = dir.string();
  int rounds = passes::PassManager(passes::default_pipeline(), options).run(b.g);
  CHECK(rounds == 2);  // one round changes, the next confirms
  CHECK(std::filesystem::exists(dir / "000_r1_before_noop.txt"));
  CHECK(std::filesystem::exists(dir / "001_r1_after_noop.txt"));
  std::filesystem::remove_all(dir);

  int runs = 0;
  passes::Pipeline p;
  p.push_back(std::make_unique<Restless>(&runs));
  passes::ManagerOptions capped;
  capped.max_rounds = 3;
  CHECK(passes::PassManager(std::move(p), capped).run(b.g) == 3);
  CHECK(runs == 3);
}

TEST_CASE("the manager counts each pass's nodes removed and seconds once per pass over many graphs") {
  ConversionFacts facts;
  std::vector<std::pair<std::string, double>> seconds;
  passes::ManagerOptions options;
  options.facts = &facts;
  options.pass_seconds = &seconds;
  passes::PassManager manager(passes::default_pipeline(), options);
  for (int k = 0; k < 2; ++k) {  // two graphs: one function body and the main graph, say
    GraphBuilder b;
    ir::ValueId x = b.input(kB3, "x");
    b.output(b.op("Relu", {b.op("Identity", {b.op("Identity", {x}, kB3)}, kB3)}, kB3), "out");
    manager.run(b.g);
    REQUIRE(b.g.nodes.size() == 1);
  }
  std::vector<std::string> names;
  int64_t removed = 0, noop = 0;
  for (const auto& [name, n] : facts.pass_nodes_removed) {
    names.push_back(name);
    removed += n;
    if (name == "noop") noop = n;
  }
  CHECK(names.size() == passes::default_pipeline().size());  // one entry per pass
  CHECK(seconds.size() == names.size());
  CHECK(noop == 4);
  CHECK(removed == 4);
}

TEST_CASE("optimizing twice gives the same graph") {
  auto build = [] {
    GraphBuilder b;
    ir::ValueId x = b.input(kB3, "x");
    ir::ValueId t = b.transpose(x, {1, 0});
    ir::ValueId a = b.op("Relu", {t}, k3B), c = b.op("Relu", {t}, k3B);
    b.output(b.op("Add", {a, c}, k3B), "out");
    return b;
  };
  GraphBuilder one = build(), two = build();
  ir::Model m1, m2;
  m1.graph = std::move(one.g);
  m2.graph = std::move(two.g);
  passes::optimize(m1);
  passes::optimize(m2);
  std::string text = ir::to_text(m1.graph);
  CHECK(text == ir::to_text(m2.graph));
  CHECK(m1.graph.nodes.size() == 3);  // Transpose, one Relu, Add
  passes::optimize(m1);
  CHECK(ir::to_text(m1.graph) == text);
}

TEST_CASE("deduplication refuses graph outputs, subgraph holders and other domains") {
  GraphBuilder b;
  ir::ValueId x = b.input(kB3, "x");
  b.output(b.op("Relu", {x}, kB3), "first");
  b.output(b.op("Relu", {x}, kB3), "second");  // a named output: stays
  ir::ValueId c1 = b.op("call", {x}, kB3), c2 = b.op("call", {x}, kB3);
  b.g.nodes[2].domain = b.g.nodes[3].domain = "jaxonnx.functions";  // opaque call sites
  b.output(b.op("Add", {c1, c2}, kB3), "calls");
  run(b.g, passes::deduplication());
  CHECK(b.count_op("Relu") == 2);
  CHECK(b.count_op("call") == 2);
}

TEST_CASE("transpose folding keeps one Transpose when both ends are interface values") {
  // in -> T -> T -> out: the output needs a node, so a single (identity) Transpose stays.
  GraphBuilder b;
  ir::ValueId x = b.input(kB3, "x");
  b.output(b.transpose(b.transpose(x, {1, 0}), {1, 0}), "out");
  run(b.g, passes::transpose_folding());
  REQUIRE(b.g.nodes.size() == 1);
  CHECK(b.g.nodes[0].inputs[0] == x);
  CHECK(b.g.nodes[0].attrs[0].ints == std::vector<int64_t>{0, 1});
  CHECK(b.g.values[b.g.nodes[0].outputs[0]].name == "out");
}

TEST_CASE("constant folding handles skipped optional inputs and keeps graph outputs") {
  GraphBuilder b;
  ir::ValueId data = b.ints({5, 6, 7, 8});
  ir::ValueId s = b.op("Slice", {data, b.ints({-3}), b.ints({100}), ir::kNoValue, b.ints({2})},
                       i64({N(2)}));
  b.output(b.op("Neg", {s}, i64({N(2)})), "neg");
  ir::ValueId kept = b.op("Add", {data, data}, i64({N(4)}));
  b.output(kept, "sum");  // an output: folding it would make an initializer the output
  run(b.g, passes::constant_folding());
  CHECK(b.count_op("Slice") == 0);
  CHECK(b.count_op("Add") == 1);
  bool found = false;
  for (const ir::Initializer& i : b.g.initializers)
    if (i.value == s) found = ints_of(*i.tensor) == std::vector<int64_t>{6, 8};
  CHECK(found);
}

TEST_CASE("constant folding moves a transposed or sliced constant that nothing else reads") {
  // A conv kernel HWIO -> OIHW, then flipped along its spatial axes.
  GraphBuilder b;
  ir::ValueId x = b.input(f32({N(2), N(3)}), "x");
  ir::ValueId w = b.floats({1, 2, 3, 4, 5, 6}, {2, 3});
  ir::ValueId wt = b.transpose(w, {1, 0});  // [[1, 4], [2, 5], [3, 6]]
  ir::ValueId flipped = b.op("Slice", {wt, b.ints({-1}), b.ints({INT64_MIN}), b.ints({0}),
                                       b.ints({-1})},
                             f32({N(3), N(2)}));  // [[3, 6], [2, 5], [1, 4]]
  ir::ValueId strided = b.op("Slice", {flipped, b.ints({0, 1}), b.ints({INT64_MAX, 2}),
                                       b.ints({0, 1}), b.ints({2, 1})},
                             f32({N(2), N(1)}));  // [[6], [4]]
  b.output(b.op("MatMul", {x, flipped}, f32({N(2), N(2)})), "out");
  b.output(b.op("Add", {x, strided}, f32({N(2), N(3)})), "out2");
  run(b.g, passes::constant_folding());
  // The Transpose folds, then the flip of its result; `flipped` is read twice
  // (MatMul and the strided Slice), so that Slice stays: it would duplicate.
  CHECK(b.count_op("Transpose") == 0);
  CHECK(b.count_op("Slice") == 1);
  const ir::Initializer* moved = nullptr;
  for (const ir::Initializer& init : b.g.initializers)
    if (init.value == flipped) moved = &init;
  REQUIRE(moved);
  CHECK(moved->tensor->dims == std::vector<int64_t>{3, 2});
  CHECK(floats_of(*moved->tensor) == std::vector<float>{3, 6, 2, 5, 1, 4});

  // Read once each: both Slices fold too.
  GraphBuilder c;
  ir::ValueId y = c.input(f32({N(2), N(1)}), "y");
  ir::ValueId v = c.floats({1, 2, 3, 4, 5, 6}, {3, 2});
  ir::ValueId flip = c.op("Slice", {v, c.ints({-1}), c.ints({INT64_MIN}), c.ints({0}), c.ints({-1})},
                          f32({N(3), N(2)}));
  ir::ValueId every_other = c.op("Slice", {flip, c.ints({0, 1}), c.ints({INT64_MAX, 2}),
                                           c.ints({0, 1}), c.ints({2, 1})},
                                 f32({N(2), N(1)}));
  c.output(c.op("Add", {y, every_other}, f32({N(2), N(1)})), "out");
  run(c.g, passes::constant_folding());
  REQUIRE(c.g.nodes.size() == 1);
  REQUIRE(c.g.initializers.size() == 1);
  CHECK(c.g.initializers[0].tensor->dims == std::vector<int64_t>{2, 1});
  CHECK(floats_of(*c.g.initializers[0].tensor) == std::vector<float>{6, 2});
}

// ------------------------------------------------------------- token rows --

namespace {

// The rank of `v`'s type.
size_t rank_of(const ir::Graph& g, ir::ValueId v) { return g.values[v].type.dims.size(); }

// The dims of the int64 constant that node `n` reads as its shape.
std::vector<int64_t> reshape_codes(const ir::Graph& g, const ir::Node& n) {
  for (const ir::Initializer& init : g.initializers)
    if (init.value == n.inputs[1]) return ints_of(*init.tensor);
  return {};
}

}  // namespace

TEST_CASE("token rows: a transformer MLP over [B, 4, 8] runs on [-1, 8] rows") {
  GraphBuilder b;
  const Aval x_t = f32({S("B"), N(4), N(8)}), h_t = f32({S("B"), N(4), N(16)});
  ir::ValueId x = b.input(x_t, "x");
  ir::ValueId ln = b.op("LayerNormalization", {x, b.floats(std::vector<float>(8, 1.f), {8}),
                                               b.floats(std::vector<float>(8, 0.f), {8})}, x_t,
                        {int_attr("axis", 2)});  // the last axis by number: 1 on rows
  ir::ValueId h = b.op("MatMul", {ln, b.floats(std::vector<float>(128, 0.5f), {8, 16})}, h_t);
  h = b.op("Add", {h, b.floats(std::vector<float>(16, 1.f), {1, 1, 16})}, h_t);  // a row constant
  h = b.op("Gelu", {h}, h_t);
  ir::ValueId y = b.op("MatMul", {h, b.floats(std::vector<float>(128, 0.5f), {16, 8})}, x_t);
  ir::ValueId out = b.op("Add", {x, y}, x_t);  // the residual: x enters the region once
  b.output(out, "out");
  run(b.g, passes::token_rows());
  // One Reshape of x to rows, one of the result back; every other node on rows.
  CHECK(b.count_op("Reshape") == 2);
  for (const ir::Node& n : b.g.nodes) {
    CAPTURE(n.op_type);
    if (n.op_type == "Reshape") continue;
    CHECK(rank_of(b.g, n.outputs[0]) == 2);
  }
  const ir::Node* last = b.producer(out);
  REQUIRE(last != nullptr);
  CHECK(last->op_type == "Reshape");
  CHECK(reshape_codes(b.g, *last) == std::vector<int64_t>{-1, 4, 8});
  CHECK(b.g.values[out].name == "out");
  CHECK(b.g.values[out].type.dims == x_t.dims);
  for (const ir::Node& n : b.g.nodes)
    if (n.op_type == "Add" && n.inputs[1] != ir::kNoValue && rank_of(b.g, n.inputs[1]) == 1)
      CHECK(b.g.values[n.inputs[1]].type.dims == std::vector<Dim>{N(16)});  // [1, 1, 16] as [16]
  for (const ir::Node& n : b.g.nodes)
    if (n.op_type == "LayerNormalization") CHECK(n.attrs.at(0).i == -1);
  CHECK(passes::no_rows_to_flatten(23).violation(b.g).empty());
  passes::verify(b.g, "after rows");
}

TEST_CASE("token rows reshapes a value read outside its region back under its own id") {
  GraphBuilder b;
  const Aval x_t = f32({S("B"), N(4), N(8)});
  ir::ValueId x = b.input(x_t, "x");
  ir::ValueId q = b.op("MatMul", {x, b.floats(std::vector<float>(64, 0.5f), {8, 8})}, x_t);
  q = b.op("Add", {q, b.floats(std::vector<float>(8, 1.f), {8})}, x_t);
  ir::ValueId t = b.transpose(q, {0, 2, 1});  // not row-wise: reads q as [B, 4, 8]
  b.output(b.op("Relu", {q}, x_t), "rows");
  b.output(t, "t");
  run(b.g, passes::token_rows());
  const ir::Node* back = b.producer(q);
  REQUIRE(back != nullptr);
  CHECK(back->op_type == "Reshape");
  CHECK(rank_of(b.g, back->inputs[0]) == 2);
  CHECK(b.producer(t)->inputs[0] == q);
  passes::verify(b.g, "after rows");
}

TEST_CASE("token rows leaves alone a region with no MatMul + Add, or two symbolic dims at opset 13") {
  auto untouched = [](const Aval& x_t, bool matmul, bool add, int64_t opset) {
    GraphBuilder b;
    ir::ValueId x = b.input(x_t, "x");
    ir::ValueId y = matmul ? b.op("MatMul", {x, b.floats(std::vector<float>(64, 0.5f), {8, 8})}, x_t)
                           : b.op("Relu", {x}, x_t);
    if (add) y = b.op("Add", {y, b.floats({1.f}, {})}, x_t);
    b.output(y, "out");
    const std::vector<std::string> before = b.ops();
    run(b.g, passes::token_rows(opset));
    CHECK(b.ops() == before);
  };
  untouched(f32({S("B"), N(4), N(8)}), false, true, 23);   // no MatMul
  untouched(f32({S("B"), N(4), N(8)}), true, false, 23);   // a MatMul alone: one GEMM either way
  untouched(f32({S("B"), S("T"), N(8)}), true, true, 13);  // the way back would need allowzero
}

TEST_CASE("token rows leaves a MatMul writing a graph output in the output's shape (an LM head)") {
  GraphBuilder b;
  const Aval x_t = f32({S("B"), N(4), N(8)}), v_t = f32({S("B"), N(4), N(16)});
  ir::ValueId x = b.input(x_t, "x");
  ir::ValueId h = b.op("MatMul", {x, b.floats(std::vector<float>(64, 0.5f), {8, 8})}, x_t);
  h = b.op("Add", {h, x}, x_t);  // a region worth flattening
  h = b.op("RMSNormalization", {h, b.floats(std::vector<float>(8, 1.f), {8})}, x_t);
  ir::ValueId logits = b.op("MatMul", {h, b.floats(std::vector<float>(128, 0.5f), {8, 16})}, v_t);
  b.output(logits, "logits");
  run(b.g, passes::token_rows(23));
  const ir::Node* head = b.producer(logits);
  REQUIRE(head != nullptr);
  CHECK(head->op_type == "MatMul");  // no Reshape (a copy) between the product and the output
  CHECK(rank_of(b.g, head->inputs[0]) == 3);
  const ir::Node* back = b.producer(head->inputs[0]);  // the norm's rows reshaped back
  REQUIRE(back != nullptr);
  CHECK(back->op_type == "Reshape");
  CHECK(b.producer(back->inputs[0])->op_type == "RMSNormalization");
  CHECK(rank_of(b.g, back->inputs[0]) == 2);
  CHECK(passes::no_rows_to_flatten(23).violation(b.g).empty());
  passes::verify(b.g, "after rows");
}

TEST_CASE("token rows over [B, T, X] reshape back to a shape read at run time, 0s allowed") {
  GraphBuilder b;
  const Aval x_t = f32({S("B"), S("T"), N(8)}), y_t = f32({S("B"), S("T"), N(4)});
  ir::ValueId x = b.input(x_t, "x");
  ir::ValueId h = b.op("MatMul", {x, b.floats(std::vector<float>(64, 0.5f), {8, 8})}, x_t);
  h = b.op("Add", {h, x}, x_t);  // the residual
  b.output(h, "same_width");
  ir::ValueId y = b.op("MatMul", {h, b.floats(std::vector<float>(32, 0.5f), {8, 4})}, y_t);
  y = b.op("Add", {y, b.floats(std::vector<float>(4, 1.f), {4})}, y_t);
  b.output(y, "narrower");
  run(b.g, passes::token_rows(23));
  // [B, T, 8] is x's own shape; [B, T, 4] is its first two dims and 4.
  CHECK(b.ops() == std::vector<std::string>{"Reshape", "MatMul", "Add", "Shape", "Reshape", "MatMul", "Add",
                                            "Slice", "Concat", "Reshape"});
  for (ir::ValueId out : {h, y}) {
    const ir::Node* back = b.producer(out);
    REQUIRE(back != nullptr);
    CHECK(back->op_type == "Reshape");
    REQUIRE(back->attrs.size() == 1);
    CHECK((back->attrs[0].name == "allowzero" && back->attrs[0].i == 1));
  }
  CHECK(b.g.values[b.g.nodes[1].outputs[0]].type.dims == std::vector<Dim>{S("(B)*(T)"), N(8)});
  passes::verify(b.g, "after rows");
}
