// The core's value types: dims, avals and tensors. Dtypes are the ABI's
// JXO_DTYPE_* numbers (which are ONNX's TensorProto numbers).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "jaxonnx/plugin_abi.h"

namespace jaxonnx {

// From the one dtype table (jaxonnx/dtypes.hpp).
const char* dtype_name(int32_t dtype);  // "undefined" if unknown
size_t dtype_size(int32_t dtype);       // bytes per element, 0 if unknown

// A static size, or a symbolic expression as JAX prints it ("B", "2*B").
struct Dim {
  int64_t value = 0;
  std::string symbol;

  bool is_static() const { return symbol.empty(); }
  bool operator==(const Dim& o) const { return value == o.value && symbol == o.symbol; }
  std::string str() const { return is_static() ? std::to_string(value) : symbol; }
};

// dtype + shape. Keeps a C view (jxo_aval) for the ABI, built on first use.
class Aval {
 public:
  Aval() = default;
  Aval(int32_t dtype, std::vector<Dim> dims, bool known_rank = true)
      : dtype(dtype), dims(std::move(dims)), known_rank(known_rank) {}
  Aval(const Aval& o) : dtype(o.dtype), dims(o.dims), known_rank(o.known_rank) {}
  Aval& operator=(const Aval& o) {
    dtype = o.dtype; dims = o.dims; known_rank = o.known_rank; c_built_ = false;
    return *this;
  }
  static Aval from_c(const jxo_aval& a);

  int32_t dtype = JXO_DTYPE_UNDEFINED;
  std::vector<Dim> dims;
  bool known_rank = true;

  std::string str() const;  // "float32[B,30]"
  // The ABI view; valid while this Aval lives and is not assigned to.
  const jxo_aval* c() const;

 private:
  mutable bool c_built_ = false;
  mutable std::vector<jxo_dim> c_dims_;
  mutable jxo_aval c_{};
};

// A dense tensor. `data` is owned through `owner` (a copy, or a buffer kept
// alive by whoever produced it, e.g. a NumPy array).
struct Tensor {
  int32_t dtype = JXO_DTYPE_UNDEFINED;
  std::vector<int64_t> dims;
  const void* data = nullptr;
  size_t nbytes = 0;
  std::shared_ptr<const void> owner;

  static std::shared_ptr<const Tensor> copy_of(int32_t dtype, std::vector<int64_t> dims,
                                               const void* data, size_t nbytes);
  int64_t num_elements() const;
  const jxo_tensor* c() const;  // valid while this Tensor lives

 private:
  mutable jxo_tensor c_{};
};

// Complex values are carried as real tensors with a trailing dim of 2 ([..., 0]
// real, [..., 1] imaginary): complex64 as float32[..., 2], complex128 as
// float64[..., 2]. The IR type of a value of aval `a` (`a` itself unless complex).
Aval packed(const Aval& a);
// The same for a tensor: the bytes of a complex tensor are already that layout.
std::shared_ptr<const Tensor> packed(std::shared_ptr<const Tensor> t);

}  // namespace jaxonnx
