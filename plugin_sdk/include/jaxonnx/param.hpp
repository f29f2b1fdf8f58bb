// jaxonnx plugin SDK: Param, a typed read-only view of an equation's params
// (the params dict, NamedTuple / dataclass records, lists, nested jaxprs).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "jaxonnx/plugin_abi.h"
#include "jaxonnx/types.hpp"

namespace jaxonnx::sdk {

// A read-only view of a param tree node. Accessors throw Error naming the
// param when the kind does not fit.
class Param {
 public:
  Param(const jxo_api* api, const jxo_param* p, std::string path)
      : api_(api), p_(p), path_(std::move(path)) {}

  int32_t kind() const { return api_->param_kind(p_); }
  bool exists() const { return p_ != nullptr; }
  bool is_none() const { return kind() == JXO_PARAM_NONE; }
  const std::string& path() const { return path_; }

  bool as_bool() const { expect(JXO_PARAM_BOOL, JXO_PARAM_INT, "a bool"); return api_->param_int(p_) != 0; }
  int64_t as_int() const { expect(JXO_PARAM_INT, JXO_PARAM_BOOL, "an int"); return api_->param_int(p_); }
  double as_float() const { expect(JXO_PARAM_FLOAT, JXO_PARAM_INT, "a float"); return api_->param_float(p_); }
  int32_t as_dtype() const { expect(JXO_PARAM_DTYPE, JXO_PARAM_DTYPE, "a dtype"); return static_cast<int32_t>(api_->param_int(p_)); }
  std::string as_string() const {
    expect(JXO_PARAM_STRING, JXO_PARAM_SYMBOL, "a string");
    return std::string(from_jxo(api_->param_string(p_)));
  }
  // A dim: an int or a symbolic expression.
  Dim as_dim() const {
    if (kind() == JXO_PARAM_SYMBOL) return Dim::sym(std::string(from_jxo(api_->param_string(p_))));
    return Dim(as_int());
  }

  size_t size() const { expect(JXO_PARAM_LIST, JXO_PARAM_RECORD, "a list"); return api_->param_size(p_); }
  Param operator[](size_t i) const {
    return Param(api_, api_->param_at(p_, i), path_ + "[" + std::to_string(i) + "]");
  }
  std::vector<Param> items() const {
    std::vector<Param> out;
    size_t n = size();
    for (size_t i = 0; i < n; ++i) out.push_back((*this)[i]);
    return out;
  }
  std::vector<int64_t> as_ints() const {
    std::vector<int64_t> out;
    for (const Param& p : items()) out.push_back(p.as_int());
    return out;
  }
  Shape as_dims() const {
    Shape out;
    for (const Param& p : items()) out.push_back(p.as_dim());
    return out;
  }
  // A record field (NamedTuple / dataclass / the params dict itself).
  Param field(std::string_view key) const {
    expect(JXO_PARAM_RECORD, JXO_PARAM_RECORD, "a record");
    return Param(api_, api_->param_field(p_, to_jxo(key)), path_ + "." + std::string(key));
  }
  bool has(std::string_view key) const {
    return kind() == JXO_PARAM_RECORD && api_->param_field(p_, to_jxo(key)) != nullptr;
  }
  const jxo_jaxpr* as_jaxpr() const {
    expect(JXO_PARAM_JAXPR, JXO_PARAM_JAXPR, "a jaxpr");
    return api_->param_jaxpr(p_);
  }

 private:
  void expect(int32_t k1, int32_t k2, const char* what) const {
    if (!p_) throw Error("param '" + path_ + "' is missing");
    int32_t k = kind();
    if (k != k1 && k != k2) {
      throw Error("param '" + path_ + "' is " + describe(k) + ", expected " + what +
                  (k == JXO_PARAM_SYMBOL ? " (this lowering needs it static, not shape-dependent)"
                                         : ""));
    }
  }
  // What a param of kind `k` is, in words (for messages).
  std::string describe(int32_t k) const {
    switch (k) {
      case JXO_PARAM_NONE: return "None";
      case JXO_PARAM_BOOL: return "a bool";
      case JXO_PARAM_INT: return "an int";
      case JXO_PARAM_FLOAT: return "a float";
      case JXO_PARAM_STRING: return "a string";
      case JXO_PARAM_DTYPE: return "a dtype";
      case JXO_PARAM_SYMBOL:
        return "the symbolic dim expression '" + std::string(from_jxo(api_->param_string(p_))) + "'";
      case JXO_PARAM_LIST: return "a list";
      case JXO_PARAM_RECORD: return "a record";
      case JXO_PARAM_JAXPR: return "a jaxpr";
      case JXO_PARAM_OPAQUE: return "a " + std::string(from_jxo(api_->param_string(p_)));
      default: return "of kind " + std::to_string(k);
    }
  }
  const jxo_api* api_;
  const jxo_param* p_;
  std::string path_;
};

}  // namespace jaxonnx::sdk
