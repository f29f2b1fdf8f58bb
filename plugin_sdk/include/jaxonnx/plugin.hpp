// jaxonnx plugin SDK: a header-only C++17 layer over plugin_abi.h.
//
// A lowering is a plain function `void lower(jaxonnx::sdk::Lowering& L)` that
// may throw; the trampolines here catch everything at the boundary and turn it
// into a jxo_status, so no exception ever reaches the host.
//
//   JAXONNX_PLUGIN("my_plugin", "1.0.0") {
//     plugin.primitive("my.relu", lower_relu).emits({"Relu"});
//   }
#pragma once

#include <cctype>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "jaxonnx/kernels.hpp"
#include "jaxonnx/plugin_abi.h"
#include "jaxonnx/sdk_version.h"

#if defined(_WIN32)
#define JAXONNX_PLUGIN_EXPORT __declspec(dllexport)
#else
#define JAXONNX_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

namespace jaxonnx::sdk {

// ----------------------------------------------------------------- basics --

// Thrown by a lowering to fail it; the message reaches the user prefixed with
// the plugin and primitive names.
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline jxo_str to_jxo(std::string_view s) { return jxo_str{s.data(), s.size()}; }
inline std::string_view from_jxo(jxo_str s) {
  return s.size ? std::string_view(s.data, s.size) : std::string_view();
}

using Value = jxo_value;
constexpr Value kNoValue = JXO_NO_VALUE;

namespace dtype {
constexpr int32_t f32 = JXO_DTYPE_FLOAT32, f64 = JXO_DTYPE_FLOAT64, f16 = JXO_DTYPE_FLOAT16,
                  bf16 = JXO_DTYPE_BFLOAT16, i8 = JXO_DTYPE_INT8, i16 = JXO_DTYPE_INT16,
                  i32 = JXO_DTYPE_INT32, i64 = JXO_DTYPE_INT64, u8 = JXO_DTYPE_UINT8,
                  u16 = JXO_DTYPE_UINT16, u32 = JXO_DTYPE_UINT32, u64 = JXO_DTYPE_UINT64,
                  boolean = JXO_DTYPE_BOOL;
// Complex: carried in the IR as a real tensor with a trailing dim of 2 (see complex.hpp).
constexpr int32_t c64 = JXO_DTYPE_COMPLEX64, c128 = JXO_DTYPE_COMPLEX128;
inline bool is_complex(int32_t t) { return t == c64 || t == c128; }

inline bool is_float(int32_t t) { return t == f32 || t == f64 || t == f16 || t == bf16; }
inline bool is_signed_int(int32_t t) { return t == i8 || t == i16 || t == i32 || t == i64; }
inline bool is_unsigned_int(int32_t t) { return t == u8 || t == u16 || t == u32 || t == u64; }
inline bool is_int(int32_t t) { return is_signed_int(t) || is_unsigned_int(t); }

inline size_t itemsize(int32_t t) {
  switch (t) {
    case c128: return 16;
    case f64: case i64: case u64: case c64: return 8;
    case f32: case i32: case u32: return 4;
    case f16: case bf16: case i16: case u16: return 2;
    case i8: case u8: case boolean: return 1;
    default: return 0;
  }
}

inline const char* name(int32_t t) {
  switch (t) {
    case f32: return "float32"; case f64: return "float64"; case f16: return "float16";
    case bf16: return "bfloat16"; case i8: return "int8"; case i16: return "int16";
    case i32: return "int32"; case i64: return "int64"; case u8: return "uint8";
    case u16: return "uint16"; case u32: return "uint32"; case u64: return "uint64";
    case boolean: return "bool"; case c64: return "complex64"; case c128: return "complex128";
    default: return "unknown";
  }
}

template <typename T> constexpr int32_t of() {
  if constexpr (std::is_same_v<T, float>) return f32;
  else if constexpr (std::is_same_v<T, double>) return f64;
  else if constexpr (std::is_same_v<T, bool>) return boolean;
  else if constexpr (std::is_same_v<T, int8_t>) return i8;
  else if constexpr (std::is_same_v<T, int16_t>) return i16;
  else if constexpr (std::is_same_v<T, int32_t>) return i32;
  else if constexpr (std::is_same_v<T, int64_t>) return i64;
  else if constexpr (std::is_same_v<T, uint8_t>) return u8;
  else if constexpr (std::is_same_v<T, uint16_t>) return u16;
  else if constexpr (std::is_same_v<T, uint32_t>) return u32;
  else if constexpr (std::is_same_v<T, uint64_t>) return u64;
  else static_assert(sizeof(T) == 0, "no jaxonnx dtype for this C++ type");
}
}  // namespace dtype

// A dimension: static (`value`) or symbolic (`symbol`, e.g. "B" or "2*B").
struct Dim {
  int64_t value = 0;
  std::string symbol;

  Dim() = default;
  Dim(int64_t v) : value(v) {}  // NOLINT: implicit on purpose, dims read as ints
  static Dim sym(std::string s) { Dim d; d.symbol = std::move(s); return d; }
  bool is_static() const { return symbol.empty(); }
  bool operator==(const Dim& o) const {
    return is_static() ? (o.is_static() && value == o.value) : symbol == o.symbol;
  }
  bool operator!=(const Dim& o) const { return !(*this == o); }
  std::string str() const { return is_static() ? std::to_string(value) : symbol; }
};

using Shape = std::vector<Dim>;

inline std::string shape_str(const Shape& s) {
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + s[i].str();
  return out + (s.size() == 1 ? ",)" : ")");
}

// The ONNX operator page of `op`, for .doc().
inline std::string onnx_doc(std::string_view op) {
  return "https://onnx.ai/onnx/operators/onnx__" + std::string(op) + ".html";
}

// An owning abstract value (dtype + shape). rank() is -1 when unknown.
struct Aval {
  int32_t dtype = JXO_DTYPE_UNDEFINED;
  Shape shape;
  bool unknown_rank = false;

