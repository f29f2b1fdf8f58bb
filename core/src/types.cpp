#include "jaxonnx/core/types.hpp"
#include "jaxonnx/core/jaxpr.hpp"
#include "jaxonnx/core/error.hpp"

#include <cstring>

namespace jaxonnx {

const char* dtype_name(int32_t t) {
  switch (t) {
    case JXO_DTYPE_FLOAT32: return "float32";
    case JXO_DTYPE_FLOAT64: return "float64";
    case JXO_DTYPE_FLOAT16: return "float16";
    case JXO_DTYPE_BFLOAT16: return "bfloat16";
    case JXO_DTYPE_INT8: return "int8";
    case JXO_DTYPE_INT16: return "int16";
    case JXO_DTYPE_INT32: return "int32";
    case JXO_DTYPE_INT64: return "int64";
    case JXO_DTYPE_UINT8: return "uint8";
    case JXO_DTYPE_UINT16: return "uint16";
    case JXO_DTYPE_UINT32: return "uint32";
    case JXO_DTYPE_UINT64: return "uint64";
    case JXO_DTYPE_BOOL: return "bool";
    case JXO_DTYPE_COMPLEX64: return "complex64";
    case JXO_DTYPE_COMPLEX128: return "complex128";
    case JXO_DTYPE_STRING: return "string";
    default: return "undefined";
  }
}

size_t dtype_size(int32_t t) {
  switch (t) {
    case JXO_DTYPE_FLOAT64: case JXO_DTYPE_INT64: case JXO_DTYPE_UINT64:
    case JXO_DTYPE_COMPLEX64: return 8;
    case JXO_DTYPE_FLOAT32: case JXO_DTYPE_INT32: case JXO_DTYPE_UINT32: return 4;
    case JXO_DTYPE_FLOAT16: case JXO_DTYPE_BFLOAT16: case JXO_DTYPE_INT16:
    case JXO_DTYPE_UINT16: return 2;
    case JXO_DTYPE_INT8: case JXO_DTYPE_UINT8: case JXO_DTYPE_BOOL: return 1;
    case JXO_DTYPE_COMPLEX128: return 16;
    default: return 0;
  }
}

Aval Aval::from_c(const jxo_aval& a) {
  Aval out;
  out.dtype = a.dtype;
  if (a.rank < 0) {
    out.known_rank = false;
    return out;
  }
  out.dims.reserve(static_cast<size_t>(a.rank));
  for (int64_t i = 0; i < a.rank; ++i) {
    const jxo_dim& d = a.dims[i];
    if (d.symbol.size) out.dims.push_back(Dim{0, std::string(d.symbol.data, d.symbol.size)});
    else out.dims.push_back(Dim{d.value, {}});
  }
  return out;
}

std::string Aval::str() const {
  std::string s = dtype_name(dtype);
  if (!known_rank) return s + "[?]";
  s += "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + dims[i].str();
  return s + "]";
}

const jxo_aval* Aval::c() const {
  if (!c_built_) {
    c_dims_.clear();
    for (const Dim& d : dims) c_dims_.push_back(jxo_dim{d.value, {d.symbol.data(), d.symbol.size()}});
    c_.struct_size = sizeof(jxo_aval);
    c_.dtype = dtype;
    c_.rank = known_rank ? static_cast<int64_t>(dims.size()) : -1;
    c_.dims = c_dims_.data();
    c_built_ = true;
  }
  return &c_;
}

std::shared_ptr<const Tensor> Tensor::copy_of(int32_t dtype, std::vector<int64_t> dims,
                                              const void* data, size_t nbytes) {
  auto t = std::make_shared<Tensor>();
  auto buf = std::shared_ptr<char[]>(new char[nbytes ? nbytes : 1]);
  if (nbytes) std::memcpy(buf.get(), data, nbytes);
  t->dtype = dtype;
  t->dims = std::move(dims);
  t->data = buf.get();
  t->nbytes = nbytes;
  t->owner = std::shared_ptr<const void>(buf, buf.get());
  return t;
}

int64_t Tensor::num_elements() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

const jxo_tensor* Tensor::c() const {
  c_.struct_size = sizeof(jxo_tensor);
  c_.dtype = dtype;
  c_.rank = static_cast<int64_t>(dims.size());
  c_.dims = dims.data();
  c_.data = data;
  c_.nbytes = nbytes;
  return &c_;
}

const ClosedJaxpr* JaxprRef::get() const {
  if (!state_) return nullptr;
  if (!state_->jaxpr && state_->make) {
    Make make = std::move(state_->make);  // one attempt: a failure stays a failure
    state_->make = nullptr;
    state_->jaxpr = make();
  }
  return state_->jaxpr.get();
}

const ClosedJaxpr& JaxprRef::operator*() const {
  const ClosedJaxpr* j = get();
  if (!j) throw ConversionError("a deferred jaxpr param could not be made");
  return *j;
}

const Param* Param::field(std::string_view key) const {
  for (size_t i = 0; i < keys.size(); ++i)
    if (keys[i] == key) return &items[i];
  return nullptr;
}

}  // namespace jaxonnx
