#include "jaxonnx/core/types.hpp"

#include "jaxonnx/dtypes.hpp"

#include <cstring>

namespace jaxonnx {

const char* dtype_name(int32_t t) {
  const dtypes::Info* d = dtypes::find(t);
  return d ? d->name : "undefined";
}

size_t dtype_size(int32_t t) {
  const dtypes::Info* d = dtypes::find(t);
  return d ? d->itemsize : 0;
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

namespace {
int32_t part_dtype(int32_t t) {
  return t == JXO_DTYPE_COMPLEX64 ? JXO_DTYPE_FLOAT32
         : t == JXO_DTYPE_COMPLEX128 ? JXO_DTYPE_FLOAT64 : t;
}
}  // namespace

Aval packed(const Aval& a) {
  int32_t part = part_dtype(a.dtype);
  if (part == a.dtype) return a;
  Aval out(part, a.dims, a.known_rank);
  if (a.known_rank) out.dims.push_back(Dim{2, {}});
  return out;
}

std::shared_ptr<const Tensor> packed(std::shared_ptr<const Tensor> t) {
  int32_t part = part_dtype(t->dtype);
  if (part == t->dtype) return t;
  auto out = std::make_shared<Tensor>();
  out->dtype = part;
  out->dims = t->dims;
  out->dims.push_back(2);
  out->data = t->data;
  out->nbytes = t->nbytes;
  out->owner = std::shared_ptr<const void>(t, t->data);  // keeps `t` (and its buffer) alive
  return out;
}

}  // namespace jaxonnx