  Aval() = default;
  Aval(int32_t t, Shape s) : dtype(t), shape(std::move(s)) {}
  static Aval of_unknown_shape(int32_t t) { Aval a(t, {}); a.unknown_rank = true; return a; }
  static Aval from(const jxo_aval* a) {
    Aval out;
    if (!a) return out;
    out.dtype = a->dtype;
    if (a->rank < 0) { out.unknown_rank = true; return out; }
    out.shape.reserve(static_cast<size_t>(a->rank));
    for (int64_t i = 0; i < a->rank; ++i) {
      const jxo_dim& d = a->dims[i];
      out.shape.push_back(d.symbol.size ? Dim::sym(std::string(from_jxo(d.symbol))) : Dim(d.value));
    }
    return out;
  }
  int64_t rank() const { return unknown_rank ? -1 : static_cast<int64_t>(shape.size()); }
  bool is_static() const {
    if (unknown_rank) return false;
    for (const Dim& d : shape) if (!d.is_static()) return false;
    return true;
  }
  Aval with_dtype(int32_t t) const { Aval a = *this; a.dtype = t; return a; }
  Aval with_shape(Shape s) const { return Aval(dtype, std::move(s)); }
  std::string str() const {
    return std::string(dtype::name(dtype)) + (unknown_rank ? "[?]" : shape_str(shape));
  }
};

namespace detail {
// Keeps a jxo_aval and the dims it points to alive together.
struct AvalView {
  std::vector<jxo_dim> dims;
  jxo_aval aval{};
  explicit AvalView(const Aval& a) {
    dims.reserve(a.shape.size());
    for (const Dim& d : a.shape) dims.push_back(jxo_dim{d.value, to_jxo(d.symbol)});
    aval.struct_size = sizeof(jxo_aval);
    aval.dtype = a.dtype;
    aval.rank = a.rank();
    aval.dims = dims.data();
  }
  AvalView(const AvalView&) = delete;
  AvalView& operator=(const AvalView&) = delete;
};

// Turns a host status into an exception in the plugin (the message is copied
// and the status released: it never outlives this call).
inline void check(const jxo_api* api, jxo_status* st) {
  if (!st) return;
  std::string msg(from_jxo(api->status_message(st)));
  api->status_release(st);
  throw Error(msg);
}
}  // namespace detail

// ------------------------------------------------------------------ params --

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

// -------------------------------------------------------------- attributes --

// A finished subgraph (from Subgraph::end), to pass once to Attr::graph.
struct GraphRef {
  const jxo_graph* handle = nullptr;
};

// One node attribute, owning its data.
class Attr {
 public:
  static Attr i(std::string name, int64_t v) { Attr a(std::move(name), JXO_ATTR_INT); a.c_.i = v; return a; }
  static Attr f(std::string name, double v) { Attr a(std::move(name), JXO_ATTR_FLOAT); a.c_.f = v; return a; }
  static Attr s(std::string name, std::string v) {
    Attr a(std::move(name), JXO_ATTR_STRING);
    a.str_ = std::move(v);
    return a;
  }
  static Attr ints(std::string name, std::vector<int64_t> v) {
    Attr a(std::move(name), JXO_ATTR_INTS);
    a.ints_ = std::move(v);
    return a;
  }
  static Attr floats(std::string name, std::vector<double> v) {
    Attr a(std::move(name), JXO_ATTR_FLOATS);
    a.floats_ = std::move(v);
    return a;
  }
  // A tensor attribute (e.g. ConstantOfShape's value). `data` is copied.
  static Attr tensor(std::string name, int32_t dt, std::vector<int64_t> dims, const void* data,
                     size_t nbytes) {
    Attr a(std::move(name), JXO_ATTR_TENSOR);
    a.tensor_dims_ = std::move(dims);
    a.bytes_.assign(static_cast<const char*>(data), static_cast<const char*>(data) + nbytes);
    a.tensor_.struct_size = sizeof(jxo_tensor);
    a.tensor_.dtype = dt;
    return a;
  }

  // A subgraph attribute (If then_branch/else_branch, Loop body). The handle
  // is consumed by the node this attribute is emitted with.
  static Attr graph(std::string name, GraphRef g) {
    if (!g.handle) throw Error("graph attribute '" + name + "' has no graph");
    Attr a(std::move(name), JXO_ATTR_GRAPH);
    a.c_.graph = g.handle;
    return a;
  }

  // Fills pointers into this object; valid while it is alive and unmoved.
  const jxo_attr* c() const {
    c_.struct_size = sizeof(jxo_attr);
    c_.name = to_jxo(name_);
    c_.s = to_jxo(str_);
    c_.ints = ints_.data();
    c_.floats = floats_.data();
    c_.count = c_.type == JXO_ATTR_INTS ? ints_.size() : floats_.size();
    if (c_.type == JXO_ATTR_TENSOR) {
      tensor_.rank = static_cast<int64_t>(tensor_dims_.size());
      tensor_.dims = tensor_dims_.data();
      tensor_.data = bytes_.data();
      tensor_.nbytes = bytes_.size();
      c_.tensor = &tensor_;
    }
    return &c_;
  }

