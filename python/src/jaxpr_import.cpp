#include "jaxpr_import.hpp"

#include <pybind11/numpy.h>

#include <string>

#include "jaxonnx/core/error.hpp"
#include "jaxonnx/dtypes.hpp"

namespace jaxonnx::py {

JaxprImporter::JaxprImporter() {
  pb::module_ core = pb::module_::import("jax.extend.core");
  literal_type_ = core.attr("Literal");
  closed_type_ = core.attr("ClosedJaxpr");
  jaxpr_type_ = core.attr("Jaxpr");
  dropvar_type_ = core.attr("DropVar");
  primitive_type_ = core.attr("Primitive");
  pb::module_ np = pb::module_::import("numpy");
  np_asarray_ = np.attr("asarray");
  np_dtype_type_ = np.attr("dtype");
  np_generic_ = np.attr("generic");
  is_symbolic_ = pb::module_::import("jax.export").attr("is_symbolic_dim");
  pb::module_ dc = pb::module_::import("dataclasses");
  dataclass_fields_ = dc.attr("fields");
  is_dataclass_ = dc.attr("is_dataclass");
  enum_type_ = pb::module_::import("enum").attr("Enum");
  // Typed PRNG keys: the policy is jaxonnx._keys'; see key_layout.
  key_data_layout_ = pb::module_::import("jaxonnx._keys").attr("key_data_layout");
  key_data_ = pb::module_::import("jax.random").attr("key_data");
  reference_type_ = pb::module_::import("jaxonnx._reference").attr("Reference");
  pb::module_ sharding = pb::module_::import("jax.sharding");
  mesh_types_ = pb::make_tuple(sharding.attr("Mesh"), sharding.attr("AbstractMesh"));
  sorted_ = pb::module_::import("builtins").attr("sorted");
  str_ = pb::module_::import("builtins").attr("str");
}

// A typed PRNG key reaches the core as its key data, laid out as
// jaxonnx._keys.key_data_layout says (the one place of the key policy): a key
// array of shape S is key data of shape S + trailing. Keys it does not map keep
// an undefined dtype. Asked for every variable, so the answer is kept per dtype
// object.
const JaxprImporter::KeyLayout& JaxprImporter::key_layout(pb::handle dt) {
  static const KeyLayout kNone;
  if (pb::isinstance(dt, np_dtype_type_)) return kNone;
  auto it = key_layouts_.find(dt.ptr());
  if (it != key_layouts_.end()) return it->second;
  KeyLayout layout;
  pb::object answer = key_data_layout_(dt);
  if (!answer.is_none()) {
    pb::tuple t = answer.cast<pb::tuple>();
    layout.mapped = true;
    layout.data_dtype = np_dtype_type_(t[0]);
    for (pb::handle d : t[1].cast<pb::tuple>()) layout.trailing.push_back(d.cast<int64_t>());
  }
  keepalive_.push_back(pb::reinterpret_borrow<pb::object>(dt));
  return key_layouts_.emplace(dt.ptr(), std::move(layout)).first->second;
}

int32_t JaxprImporter::dtype(pb::handle dt_in) {
  auto it = dtypes_.find(dt_in.ptr());  // most calls pass a dtype object seen before
  if (it != dtypes_.end()) return it->second;
  pb::object dt = np_dtype_type_(dt_in);
  it = dtypes_.find(dt.ptr());
  if (it != dtypes_.end()) return it->second;
  std::string name = pb::str(dt.attr("name"));
  const dtypes::Info* info = dtypes::find(std::string_view(name));
  int32_t out = info && info->code != JXO_DTYPE_STRING ? info->code : JXO_DTYPE_UNDEFINED;
  keepalive_.push_back(dt);
  dtypes_[dt.ptr()] = out;
  return out;
}

// A symbolic dim's text ("B", "2*B"); JAX's str() of one is slow, and the
// same dim object recurs in most avals.
const std::string& JaxprImporter::symbol(pb::handle d) {
  auto it = symbols_.find(d.ptr());
  if (it != symbols_.end()) return it->second;
  keepalive_.push_back(pb::reinterpret_borrow<pb::object>(d));
  return symbols_.emplace(d.ptr(), pb::str(d).cast<std::string>()).first->second;
}

Aval JaxprImporter::aval(pb::handle a) {
  Aval out;
  pb::object dt = a.attr("dtype");
  const KeyLayout& key = key_layout(dt);
  out.dtype = dtype(key.mapped ? key.data_dtype : dt);
  for (pb::handle d : a.attr("shape")) {
    if (PyLong_Check(d.ptr())) out.dims.push_back(Dim{d.cast<int64_t>(), {}});
    else out.dims.push_back(Dim{0, symbol(d)});
  }
  for (int64_t d : key.trailing) out.dims.push_back(Dim{d, {}});  // the key data's trailing dims
  return out;
}

std::shared_ptr<const Tensor> JaxprImporter::array(pb::handle value, pb::handle dt) {
  // np.asarray shares memory with a CPU jax.Array: no copy. The Tensor keeps
  // the NumPy array alive; its release takes the GIL. A typed key constant
  // becomes its uint32 key data.
  pb::object v = pb::reinterpret_borrow<pb::object>(value);
  pb::object d = pb::reinterpret_borrow<pb::object>(dt);
  if (const KeyLayout& key = key_layout(d); key.mapped) {
    v = key_data_(v);
    d = key.data_dtype;
  }
  pb::array arr = pb::array::ensure(np_asarray_(v, d), pb::array::c_style);
  if (!arr) throw pb::value_error("cannot view a constant as a C-contiguous array");
  auto t = std::make_shared<Tensor>();
  t->dtype = dtype(arr.attr("dtype"));
  for (pb::ssize_t k = 0; k < arr.ndim(); ++k) t->dims.push_back(arr.shape(k));
  t->data = arr.data();
  t->nbytes = static_cast<size_t>(arr.nbytes());
  auto* held = new pb::object(arr);
  t->owner = std::shared_ptr<const void>(held, [](const void* p) {
    pb::gil_scoped_acquire gil;
    delete static_cast<const pb::object*>(p);
  });
  return t;
}

Atom JaxprImporter::atom(pb::handle a) {
  Atom out;
  if (pb::isinstance(a, literal_type_)) {
    pb::object av = a.attr("aval");
    out.aval = aval(av);
    out.literal = array(a.attr("val"), av.attr("dtype"));
    return out;
  }
  if (pb::isinstance(a, dropvar_type_)) out.dropped = true;
  auto it = vars_.find(a.ptr());
  if (it == vars_.end()) {
    int64_t id = static_cast<int64_t>(vars_.size());
    it = vars_.emplace(a.ptr(), std::make_pair(id, aval(a.attr("aval")))).first;
    keepalive_.push_back(pb::reinterpret_borrow<pb::object>(a));
  }
  out.var = it->second.first;
  out.aval = it->second.second;
  return out;
}

// An int param. One above int64's max but within uint64 (a uint64 gather's
// fill_value, 2**64 - 1) crosses as its two's-complement bits: the plugin
// reading it knows the dtype and casts back exactly (int64 -> uint64 wraps).
// One outside both ranges cannot cross and is refused by name.
Param JaxprImporter::int_param(pb::handle v) {
  Param p;
  p.kind = JXO_PARAM_INT;
  int overflow = 0;
  const long long s = PyLong_AsLongLongAndOverflow(v.ptr(), &overflow);
  if (overflow == 0) {
    p.i = static_cast<int64_t>(s);
    return p;
  }
  if (overflow > 0) {
    const unsigned long long u = PyLong_AsUnsignedLongLong(v.ptr());
    if (!PyErr_Occurred()) {
      p.i = static_cast<int64_t>(static_cast<uint64_t>(u));
      return p;
    }
    PyErr_Clear();
  }
  throw ConversionError("an integer parameter " + pb::str(v).cast<std::string>() +
                        " does not fit 64 bits (int64 or uint64), so no plugin can read it");
}

Param JaxprImporter::param(pb::handle v) {
  Param p;
  if (v.is_none()) return p;
  if (PyBool_Check(v.ptr())) { p.kind = JXO_PARAM_BOOL; p.i = v.ptr() == Py_True; return p; }
  if (PyLong_Check(v.ptr())) return int_param(v);
  if (PyFloat_Check(v.ptr())) { p.kind = JXO_PARAM_FLOAT; p.f = v.cast<double>(); return p; }
  if (PyUnicode_Check(v.ptr())) { p.kind = JXO_PARAM_STRING; p.s = v.cast<std::string>(); return p; }
  if (pb::isinstance(v, closed_type_)) {
    p.kind = JXO_PARAM_JAXPR;
    p.jaxpr = closed_jaxpr(v);
    return p;
  }
  if (pb::isinstance(v, jaxpr_type_)) {
    p.kind = JXO_PARAM_JAXPR;
    p.jaxpr = open_jaxpr(v, pb::tuple());
    return p;
  }
  if (pb::isinstance(v, reference_type_)) {  // its `closed`, imported if a lowering reads it
    p.kind = JXO_PARAM_JAXPR;
    p.jaxpr = deferred_jaxpr(v);
    return p;
  }
  if (pb::isinstance(v, np_dtype_type_) ||
      (PyType_Check(v.ptr()) && PyObject_IsSubclass(v.ptr(), np_generic_.ptr()) == 1)) {
    p.kind = JXO_PARAM_DTYPE;
    p.i = dtype(v);
    return p;
  }
  if (pb::isinstance(v, np_generic_)) return param(v.attr("item")());
  if (pb::isinstance<pb::tuple>(v) && pb::hasattr(v, "_fields")) {  // NamedTuple
    p.kind = JXO_PARAM_RECORD;
    pb::tuple fields = v.attr("_fields");
    for (size_t k = 0; k < fields.size(); ++k) {
      p.keys.push_back(pb::str(fields[k]));
      p.items.push_back(param(v.attr(fields[k])));
    }
    return p;
  }
  if (pb::isinstance<pb::tuple>(v) || pb::isinstance<pb::list>(v)) {
    p.kind = JXO_PARAM_LIST;
    for (pb::handle item : v) p.items.push_back(param(item));
    return p;
  }
  if (pb::isinstance<pb::dict>(v)) return params(pb::reinterpret_borrow<pb::dict>(v));
  // A set (shard_map's newly_manual_axes): a list, sorted so the order is the
  // same on every run.
  if (PyAnySet_Check(v.ptr())) return param(sorted_(v, pb::arg("key") = str_));
  // A device mesh (shard_map's): its axis names and sizes.
  if (PyObject_IsInstance(v.ptr(), mesh_types_.ptr()) == 1) {
    p.kind = JXO_PARAM_RECORD;
    p.keys = {"axis_names", "axis_sizes"};
    p.items.push_back(param(pb::tuple(v.attr("axis_names"))));
    p.items.push_back(param(pb::tuple(v.attr("axis_sizes"))));
    return p;
  }
  if (is_symbolic_(v).cast<bool>()) { p.kind = JXO_PARAM_SYMBOL; p.s = pb::str(v); return p; }
  if (!PyType_Check(v.ptr()) && is_dataclass_(v).cast<bool>()) {
    p.kind = JXO_PARAM_RECORD;
    for (pb::handle f : dataclass_fields_(v)) {
      pb::str name = f.attr("name");
      p.keys.push_back(name);
      p.items.push_back(param(v.attr(name)));
    }
    return p;
  }
  if (pb::isinstance(v, enum_type_)) { p.kind = JXO_PARAM_STRING; p.s = pb::str(v.attr("name")); return p; }
  // A primitive as a param (select_and_scatter_add's select_prim): its name.
  if (pb::isinstance(v, primitive_type_)) { p.kind = JXO_PARAM_STRING; p.s = pb::str(v.attr("name")); return p; }
  p.kind = JXO_PARAM_OPAQUE;
  p.s = pb::str(pb::type::handle_of(v).attr("__name__"));
  return p;
}

// The deferred jaxpr is made while the core runs (the GIL released) and must
// not throw through a plugin: a failure is kept for the caller and reads as
// no jaxpr. It holds the object by pointer (kept alive here), so copying it
// touches no Python refcount.
JaxprRef JaxprImporter::deferred_jaxpr(pb::handle reference) {
  keepalive_.push_back(pb::reinterpret_borrow<pb::object>(reference));
  PyObject* ref = reference.ptr();
  return JaxprRef::deferred([this, ref]() -> std::shared_ptr<const ClosedJaxpr> {
    pb::gil_scoped_acquire gil;
    try {
      return closed_jaxpr(pb::handle(ref).attr("closed"));
    } catch (...) {
      if (!deferred_error_) deferred_error_ = std::current_exception();
      return nullptr;
    }
  });
}

Param JaxprImporter::params(pb::dict d) {
  Param p;
  p.kind = JXO_PARAM_RECORD;
  for (auto [k, v] : d) {
    p.keys.push_back(pb::str(k));
    p.items.push_back(param(v));
  }
  return p;
}

std::shared_ptr<const ClosedJaxpr> JaxprImporter::open_jaxpr(pb::handle jaxpr, pb::handle consts) {
  auto cj = std::make_shared<ClosedJaxpr>();
  Jaxpr& j = cj->jaxpr;
  for (pb::handle v : jaxpr.attr("constvars")) j.constvars.push_back(atom(v));
  for (pb::handle v : jaxpr.attr("invars")) j.invars.push_back(atom(v));
  pb::list const_list = pb::module_::import("builtins").attr("list")(consts);
  if (const_list.size() != j.constvars.size())
    throw pb::value_error("a jaxpr has " + std::to_string(j.constvars.size()) +
                          " constvars but " + std::to_string(const_list.size()) + " consts");
  pb::list constvars = jaxpr.attr("constvars");
  for (size_t k = 0; k < const_list.size(); ++k)  // the constvar's dtype, not the value's
    cj->consts.push_back(array(const_list[k], constvars[k].attr("aval").attr("dtype")));
  pb::list eqns = jaxpr.attr("eqns");
  j.eqns.reserve(eqns.size());
  for (pb::handle e : eqns) {
    Eqn eqn;
    eqn.primitive = pb::str(e.attr("primitive").attr("name"));
    for (pb::handle a : e.attr("invars")) eqn.inputs.push_back(atom(a));
    for (pb::handle a : e.attr("outvars")) eqn.outputs.push_back(atom(a));
    try {
      eqn.params = params(e.attr("params"));
    } catch (const ConversionError& err) {  // name the equation
      throw ConversionError("'" + eqn.primitive + "': " + err.what());
    }
    eqn.source = static_cast<int64_t>(sources_.size());
    sources_.push_back(e.attr("source_info"));
    j.eqns.push_back(std::move(eqn));
  }
  for (pb::handle v : jaxpr.attr("outvars")) j.outvars.push_back(atom(v));
  return cj;
}

std::shared_ptr<const ClosedJaxpr> JaxprImporter::closed_jaxpr(pb::handle closed) {
  auto it = jaxprs_.find(closed.ptr());
  if (it != jaxprs_.end()) return it->second;
  auto cj = open_jaxpr(closed.attr("jaxpr"), closed.attr("consts"));
  keepalive_.push_back(pb::reinterpret_borrow<pb::object>(closed));
  jaxprs_[closed.ptr()] = cj;
  return cj;
}

}  // namespace jaxonnx::py
