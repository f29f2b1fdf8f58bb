// lax_sharding: what code written for a device mesh adds to a program. An
// ONNX model runs on one device, where each of these is (nearly) the identity:
//
//   reshard, sharding_constraint, layout_constraint
//       placement annotations (out_sharding=, with_sharding_constraint,
//       jax.sharding.reshard; reshard is what JAX once called mesh_cast):
//       each output is its input, no node.
//   shard_map
//       over mesh axes of size 1, each shard is the whole array: the body is
//       lowered inline, after its manual axes are recorded as bound
//       (jaxonnx/mesh_axes.hpp). A manual axis of size > 1 would run the body
//       once per device on a slice: refused.
//   pvary, psum_invariant, pbroadcast, ppermute, all_gather,
//       all_gather_invariant, reduce_scatter, all_to_all
//       collectives over bound (size-1) axes: a sum, gather, scatter or
//       permutation over one device is its operand, reshaped where JAX adds
//       or drops that axis of size 1 (all_gather untiled, say); a ppermute
//       whose perm sends nothing (a shift without wrap-around) gives zeros.
//   axis_index
//       the index along a size-1 axis: 0.
// psum / pmax / pmin over named axes are lax_reduction's (they also reduce
// positional axes). A collective over an axis no one-device shard_map bound
// fails, saying so.
#include <jaxonnx/plugin.hpp>

#include <string>
#include <vector>

namespace {

using namespace jaxonnx::sdk;

// n operands -> the same n values.
void lower_identity(Lowering& L) {
  if (L.num_inputs() != L.num_outputs())
    L.fail(std::string(L.primitive()) + ": " + std::to_string(L.num_inputs()) + " operands but " +
           std::to_string(L.num_outputs()) + " results");
  for (size_t i = 0; i < L.num_inputs(); ++i) L.bind(i, L.input(i));
}

// A collective over the axes named by param `axes_param`, all of size 1:
// operand i is result i, reshaped to its aval.
void lower_unit_collective(Lowering& L, const char* axes_param) {
  mesh_axes::require(L, L.param(axes_param));
  if (L.has_param("axis_index_groups") && !L.param("axis_index_groups").is_none())
    L.fail(std::string(L.primitive()) + ": param 'axis_index_groups' must be None");
  if (L.num_inputs() != L.num_outputs())
    L.fail(std::string(L.primitive()) + ": " + std::to_string(L.num_inputs()) + " operands but " +
           std::to_string(L.num_outputs()) + " results");
  for (size_t i = 0; i < L.num_inputs(); ++i) {
    Aval in = L.in_aval(i), out = L.out_aval(i);
    if (in.dtype != out.dtype)
      L.fail(std::string(L.primitive()) + ": operand " + in.str() + " but result " + out.str());
    L.bind(i, reshape(L, L.input(i), in, out));
  }
}

// ppermute over a size-1 axis: perm is ((0, 0),), the operand; or empty (a
// shift without wrap-around), where the device receives nothing: zeros.
void lower_ppermute(Lowering& L) {
  if (L.param("perm").size() > 0) return lower_unit_collective(L, "axis_name");
  mesh_axes::require(L, L.param("axis_name"));
  for (size_t i = 0; i < L.num_outputs(); ++i) {
    Aval out = L.out_aval(i);
    L.bind(i, L.op("Expand", {scalar(L, out.dtype, 0), shape_value(L, out.shape)}, out));
  }
}

void lower_axis_index(Lowering& L) {
  mesh_axes::require(L, L.param("axis_name"));
  L.bind(0, scalar(L, L.out_aval(0).dtype, 0));
}

// The mesh axes a shard_map makes manual (its body sees them per device):
// newly_manual_axes where JAX gives it, else every mesh axis not in `auto`.
std::vector<std::string> manual_axes(Lowering& L, const std::vector<std::string>& mesh_names) {
  if (L.has_param("newly_manual_axes")) return mesh_axes::names(L.param("newly_manual_axes"));
  std::vector<std::string> autos;
  if (L.has_param("auto")) autos = mesh_axes::names(L.param("auto"));
  std::vector<std::string> out;
  for (const std::string& n : mesh_names) {
    bool is_auto = false;
    for (const std::string& a : autos) is_auto = is_auto || a == n;
    if (!is_auto) out.push_back(n);
  }
  return out;
}

// shard_map(f, mesh, in_specs, out_specs)(args): on manual axes of size 1,
// f(args) itself.
void lower_shard_map(Lowering& L) {
  Param mesh = L.param("mesh");
  if (mesh.kind() != JXO_PARAM_RECORD || !mesh.has("axis_names") || !mesh.has("axis_sizes"))
    L.fail("shard_map: param 'mesh' is not a jax.sharding.Mesh or AbstractMesh");
  std::vector<std::string> names = mesh_axes::names(mesh.field("axis_names"));
  std::vector<int64_t> sizes = mesh.field("axis_sizes").as_ints();
  if (names.size() != sizes.size()) L.fail("shard_map: the mesh's axis names and sizes disagree");
  for (const std::string& axis : manual_axes(L, names)) {
    int64_t size = 0;
    for (size_t i = 0; i < names.size(); ++i)
      if (names[i] == axis) size = sizes[i];
    if (size != 1)
      L.fail("shard_map over mesh axis '" + axis + "' of size " + std::to_string(size) +
             ": the body would run on each of " + std::to_string(size) +
             " devices with its own shard, which one ONNX model (one device) cannot express; "
             "convert under a mesh whose shard_map axes have size 1 (jax.make_mesh((1,), ('" +
             axis + "',)))");
    mesh_axes::bind_unit(L, axis);
  }
  const jxo_jaxpr* body = L.param("jaxpr").as_jaxpr();
  if (L.api()->jaxpr_num_inputs(body) != L.num_inputs())
    L.fail("shard_map: the body takes " + std::to_string(L.api()->jaxpr_num_inputs(body)) +
           " inputs, the equation has " + std::to_string(L.num_inputs()));
  std::vector<Value> outs = L.inline_jaxpr(body, L.inputs());
  if (outs.size() != L.num_outputs())
    L.fail("shard_map: the body gives " + std::to_string(outs.size()) + " outputs, the equation has " +
           std::to_string(L.num_outputs()));
  for (size_t i = 0; i < outs.size(); ++i) L.bind(i, outs[i]);
}

}  // namespace