 private:
  Attr(std::string name, int32_t type) : name_(std::move(name)) { c_.type = type; }
  std::string name_, str_;
  std::vector<int64_t> ints_, tensor_dims_;
  std::vector<double> floats_;
  std::vector<char> bytes_;
  mutable jxo_tensor tensor_{};
  mutable jxo_attr c_{};
};

// -------------------------------------------------------------- lowering --

class Subgraph;

// One equation being lowered. Everything here forwards to the host table.
class Lowering {
 public:
  Lowering(const jxo_api* api, jxo_lowering* ctx) : api_(api), ctx_(ctx) {}

  const jxo_api* api() const { return api_; }
  std::string_view primitive() const { return from_jxo(api_->primitive(ctx_)); }
  size_t num_inputs() const { return api_->num_inputs(ctx_); }
  size_t num_outputs() const { return api_->num_outputs(ctx_); }
  Aval in_aval(size_t i) const { return Aval::from(checked(api_->input_aval(ctx_, i), "input", i)); }
  Aval out_aval(size_t i) const { return Aval::from(checked(api_->output_aval(ctx_, i), "output", i)); }
  int64_t opset() const { return api_->opset(ctx_); }

  // The equation's params (a record).
  Param params() const { return Param(api_, api_->params(ctx_), "params"); }
  Param param(std::string_view name) const { return params().field(name); }
  bool has_param(std::string_view name) const { return params().has(name); }
  // An int-list param of axes into a rank-`rank` operand, negatives normalized.
  std::vector<int64_t> axes_param(std::string_view name, int64_t rank) const {
    std::vector<int64_t> axes = param(name).as_ints();
    for (int64_t& a : axes) {
      if (a < 0) a += rank;
      if (a < 0 || a >= rank)
        throw Error("param '" + std::string(name) + "' has an axis out of range for rank " +
                    std::to_string(rank));
    }
    return axes;
  }

  // The data of input i if it is a literal (else nullptr); valid for this call.
  const jxo_tensor* literal(size_t i) const { return api_->input_literal(ctx_, i); }

  Value input(size_t i) {
    Value v = kNoValue;
    detail::check(api_, api_->input(ctx_, i, &v));
    return v;
  }
  std::vector<Value> inputs() {
    std::vector<Value> out;
    for (size_t i = 0; i < num_inputs(); ++i) out.push_back(input(i));
    return out;
  }
  void bind(size_t i, Value v) { detail::check(api_, api_->bind_output(ctx_, i, v)); }

  // The type of a value the host knows.
  Aval aval_of(Value v) const { return Aval::from(api_->value_aval(ctx_, v)); }

  // `v` (of type `from`) cast to dtype `to`; no node when it already is.
  Value cast(Value v, const Aval& from, int32_t to) {
    if (from.dtype == to) return v;
    return op("Cast", {v}, from.with_dtype(to), {Attr::i("to", to)});
  }

  // Where(cond, a, b) giving `out`. Where onnxruntime has no Where kernel for
  // out's dtype (kernels.hpp: bool, 16-bit integers, uint64), it selects in a
  // type that keeps every value (or, for uint64, every bit) and casts back.
  Value where(Value cond, Value a, Value b, const Aval& out) {
    int32_t t = out.dtype;
    int32_t c = kernels::compute_type("Where", t, /*bits_only=*/true);
    if (c == t || c == JXO_DTYPE_UNDEFINED) return op("Where", {cond, a, b}, out);
    Aval wide = out.with_dtype(c);
    Value r = op("Where", {cond, cast(a, aval_of(a), c), cast(b, aval_of(b), c)}, wide);
    return cast(r, wide, t);
  }

  // `x` (of type `a`) transposed by `perm`; no node for the identity.
  Value transpose(Value x, const Aval& a, const std::vector<int64_t>& perm) {
    bool identity = true;
    for (size_t i = 0; i < perm.size(); ++i) identity = identity && perm[i] == static_cast<int64_t>(i);
    if (identity) return x;
    Shape s;
    for (int64_t p : perm) s.push_back(a.shape.at(static_cast<size_t>(p)));
    return op("Transpose", {x}, a.with_shape(std::move(s)), {Attr::ints("perm", perm)});
  }

  // Emits `op_type` with one output of type `out`.
  Value op(std::string_view op_type, const std::vector<Value>& ins, const Aval& out,
           const std::vector<Attr>& attrs = {}) {
    return op_n(op_type, ins, {out}, attrs)[0];
  }
  std::vector<Value> op_n(std::string_view op_type, const std::vector<Value>& ins,
                          const std::vector<Aval>& outs, const std::vector<Attr>& attrs = {},
                          std::string_view domain = {}, int64_t domain_version = 0) {
    std::vector<std::unique_ptr<detail::AvalView>> views;
    std::vector<const jxo_aval*> out_ptrs;
    for (const Aval& a : outs) {
      views.push_back(std::make_unique<detail::AvalView>(a));
      out_ptrs.push_back(a.dtype == JXO_DTYPE_UNDEFINED ? nullptr : &views.back()->aval);
    }
    std::vector<const jxo_attr*> attr_ptrs;
    for (const Attr& a : attrs) attr_ptrs.push_back(a.c());
    jxo_node node{};
    node.struct_size = sizeof(jxo_node);
    node.op_type = to_jxo(op_type);
    node.domain = to_jxo(domain);
    node.domain_version = domain_version;
    node.inputs = ins.data();
    node.num_inputs = ins.size();
    node.outputs = out_ptrs.data();
    node.num_outputs = out_ptrs.size();
    node.attrs = attr_ptrs.data();
    node.num_attrs = attr_ptrs.size();
    std::vector<Value> result(outs.size(), kNoValue);
    detail::check(api_, api_->emit_node(ctx_, &node, result.data()));
    return result;
  }

