// Converts JAX's Python objects (ClosedJaxpr, avals, params) into the core's
// jaxpr model. Conversion only: no decisions about ops are made here.
#pragma once

#include <pybind11/pybind11.h>

#include <exception>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "jaxonnx/core/jaxpr.hpp"

namespace jaxonnx::py {

namespace pb = pybind11;

class JaxprImporter {
 public:
  JaxprImporter();
  std::shared_ptr<const ClosedJaxpr> closed_jaxpr(pb::handle closed);
  Aval aval(pb::handle aval);
  Param param(pb::handle value);
  Param int_param(pb::handle value);  // a Python int (uint64 values as their bits)
  Param params(pb::dict params);  // a RECORD, keys sorted as JAX gives them
  // The eqn.source_info objects, indexed by Eqn::source.
  const std::vector<pb::object>& sources() const { return sources_; }
  // The first error making a deferred jaxpr (a jaxonnx Reference) raised;
  // the lowering that asked for it only saw no jaxpr.
  std::exception_ptr deferred_error() const { return deferred_error_; }

 private:
  std::shared_ptr<const ClosedJaxpr> open_jaxpr(pb::handle jaxpr, pb::handle consts);
  JaxprRef deferred_jaxpr(pb::handle reference);
  Atom atom(pb::handle a);
  int32_t dtype(pb::handle dt);
  // How a typed PRNG key dtype reaches the core (jaxonnx._keys.key_data_layout):
  // its key data's dtype and trailing dims; `mapped` false for any other dtype.
  struct KeyLayout {
    bool mapped = false;
    pb::object data_dtype;
    std::vector<int64_t> trailing;
  };
  const KeyLayout& key_layout(pb::handle dt);
  const std::string& symbol(pb::handle d);
  std::shared_ptr<const Tensor> array(pb::handle value, pb::handle dtype);

  pb::object literal_type_, dropvar_type_, closed_type_, jaxpr_type_, np_asarray_,
      np_dtype_type_, np_generic_, is_symbolic_, dataclass_fields_, is_dataclass_, enum_type_,
      key_data_layout_, key_data_, primitive_type_, reference_type_, mesh_types_, sorted_, str_;
  // A var's id and aval (a var is read more often than it is made; its aval never changes).
  std::unordered_map<PyObject*, std::pair<int64_t, Aval>> vars_;
  std::unordered_map<PyObject*, std::string> symbols_;  // symbolic dim -> its text
  std::unordered_map<PyObject*, std::shared_ptr<const ClosedJaxpr>> jaxprs_;
  std::unordered_map<PyObject*, int32_t> dtypes_;
  std::unordered_map<PyObject*, KeyLayout> key_layouts_;
  std::vector<pb::object> sources_;
  std::vector<pb::object> keepalive_;  // objects whose ids key the maps above
  std::exception_ptr deferred_error_;
};

}  // namespace jaxonnx::py