JAXONNX_PLUGIN("lax_sharding", "0.1.0") {
  for (const char* p : {"reshard", "sharding_constraint", "layout_constraint"}) {
    plugin.primitive(p, lower_identity).emits({}).summary("a placement annotation: its operand, no node");
  }
  plugin.primitive("shard_map", lower_shard_map)
      .emits({})
      .summary("its body inlined, when every manual mesh axis has size 1");
  struct Collective {
    const char* primitive;
    const char* axes;
  };
  for (Collective c : {Collective{"pvary", "axes"}, Collective{"psum_invariant", "axes"},
                       Collective{"pbroadcast", "axis_name"},
                       Collective{"all_gather", "axis_name"}, Collective{"all_gather_invariant", "axis_name"},
                       Collective{"reduce_scatter", "axis_name"}, Collective{"all_to_all", "axis_name"}}) {
    const char* axes = c.axes;
    plugin.primitive(c.primitive, [axes](Lowering& L) { lower_unit_collective(L, axes); })
        .emits({"Reshape"})
        .emits_shape_ops()
        .summary("over size-1 mesh axes inside shard_map: its operand (reshaped)");
  }
  plugin.primitive("ppermute", lower_ppermute)
      .emits({"Reshape", "Expand"})
      .emits_shape_ops()
      .summary("over a size-1 mesh axis inside shard_map: its operand, or zeros for an empty perm");
  plugin.primitive("axis_index", lower_axis_index)
      .emits({})
      .summary("along a size-1 mesh axis inside shard_map: 0");
}