  // A constant tensor (copied by the host).
  Value constant(int32_t dt, const std::vector<int64_t>& dims, const void* data, size_t nbytes) {
    jxo_tensor t{sizeof(jxo_tensor), dt, static_cast<int64_t>(dims.size()), dims.data(), data, nbytes};
    Value v = kNoValue;
    detail::check(api_, api_->constant(ctx_, &t, &v));
    return v;
  }
  template <typename T>
  Value constant(const std::vector<T>& data, const std::vector<int64_t>& dims) {
    static_assert(!std::is_same_v<T, bool>, "use constant(dtype::boolean, ...) with uint8 data");
    return constant(dtype::of<T>(), dims, data.data(), data.size() * sizeof(T));
  }
  // A 1-D int64 constant, the currency of shape arguments (axes, shapes, starts).
  Value i64s(const std::vector<int64_t>& v) {
    return constant(v, {static_cast<int64_t>(v.size())});
  }
  // A scalar (rank-0) of dtype `dt` holding `x` converted to that dtype.
  Value scalar(int32_t dt, double x) {
    switch (dt) {
      case dtype::f32: return scalar_of<float>(static_cast<float>(x));
      case dtype::f64: return scalar_of<double>(x);
      case dtype::i8: return scalar_of<int8_t>(static_cast<int8_t>(x));
      case dtype::i16: return scalar_of<int16_t>(static_cast<int16_t>(x));
      case dtype::i32: return scalar_of<int32_t>(static_cast<int32_t>(x));
      case dtype::i64: return scalar_of<int64_t>(static_cast<int64_t>(x));
      case dtype::u8: return scalar_of<uint8_t>(static_cast<uint8_t>(x));
      case dtype::u16: return scalar_of<uint16_t>(static_cast<uint16_t>(x));
      case dtype::u32: return scalar_of<uint32_t>(static_cast<uint32_t>(x));
      case dtype::u64: return scalar_of<uint64_t>(static_cast<uint64_t>(x));
      case dtype::boolean: {
        uint8_t b = x != 0;
        return constant(dtype::boolean, {}, &b, 1);
      }
      default: break;
    }
    // f16/bf16: build in f32 and cast, rather than hand-rounding here.
    Value f = scalar_of<float>(static_cast<float>(x));
    return op("Cast", {f}, Aval(dt, {}), {Attr::i("to", dt)});
  }

  // The runtime value of a dim as an int64 tensor of shape [1]. A static dim
  // is a constant; a symbolic one is computed from where its symbols entered
  // the graph (Shape of that input), once per graph.
  Value dim_value(const Dim& d) {
    if (d.is_static()) return i64s({d.value});
    return memoized("jaxonnx.dim:" + d.symbol, [&] { return DimExprParser{d.symbol, 0, this}.parse(); });
  }

  // Inclusive scan of `x` (aval `a`) along `axis` with the associative
  // binary ONNX op `op` (e.g. "Mul", "Max"), whose identity is `identity` (a
  // scalar of a.dtype): x = op(x, x shifted by 1, 2, 4, ...) (Hillis-Steele;
  // Pad with the identity, Slice). ceil(log2 n) steps for a static n, 32 for a
  // symbolic n (exact for n < 2^32). Exact for integer ops, which wrap.
  Value inclusive_scan(const char* op, Value x, const Aval& a, int64_t axis, bool reverse,
                       Value identity) {
    const Dim n = a.shape[static_cast<size_t>(axis)];
    int64_t steps = 32;
    if (n.is_static()) for (steps = 0; (int64_t{1} << steps) < n.value; ++steps) {}
    Value axes = i64s({axis});
    for (int64_t k = 0; k < steps; ++k) {
      // Shift by m = min(2^k, n) toward the scan direction (m, not 2^k, so the
      // padded tensor stays within 2n).
      const int64_t s = int64_t{1} << k;
      Value m, pads, neg_m;
      if (n.is_static()) {
        m = i64s({s});
        pads = i64s(reverse ? std::vector<int64_t>{0, s} : std::vector<int64_t>{s, 0});
        neg_m = i64s({-s});
      } else {
        m = this->op("Min", {i64s({s}), dim_value(n)}, Aval(dtype::i64, {1}));
        Value zero = i64s({0});
        pads = this->op("Concat", {reverse ? zero : m, reverse ? m : zero}, Aval(dtype::i64, {2}),
                        {Attr::i("axis", 0)});
        neg_m = this->op("Neg", {m}, Aval(dtype::i64, {1}));
      }
      Value padded = this->op("Pad", {x, pads, identity, axes}, Aval::of_unknown_shape(a.dtype),
                              {Attr::s("mode", "constant")});
      Value shifted = reverse ? this->op("Slice", {padded, m, i64s({INT64_MAX}), axes}, a)
                              : this->op("Slice", {padded, i64s({0}), neg_m, axes}, a);
      x = this->op(op, {x, shifted}, a);
    }
    return x;
  }

  // A 1-D int64 tensor holding `shape`, symbolic dims computed at runtime.
  // Runs of static dims become one constant.
  Value shape_value(const Shape& shape) {
    bool all_static = true;
    for (const Dim& d : shape) all_static = all_static && d.is_static();
    if (all_static) {
      std::vector<int64_t> v;
      for (const Dim& d : shape) v.push_back(d.value);
      return i64s(v);
    }
    std::vector<Value> parts;
    std::vector<int64_t> run;
    for (const Dim& d : shape) {
      if (d.is_static()) { run.push_back(d.value); continue; }
      if (!run.empty()) { parts.push_back(i64s(run)); run.clear(); }
      parts.push_back(dim_value(d));
    }
    if (!run.empty()) parts.push_back(i64s(run));
    if (parts.size() == 1) return parts[0];
    return op("Concat", parts, Aval(dtype::i64, {static_cast<int64_t>(shape.size())}),
              {Attr::i("axis", 0)});
  }

