// jaxonnx plugin SDK: the vocabulary every other header speaks. Error (what a
// plugin throws), strings across the ABI, Value handles, dtypes, Dim / Shape /
// Aval, and the two bridges to the C structs (AvalView out, check for a host
// status in). Op-free: nothing here knows an ONNX operator.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "jaxonnx/dtypes.hpp"
#include "jaxonnx/plugin_abi.h"

namespace jaxonnx::sdk {

// Thrown by a lowering to fail it; the message reaches the user prefixed with
// the plugin and primitive names. `code` (JXO_ERROR, JXO_DECLINED, ...) says
// why, to hosts of ABI 1.3 and newer.
struct Error : std::runtime_error {
  explicit Error(const std::string& message, int32_t code = JXO_ERROR)
      : std::runtime_error(message), code(code) {}
  int32_t code;
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
// 4-bit integers (ABI 1.6): storage for quantized weights. Not among
// is_int's types: ONNX computes on them only through Cast and
// DequantizeLinear (opset 21), so a lowering that handles them says so.
constexpr int32_t i4 = JXO_DTYPE_INT4, u4 = JXO_DTYPE_UINT4;
inline bool is_4bit(int32_t t) { return t == i4 || t == u4; }
// Complex: carried in the IR as a real tensor with a trailing dim of 2 (see complex.hpp).
constexpr int32_t c64 = JXO_DTYPE_COMPLEX64, c128 = JXO_DTYPE_COMPLEX128;
inline bool is_complex(int32_t t) { return t == c64 || t == c128; }

inline bool is_float(int32_t t) { return t == f32 || t == f64 || t == f16 || t == bf16; }
inline bool is_signed_int(int32_t t) { return t == i8 || t == i16 || t == i32 || t == i64; }
inline bool is_unsigned_int(int32_t t) { return t == u8 || t == u16 || t == u32 || t == u64; }
inline bool is_int(int32_t t) { return is_signed_int(t) || is_unsigned_int(t); }

// From the one dtype table (dtypes.hpp), for the dtypes jaxonnx exports.
inline size_t itemsize(int32_t t) {
  const dtypes::Info* d = dtypes::find(t);
  return d && d->exported ? d->itemsize : 0;
}

inline const char* name(int32_t t) {
  const dtypes::Info* d = dtypes::find(t);
  return d && d->exported ? d->name : "unknown";
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
  int32_t code = JXO_HAS_FIELD(api, jxo_api, status_code) ? api->status_code(st) : JXO_ERROR;
  api->status_release(st);
  throw Error(msg, code);  // the code travels on: a nested failure stays one
}

// A plugin-side failure as a host status, with its code where the host knows codes.
inline jxo_status* to_status(const jxo_api* api, const std::string& msg, int32_t code = JXO_ERROR) {
  if (JXO_HAS_FIELD(api, jxo_api, status_create_with_code))
    return api->status_create_with_code(code, to_jxo(msg));
  return api->status_create(to_jxo(msg));
}

// Runs a plugin callback's body at the C boundary: nothing thrown crosses it;
// an exception becomes a status (an Error keeps its code).
template <typename Body>
jxo_status* at_boundary(const jxo_api* api, Body&& body) noexcept {
  try {
    body();
    return nullptr;
  } catch (const Error& e) {
    return to_status(api, e.what(), e.code);
  } catch (const std::exception& e) {
    return to_status(api, e.what());
  } catch (...) {
    return to_status(api, "unknown C++ exception");
  }
}
}  // namespace detail

}  // namespace jaxonnx::sdk
