// lax_shape: JAX's shape primitives as ONNX Unsqueeze / Expand / Reshape /
// Squeeze / Transpose / Concat / Tile, and symbolic dims as runtime values.
//
// Output shapes come from the equation's output aval, which carries symbolic
// dims ("B", "2*B") exactly as the params do. A symbolic dim is never turned
// into an integer: target shapes are built with shape_value / dim_value, and
// Reshape's shape operand by the SDK's reshape idiom.
// A step that would be the identity emits no node.
//
// A complex operand is carried packed (float[..., 2], jaxonnx/complex.hpp):
// each primitive works on the packed avals with the trailing axis carried
// along (a broadcast dim, perm entry or rep of its own).
#include <jaxonnx/complex.hpp>
#include <jaxonnx/plugin.hpp>

#include <algorithm>
#include <string>

namespace {

using namespace jaxonnx::sdk;

// ------------------------------------------------------- broadcast_in_dim --

// broadcast_in_dim(x, shape, broadcast_dimensions): input axis i becomes
// output axis broadcast_dimensions[i] (strictly increasing); every other
// output axis is new; an input dim of 1 may stretch to the output dim.
// Unsqueeze the new axes, then Expand only the dims that actually stretch
// (the target shape holds 1 for dims that already match, so a symbolic dim
// already present in x needs no runtime value). When the new axes are all
// leading, Expand's numpy-style rank broadcasting inserts them itself.
void lower_broadcast_in_dim(Lowering& L) {
  Aval in = complex::packed(L.in_aval(0));
  Aval out = complex::packed(L.out_aval(0));
  std::vector<int64_t> bdims = L.param("broadcast_dimensions").as_ints();
  if (complex::is(L.in_aval(0).dtype)) bdims.push_back(out.rank() - 1);  // the packed parts
  const int64_t rank = out.rank();
  if (static_cast<int64_t>(bdims.size()) != in.rank())
    L.fail("broadcast_dimensions has " + std::to_string(bdims.size()) + " entries for an input of rank " +
           std::to_string(in.rank()));

  // The input's shape with the new axes inserted as 1s.
  Shape lifted(static_cast<size_t>(rank), Dim(1));
  std::vector<bool> is_old(static_cast<size_t>(rank), false);
  for (size_t i = 0; i < bdims.size(); ++i) {
    if (bdims[i] < 0 || bdims[i] >= rank) L.fail("broadcast dimension out of range");
    lifted[static_cast<size_t>(bdims[i])] = in.shape[i];
    is_old[static_cast<size_t>(bdims[i])] = true;
  }
  std::vector<int64_t> new_axes;
  for (int64_t a = 0; a < rank; ++a)
    if (!is_old[static_cast<size_t>(a)]) new_axes.push_back(a);

  bool needs_expand = lifted != out.shape;
  bool new_axes_leading = true;
  for (size_t i = 0; i < new_axes.size(); ++i) new_axes_leading &= new_axes[i] == static_cast<int64_t>(i);

  Value x = L.input(0);
  if (!new_axes.empty() && !(needs_expand && new_axes_leading)) {
    x = L.op("Unsqueeze", {x, i64s(L, new_axes)}, in.with_shape(lifted));
  }
  if (needs_expand) {
    Shape target;
    for (int64_t a = 0; a < rank; ++a) {
      const Dim& have = lifted[static_cast<size_t>(a)];
      const Dim& want = out.shape[static_cast<size_t>(a)];
      target.push_back(have == want ? Dim(1) : want);
    }
    x = L.op("Expand", {x, shape_value(L, target)}, out);
  }
  L.bind(0, x);
}

// ---------------------------------------------------------------- reshape --

// reshape(x, new_sizes, dimensions=None): the SDK's reshape idiom, which
// picks Reshape's shape codes (0 / -1) or runtime dims with allowzero.
//
// With `dimensions` (jnp.column_stack, dstack and vmapped convolutions emit
// it) the operand is first transposed to that order, as lax defines it.
void lower_reshape(Lowering& L) {
  Aval in = complex::packed(L.in_aval(0));
  Aval out = complex::packed(L.out_aval(0));
  Value x = L.input(0);
  if (L.has_param("dimensions") && !L.param("dimensions").is_none()) {
    std::vector<int64_t> perm = L.param("dimensions").as_ints();
    bool identity = true;
    for (size_t i = 0; i < perm.size(); ++i) identity = identity && perm[i] == static_cast<int64_t>(i);
    if (!identity) {
      if (complex::is(L.in_aval(0).dtype)) perm.push_back(static_cast<int64_t>(perm.size()));
      Shape t;
      for (int64_t p : perm) t.push_back(in.shape[static_cast<size_t>(p)]);
      in = in.with_shape(t);
      x = L.op("Transpose", {x}, in, {Attr::ints("perm", perm)});
    }
  }
  L.bind(0, reshape(L, x, in, out));
}

// ---------------------------------------------------------------- squeeze --

// squeeze(x, dimensions): drops size-1 axes. Squeeze takes axes as an input
// (opset 13+).
void lower_squeeze(Lowering& L) {
  Aval in = L.in_aval(0);
  std::vector<int64_t> axes = L.axes_param("dimensions", in.rank());
  Value x = L.input(0);
  if (axes.empty()) {
    L.bind(0, x);
    return;
  }
  std::sort(axes.begin(), axes.end());
  L.bind(0, L.op("Squeeze", {x, i64s(L, axes)}, complex::packed(L.out_aval(0))));
}

// -------------------------------------------------------------- transpose --

// Axes of static size 1 carry no data, so only the order of the other axes
// matters. When they keep their order, the transpose moves no data: one
// Reshape (free in onnxruntime, and folded into neighbouring reshapes). Else
// the size-1 axes are squeezed out around a Transpose of lower rank:
// onnxruntime's Transpose walks a size-1 axis element by element
// ([B, 2, 1024, 1, 4] by (0, 1, 4, 3, 2) takes 10x the time of [B, 2, 1024, 4]
// by (0, 1, 3, 2), onnxruntime 1.31 CPU), and Squeeze/Unsqueeze cost nothing.
void lower_transpose(Lowering& L) {
  std::vector<int64_t> perm = L.param("permutation").as_ints();
  Aval in = complex::packed(L.in_aval(0));
  if (complex::is(L.in_aval(0).dtype)) perm.push_back(in.rank() - 1);  // the packed parts stay last
  Aval out = complex::packed(L.out_aval(0));
  auto unit = [](const Dim& d) { return d.is_static() && d.value == 1; };
  std::vector<int64_t> kept, squeezed, unsqueezed, rank_of(perm.size(), -1);
  for (size_t a = 0; a < perm.size(); ++a) {
    if (unit(in.shape[a])) squeezed.push_back(static_cast<int64_t>(a));
    else rank_of[a] = static_cast<int64_t>(kept.size()), kept.push_back(static_cast<int64_t>(a));
  }
  std::vector<int64_t> reduced;
  for (size_t j = 0; j < perm.size(); ++j) {
    if (rank_of[static_cast<size_t>(perm[j])] < 0) unsqueezed.push_back(static_cast<int64_t>(j));
    else reduced.push_back(rank_of[static_cast<size_t>(perm[j])]);
  }
  bool moves_data = false;
  for (size_t i = 0; i < reduced.size(); ++i) moves_data = moves_data || reduced[i] != static_cast<int64_t>(i);
  if (squeezed.empty() || !moves_data) {
    L.bind(0, squeezed.empty() ? transpose(L, L.input(0), in, perm) : reshape(L, L.input(0), in, out));
    return;
  }
  Shape small;
  for (int64_t a : kept) small.push_back(in.shape[static_cast<size_t>(a)]);
  Value x = L.op("Squeeze", {L.input(0), i64s(L, squeezed)}, in.with_shape(small));
  x = transpose(L, x, in.with_shape(small), reduced);
  L.bind(0, L.op("Unsqueeze", {x, i64s(L, unsqueezed)}, out));
}

// ------------------------------------------------------------------ stack --

// stack(xs..., axis): every operand gains a size-1 axis at `axis`, then one
// Concat along it (a single operand needs only the Unsqueeze).
void lower_stack(Lowering& L) {
  Value axis = i64s(L, {L.param("axis").as_int()});
  Aval out = complex::packed(L.out_aval(0));
  std::vector<Value> parts;
  for (size_t i = 0; i < L.num_inputs(); ++i) {
    Shape s = complex::packed(L.in_aval(i)).shape;
    s.insert(s.begin() + L.param("axis").as_int(), Dim(1));
    parts.push_back(L.op("Unsqueeze", {L.input(i), axis}, out.with_shape(s)));
  }
  L.bind(0, parts.size() == 1 ? parts[0]
                              : L.op("Concat", parts, out, {Attr::i("axis", L.param("axis").as_int())}));
}

// ------------------------------------------------------------------- tile --

// tile(x, reps): JAX has already given x one axis per rep, as Tile needs.
// Reps of all ones is the identity.
void lower_tile(Lowering& L) {
  Shape reps = L.param("reps").as_dims();
  if (complex::is(L.in_aval(0).dtype)) reps.push_back(Dim(1));  // the packed parts
  bool identity = std::all_of(reps.begin(), reps.end(), [](const Dim& d) { return d == Dim(1); });
  Value x = L.input(0);
  L.bind(0, identity ? x : L.op("Tile", {x, shape_value(L, reps)}, complex::packed(L.out_aval(0))));
}

// ----------------------------------------------------------- dim_as_value --

// dim_as_value(dim): a symbolic dim ("B", "2*B") as a scalar of the output
// dtype, e.g. the element count jnp.mean divides by. Computed from the
// runtime shape; never an integer fixed at conversion time.
void lower_dim_as_value(Lowering& L) {
  Aval out = L.out_aval(0);
  Value d = dim_value(L, L.param("dim").as_dim());  // int64[1]
  Value scalar = L.op("Squeeze", {d, i64s(L, {0})}, Aval(dtype::i64, {}));
  L.bind(0, cast(L, scalar, Aval(dtype::i64, {}), out.dtype));
}

}  // namespace

JAXONNX_PLUGIN("lax_shape", "0.1.0") {
  plugin.primitive("broadcast_in_dim", lower_broadcast_in_dim)
      .emits({"Unsqueeze", "Expand"})
      .emits_shape_ops()
      .doc(onnx_doc("Expand"));
  plugin.primitive("reshape", lower_reshape)
      .emits({"Reshape", "Transpose"})
      .emits_shape_ops()
      .doc(onnx_doc("Reshape"));
  plugin.primitive("squeeze", lower_squeeze).emits({"Squeeze"}).doc(onnx_doc("Squeeze"));
  plugin.primitive("transpose", lower_transpose)
      .emits({"Transpose", "Reshape", "Squeeze", "Unsqueeze"})
      .emits_shape_ops()
      .doc(onnx_doc("Transpose"));
  plugin.primitive("stack", lower_stack).emits({"Unsqueeze", "Concat"}).doc(onnx_doc("Concat"));
  plugin.primitive("tile", lower_tile).emits({"Tile"}).emits_shape_ops().doc(onnx_doc("Tile"));
  plugin.primitive("dim_as_value", lower_dim_as_value)
      .emits({"Squeeze", "Cast"})
      .emits_shape_ops()
      .summary("a symbolic dim as a runtime scalar");
}