  // Lowers a nested closed jaxpr inline and returns its outputs. Inside an
  // open Subgraph, its nodes go into that subgraph.
  std::vector<Value> inline_jaxpr(const jxo_jaxpr* j, const std::vector<Value>& ins) {
    std::vector<Value> outs(api_->jaxpr_num_outputs(j), kNoValue);
    detail::check(api_, api_->lower_jaxpr(ctx_, j, ins.data(), ins.size(), outs.data(), outs.size()));
    return outs;
  }
  // The same, said where a subgraph is being filled.
  std::vector<Value> lower_jaxpr_into(const jxo_jaxpr* j, const std::vector<Value>& ins) {
    return inline_jaxpr(j, ins);
  }

  // Opens a subgraph scope (ABI 1.1); see class Subgraph.
  inline Subgraph begin_subgraph(std::string_view name);

  // False when output i of the equation is never read afterwards (ABI 1.1);
  // such an output may be left unbound.
  bool output_used(size_t i) const {
    if (!JXO_HAS_FIELD(api_, jxo_api, output_used)) return true;
    return api_->output_used(ctx_, i) != 0;
  }

  // Fails unless the host serves ABI 1.1 (subgraphs).
  void require_subgraphs() const {
    if (!JXO_HAS_FIELD(api_, jxo_api, jaxpr_output_eqn))
      throw Error("this host does not serve subgraphs (jaxonnx ABI 1.1); upgrade jaxonnx");
  }

  [[noreturn]] void fail(const std::string& msg) const { throw Error(msg); }

 private:
  // The value cached under `key` in this graph, made by `make` the first time.
  template <typename F> Value memoized(const std::string& key, F&& make) {
    Value v = kNoValue;
    api_->memo_get(ctx_, to_jxo(key), &v);
    if (v == kNoValue) {
      v = make();
      api_->memo_put(ctx_, to_jxo(key), v);
    }
    return v;
  }

  template <typename T> Value scalar_of(T x) { return constant(dtype::of<T>(), {}, &x, sizeof(T)); }

  const jxo_aval* checked(const jxo_aval* a, const char* what, size_t i) const {
    if (!a) throw Error(std::string("no ") + what + " " + std::to_string(i));
    return a;
  }

  // Evaluates a JAX symbolic dim expression ("2*B + 1", "floordiv(B, 2)",
  // "max(B, 1)", "B*C") into an int64[1] value with ONNX arithmetic.
  struct DimExprParser {
    std::string_view s;
    size_t pos;
    Lowering* L;

    Aval one() const { return Aval(dtype::i64, {1}); }
    void skip() { while (pos < s.size() && s[pos] == ' ') ++pos; }
    bool eat(char c) { skip(); if (pos < s.size() && s[pos] == c) { ++pos; return true; } return false; }
    [[noreturn]] void bad() const {
      throw Error("cannot evaluate symbolic dim expression '" + std::string(s) + "'");
    }
    Value parse() { Value v = expr(); skip(); if (pos != s.size()) bad(); return v; }
    Value expr() {
      Value v = term();
      for (;;) {
        if (eat('+')) v = L->op("Add", {v, term()}, one());
        else if (eat('-')) v = L->op("Sub", {v, term()}, one());
        else return v;
      }
    }
    Value term() {
      Value v = factor();
      while (eat('*')) v = L->op("Mul", {v, factor()}, one());
      return v;
    }
    Value factor() {
      skip();
      if (eat('(')) { Value v = expr(); if (!eat(')')) bad(); return v; }
      if (eat('-')) return L->op("Neg", {factor()}, one());
      if (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
        int64_t n = 0;
        while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') n = n * 10 + (s[pos++] - '0');
        return L->i64s({n});
      }
      size_t start = pos;
      while (pos < s.size() && (std::isalnum(static_cast<unsigned char>(s[pos])) || s[pos] == '_')) ++pos;
      if (start == pos) bad();
      std::string_view name = s.substr(start, pos - start);
      if (eat('(')) {
        Value a = expr();
        if (!eat(',')) bad();
        Value b = expr();
        if (!eat(')')) bad();
        if (name == "floordiv") return floordiv(a, b);
        if (name == "mod") return L->op("Mod", {a, b}, one(), {Attr::i("fmod", 0)});
        if (name == "max") return L->op("Max", {a, b}, one());
        if (name == "min") return L->op("Min", {a, b}, one());
        bad();
      }
      return atom(name);
    }
    // Floor division. ONNX Div truncates, but Mod(fmod=0) takes the divisor's
    // sign, so a - mod(a, b) is an exact multiple of b and divides exactly.
    Value floordiv(Value a, Value b) {
      Value m = L->op("Mod", {a, b}, one(), {Attr::i("fmod", 0)});
      return L->op("Div", {L->op("Sub", {a, m}, one()), b}, one());
    }
    Value atom(std::string_view name) {
      return L->memoized("jaxonnx.dim:" + std::string(name), [&] {
        Value src = kNoValue;
        int64_t axis = 0;
        detail::check(L->api_, L->api_->symbol_origin(L->ctx_, to_jxo(name), &src, &axis));
        return L->op("Shape", {src}, one(), {Attr::i("start", axis), Attr::i("end", axis + 1)});
      });
    }
  };

  const jxo_api* api_;
  jxo_lowering* ctx_;
  friend class Subgraph;
};

// ---------------------------------------------------------------- subgraphs --

// A subgraph being built (an If branch, a Loop body). While it is open, every
// node, constant and inlined jaxpr of the lowering goes into it; values of the
// enclosing graphs can be used directly (the host captures them). Subgraphs
// nest like brackets: end() the innermost first.
//
//   Subgraph body = L.begin_subgraph("body");
//   Value i = body.input(Aval(dtype::i64, {}), "iter");
//   ...
//   GraphRef g = body.end({cond_out, x_out});
//   L.op_n("Loop", {trip, cond, x0}, {out_aval}, {Attr::graph("body", g)});
//
// A Subgraph that is not end()ed (an exception in between) is closed by the
// host when the lowering returns, and the lowering fails.
class Subgraph {
 public:
  Subgraph(Lowering& L, std::string_view name) : L_(&L) {
    L.require_subgraphs();
    detail::check(L.api_, L.api_->graph_begin(L.ctx_, to_jxo(name)));
  }
  Subgraph(const Subgraph&) = delete;
  Subgraph& operator=(const Subgraph&) = delete;
  Subgraph(Subgraph&& o) noexcept : L_(o.L_), done_(o.done_) { o.done_ = true; }

  // Appends a formal input of type `a` (symbolic dims become dim_params).
  Value input(const Aval& a, std::string_view name = "") {
    detail::AvalView v(a);
    Value out = kNoValue;
    detail::check(L_->api_, L_->api_->graph_add_input(L_->ctx_, to_jxo(name), &v.aval, &out));
    return out;
  }
  // Closes the subgraph with `outputs` (any visible values; inputs, outer
  // values, constants and repeats are copied by the host).
  GraphRef end(const std::vector<Value>& outputs) {
    if (done_) throw Error("Subgraph::end called twice");
    done_ = true;
    GraphRef g;
    detail::check(L_->api_, L_->api_->graph_end(L_->ctx_, outputs.data(), outputs.size(), &g.handle));
    return g;
  }

 private:
  Lowering* L_;
  bool done_ = false;
};

inline Subgraph Lowering::begin_subgraph(std::string_view name) { return Subgraph(*this, name); }

// A read-only view of a nested closed jaxpr (ABI 1.1 introspection).
class JaxprView {
 public:
  JaxprView(const jxo_api* api, const jxo_jaxpr* j) : api_(api), j_(j) {
    if (!JXO_HAS_FIELD(api_, jxo_api, jaxpr_output_eqn))
      throw Error("this host does not serve jaxpr introspection (jaxonnx ABI 1.1)");
    if (!j_) throw Error("no jaxpr");
  }
  const jxo_jaxpr* get() const { return j_; }
  size_t num_inputs() const { return api_->jaxpr_num_inputs(j_); }
  size_t num_outputs() const { return api_->jaxpr_num_outputs(j_); }
  Aval in_aval(size_t i) const { return Aval::from(api_->jaxpr_input_aval(j_, i)); }
  Aval out_aval(size_t i) const { return Aval::from(api_->jaxpr_output_aval(j_, i)); }
  // The invar index outvar i is directly, or -1.
  int64_t output_source(size_t i) const { return api_->jaxpr_output_source(j_, i); }
  // Whether outvar `out` may depend on invar `in`.
  bool depends(size_t out, size_t in) const { return api_->jaxpr_depends(j_, out, in) != 0; }

  // The equations, in order.
  size_t num_eqns() const { return api_->jaxpr_num_eqns(j_); }
  std::string_view eqn_primitive(size_t k) const { return from_jxo(api_->jaxpr_eqn_primitive(j_, k)); }
  Param eqn_params(size_t k) const {
    return Param(api_, api_->jaxpr_eqn_params(j_, k), "eqn " + std::to_string(k) + " params");
  }
  size_t eqn_num_inputs(size_t k) const { return api_->jaxpr_eqn_num_inputs(j_, k); }
  // The invar index input i of equation k is directly, or -1.
  int64_t eqn_input_source(size_t k, size_t i) const { return api_->jaxpr_eqn_input_source(j_, k, i); }
  // The equation producing outvar i, or -1.
  int64_t output_eqn(size_t i) const { return api_->jaxpr_output_eqn(j_, i); }

  // The primitive combining accumulator and element in a reduction body
  // (lax.reduce, reduce_window): outvar k is one two-input equation over
  // invars k and n + k, in either order. Empty when it is anything else.
  std::string_view combiner(size_t k, size_t n) const {
    int64_t e = output_eqn(k);
    if (e < 0 || eqn_num_inputs(e) != 2) return {};
    int64_t a = eqn_input_source(e, 0), b = eqn_input_source(e, 1);
    const int64_t acc = static_cast<int64_t>(k), elem = static_cast<int64_t>(n + k);
    bool wired = (a == acc && b == elem) || (a == elem && b == acc);
    return wired ? eqn_primitive(e) : std::string_view();
  }

 private:
  const jxo_api* api_;
  const jxo_jaxpr* j_;
};

// ------------------------------------------------------- abstract eval --

// One abstract evaluation: avals in, avals out.
class AbstractEval {
 public:
  AbstractEval(const jxo_api* api, jxo_abstract_eval* ctx) : api_(api), ctx_(ctx) {}
  size_t num_inputs() const { return api_->ae_num_inputs(ctx_); }
  Aval in_aval(size_t i) const {
    const jxo_aval* a = api_->ae_input_aval(ctx_, i);
    if (!a) throw Error("no input " + std::to_string(i));
    return Aval::from(a);
  }
  Param params() const { return Param(api_, api_->ae_params(ctx_), "params"); }
  Param param(std::string_view name) const { return params().field(name); }
  void add_output(const Aval& a) {
    detail::AvalView v(a);
    detail::check(api_, api_->ae_add_output(ctx_, &v.aval));
  }

 private:
  const jxo_api* api_;
  jxo_abstract_eval* ctx_;
};

using LowerFn = std::function<void(Lowering&)>;
using AbstractEvalFn = std::function<void(AbstractEval&)>;

}  // namespace jaxonnx::sdk
#include "jaxonnx/rewrite.hpp"  // rewrite rules (ABI 1.2); builds on the types above
namespace jaxonnx::sdk {

// ------------------------------------------------------------ registration --

namespace detail {
inline jxo_status* to_status(const jxo_api* api, const std::string& msg) {
  return api->status_create(to_jxo(msg));
}

// A binding spec's storage and its C view (pointers into the vectors).
struct BindingEntry {
  std::string target;
  std::vector<std::string> operands, params, when;
  uint64_t leading = 0;
  std::vector<jxo_str> operands_c, params_c, when_c;
  jxo_binding c{};
};

struct PrimitiveEntry {
  std::string name, doc_url, summary;
  std::vector<std::unique_ptr<BindingEntry>> bindings;
  std::vector<const jxo_binding*> bindings_c;
  std::vector<std::string> ops;
  std::vector<jxo_str> ops_c;
  LowerFn lower;
  AbstractEvalFn abstract_eval;
  jxo_primitive_desc desc{};
};

inline jxo_status* lower_trampoline(const jxo_api* api, jxo_lowering* ctx, void* ud) {
  try {
    Lowering L(api, ctx);
    static_cast<PrimitiveEntry*>(ud)->lower(L);
    return nullptr;
  } catch (const std::exception& e) {
    return to_status(api, e.what());
  } catch (...) {
    return to_status(api, "unknown C++ exception");
  }
}

inline jxo_status* abstract_eval_trampoline(const jxo_api* api, jxo_abstract_eval* ctx, void* ud) {
  try {
    AbstractEval A(api, ctx);
    static_cast<PrimitiveEntry*>(ud)->abstract_eval(A);
    return nullptr;
  } catch (const std::exception& e) {
    return to_status(api, e.what());
  } catch (...) {
    return to_status(api, "unknown C++ exception");
  }
}
}  // namespace detail

// A binding spec (ABI 1.2): while jaxonnx traces, a call of the Python
// callable `target` binds this primitive. Expressions are small Python
// expressions over the call's arguments, by parameter name (see jxo_binding).
//
//   plugin.primitive("jaxonnx.nn.layer_norm", lower)
//       .binds(Binding("flax.nnx.LayerNorm.__call__")
//                  .operand("x", Binding::kLeadingDims)
//                  .operand("self.scale.value")
//                  .param("epsilon", "self.epsilon")
//                  .when("self.scale is not None"));
//
// The equation gets the operands as inputs, the params, and `reference`: the
// original callable traced as a function of the operands (a jaxpr), which a
// lowering can inline (Lowering::inline_jaxpr) where the fused op does not fit.
class Binding {
 public:
  // The operand may carry extra leading dims the primitive maps over.
  static constexpr bool kLeadingDims = true;
  explicit Binding(std::string target) { e_.target = std::move(target); }
  Binding& operand(std::string expr, bool leading_dims = false) {
    if (e_.operands.size() >= 64) throw Error("a binding spec has at most 64 operands");
    if (leading_dims) e_.leading |= uint64_t{1} << e_.operands.size();
    e_.operands.push_back(std::move(expr));
    return *this;
  }
  Binding& param(const std::string& name, const std::string& expr) {
    e_.params.push_back(name + "=" + expr);
    return *this;
  }
  // A call mode handled: the expression must be true, else the original runs.
  Binding& when(std::string expr) {
    e_.when.push_back(std::move(expr));
    return *this;
  }
  const detail::BindingEntry& entry() const { return e_; }

 private:
  detail::BindingEntry e_;
};

// What a plugin's registration block fills in.
class Plugin {
 public:
  class PrimitiveRef {
   public:
    explicit PrimitiveRef(detail::PrimitiveEntry* e) : e_(e) {}
    // The ONNX ops this lowering may emit (for the generated docs).
    PrimitiveRef& emits(std::initializer_list<const char*> ops) {
      for (const char* op : ops) e_->ops.emplace_back(op);
      return *this;
    }
    // The ops dim_value / shape_value may emit for symbolic dims ("B", "2*B",
    // "floordiv(B, 2)"); declare them when a lowering uses those helpers.
    PrimitiveRef& emits_shape_ops() {
      return emits({"Shape", "Concat", "Add", "Sub", "Mul", "Neg", "Mod", "Div", "Max", "Min"});
    }
    PrimitiveRef& doc(std::string url) { e_->doc_url = std::move(url); return *this; }
    PrimitiveRef& summary(std::string s) { e_->summary = std::move(s); return *this; }
    PrimitiveRef& abstract_eval(AbstractEvalFn fn) { e_->abstract_eval = std::move(fn); return *this; }
    // A Python callable that binds this primitive while tracing (see Binding).
    PrimitiveRef& binds(const Binding& b) {
      e_->bindings.push_back(std::make_unique<detail::BindingEntry>(b.entry()));
      return *this;
    }

   private:
    detail::PrimitiveEntry* e_;
  };

  PrimitiveRef primitive(std::string name, LowerFn lower) {
    entries_.push_back(std::make_unique<detail::PrimitiveEntry>());
    entries_.back()->name = std::move(name);
    entries_.back()->lower = std::move(lower);
    return PrimitiveRef(entries_.back().get());
  }

  // A rewrite rule (ABI 1.2) ending at a node of op `root_op`; see rewrite.hpp.
  RuleRef rule(std::string name, std::string root_op, RewriteFn fn) {
    rules_.push_back(std::make_unique<detail::RuleEntry>());
    rules_.back()->name = std::move(name);
    rules_.back()->root_op = std::move(root_op);
    rules_.back()->fn = std::move(fn);
    return RuleRef(rules_.back().get());
  }

  const jxo_plugin_desc* descriptor() const { return &desc_; }

  // Freezes everything into the C descriptor. Called once.
  const jxo_plugin_desc* finish(std::string name, std::string version) {
    name_ = std::move(name);
    version_ = std::move(version);
    for (auto& e : entries_) {
      for (const std::string& op : e->ops) e->ops_c.push_back(to_jxo(op));
      jxo_primitive_desc& d = e->desc;
      d.struct_size = sizeof(jxo_primitive_desc);
      d.name = to_jxo(e->name);
      d.lower = &detail::lower_trampoline;
      d.abstract_eval = e->abstract_eval ? &detail::abstract_eval_trampoline : nullptr;
      d.user_data = e.get();
      d.onnx_ops = e->ops_c.data();
      d.num_onnx_ops = e->ops_c.size();
      d.doc_url = to_jxo(e->doc_url);
      d.summary = to_jxo(e->summary);
      for (auto& b : e->bindings) {
        for (const std::string& x : b->operands) b->operands_c.push_back(to_jxo(x));
        for (const std::string& x : b->params) b->params_c.push_back(to_jxo(x));
        for (const std::string& x : b->when) b->when_c.push_back(to_jxo(x));
        b->c.struct_size = sizeof(jxo_binding);
        b->c.target = to_jxo(b->target);
        b->c.operands = b->operands_c.data();
        b->c.num_operands = b->operands_c.size();
        b->c.params = b->params_c.data();
        b->c.num_params = b->params_c.size();
        b->c.when = b->when_c.data();
        b->c.num_when = b->when_c.size();
        b->c.leading_dims_operands = b->leading;
        e->bindings_c.push_back(&b->c);
      }
      d.bindings = e->bindings_c.data();
      d.num_bindings = e->bindings_c.size();
      prim_ptrs_.push_back(&d);
    }
    desc_.struct_size = sizeof(jxo_plugin_desc);
    desc_.abi_major = JXO_ABI_MAJOR;
    desc_.abi_minor = JXO_ABI_MINOR;
    desc_.name = to_jxo(name_);
    desc_.version = to_jxo(version_);
    desc_.sdk_version = jxo_str{JAXONNX_SDK_VERSION, sizeof(JAXONNX_SDK_VERSION) - 1};
    desc_.primitives = prim_ptrs_.data();
    desc_.num_primitives = prim_ptrs_.size();
    for (auto& r : rules_) {
      for (const std::string& op : r->ops) r->ops_c.push_back(to_jxo(op));
      jxo_rule_desc& d = r->desc;
      d.struct_size = sizeof(jxo_rule_desc);
      d.name = to_jxo(r->name);
      d.root_op = to_jxo(r->root_op);
      d.rewrite = &detail::rewrite_trampoline;
      d.user_data = r.get();
      d.min_opset = r->min_opset;
      d.onnx_ops = r->ops_c.data();
      d.num_onnx_ops = r->ops_c.size();
      d.summary = to_jxo(r->summary);
      rule_ptrs_.push_back(&d);
    }
    desc_.rules = rule_ptrs_.data();
    desc_.num_rules = rule_ptrs_.size();
    return &desc_;
  }

 private:
  std::vector<std::unique_ptr<detail::PrimitiveEntry>> entries_;
  std::vector<const jxo_primitive_desc*> prim_ptrs_;
  std::vector<std::unique_ptr<detail::RuleEntry>> rules_;
  std::vector<const jxo_rule_desc*> rule_ptrs_;
  std::string name_, version_;
  jxo_plugin_desc desc_{};
};

namespace detail {
// The body of jaxonnx_plugin_init_v1 for SDK plugins. The Plugin object lives
// for the process (plugins are never unloaded), so the descriptor does too.
inline const jxo_plugin_desc* init(const jxo_host* host, jxo_str* error, const char* name,
                                   const char* version, void (*reg)(Plugin&)) {
  static const char* kBadHost = "host speaks a different jaxonnx ABI major version";
  static Plugin* plugin = nullptr;  // never freed: the host may read it until exit
  static std::string failure;
  try {
    if (!host || host->abi_major != JXO_ABI_MAJOR) {
      *error = jxo_str{kBadHost, std::strlen(kBadHost)};
      return nullptr;
    }
    if (!plugin) {
      auto* p = new Plugin();
      reg(*p);
      p->finish(name, version);
      plugin = p;
    }
    return plugin->descriptor();
  } catch (const std::exception& e) {
    failure = e.what();
  } catch (...) {
    failure = "unknown C++ exception during registration";
  }
  *error = to_jxo(failure);
  return nullptr;
}
}  // namespace detail

}  // namespace jaxonnx::sdk

// Defines the plugin's entry point; the block that follows registers its
// primitives on `plugin` (a jaxonnx::sdk::Plugin&).
#define JAXONNX_PLUGIN(NAME, VERSION)                                                         \
  static void jaxonnx_register_plugin_(::jaxonnx::sdk::Plugin& plugin);                      \
  extern "C" JAXONNX_PLUGIN_EXPORT const jxo_plugin_desc* jaxonnx_plugin_init_v1(            \
      const jxo_host* host, jxo_str* error) {                                                 \
    return ::jaxonnx::sdk::detail::init(host, error, NAME, VERSION, &jaxonnx_register_plugin_); \
  }                                                                                           \
  static void jaxonnx_register_plugin_(::jaxonnx::sdk::Plugin& plugin)
