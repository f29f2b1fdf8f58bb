// lax_fft: JAX's `fft` primitive (jnp.fft.fft/ifft/rfft/irfft/fft2/fftn/...)
// as ONNX DFT on the packed complex form (float[..., 2], jaxonnx/complex.hpp),
// which is DFT's own layout.
//
// Only forward, two-sided or real-input one-sided DFTs are emitted:
//  * onnxruntime's inverse DFT loses precision for float64 lengths that are not
//    powers of two (1e-8 at n = 7), so an inverse is the forward transform of
//    the conjugate: ifft(z) = conj(fft(conj z)) / n (exact identities, one Mul
//    by [1, -1] on each side);
//  * onnxruntime's float32 DFT of a length that is not a power of two (its
//    Bluestein path) drifts to 3e-5 relative at n = 1000, where JAX is at
//    float32 rounding: such transforms run in float64 and are rounded back;
//  * irfft extends the half spectrum to the full Hermitian one,
//    X[n - k] = conj X[k], takes a full transform and keeps the real part.
//    Like XLA it ignores the imaginary parts of X[0] (and X[n/2] for even n):
//    they only add an imaginary part to the result.
// Multi-axis transforms (fft_lengths of 1-3 trailing axes) apply the 1-D
// transform axis by axis (rfft: the last axis first, one-sided; irfft: the
// last axis last). A symbolic axis is transformed as it comes (DFT reads its
// length; float32 then computes in float64, the length being possibly not a
// power of two); irfft's output lengths must be static. Opset 20 takes DFT's axis as an input, 17-19 (DFT-17) as an
// attribute; below 17 a static axis is transformed by a MatMul with the DFT
// matrix (O(n^2); a symbolic axis fails there).
#include <jaxonnx/complex.hpp>
#include <jaxonnx/plugin.hpp>

#include <cmath>
#include <string>
#include <vector>

namespace {

using namespace jaxonnx::sdk;

enum FftType { kFft = 0, kIfft = 1, kRfft = 2, kIrfft = 3 };

int64_t fft_type(Lowering& L) {
  Param p = L.param("fft_type");
  if (p.kind() == JXO_PARAM_STRING) {
    std::string s = p.as_string();
    for (auto [name, t] : {std::pair<const char*, int64_t>{"FFT", kFft}, {"IFFT", kIfft},
                           {"RFFT", kRfft}, {"IRFFT", kIrfft}})
      if (s == name || s == std::string("FftType.") + name) return t;
    L.fail("unknown fft_type '" + s + "'");
  }
  return p.as_int();
}

bool power_of_two(int64_t n) { return n > 0 && (n & (n - 1)) == 0; }

// Before opset 17 (no DFT): the transform along a static `axis` of packed `x`
// as one MatMul by the real [n * c, m * 2] matrix of the DFT (c parts in, m
// frequencies out), the axis moved next to the parts and back. The angles
// 2 pi (j k mod n) / n are computed in double, then rounded to x's type.
Value dft_matmul(Lowering& L, Value x, int64_t axis, bool onesided, const Aval& out) {
  const Aval a = L.aval_of(x);
  const int64_t R = a.rank();
  const Dim& nd = a.shape[static_cast<size_t>(axis)];
  if (!nd.is_static())
    L.fail("fft along a symbolic axis (" + nd.str() + ") needs opset 17 (ONNX DFT); the model "
           "targets opset " + std::to_string(L.opset()));
  const int64_t n = nd.value, c = a.shape.back().value, m = out.shape[static_cast<size_t>(axis)].value;
  (void)onesided;
  std::vector<int64_t> perm;
  for (int64_t d = 0; d < R - 1; ++d) if (d != axis) perm.push_back(d);
  perm.push_back(axis);
  perm.push_back(R - 1);
  std::vector<int64_t> back(static_cast<size_t>(R));
  for (int64_t i = 0; i < R; ++i) back[static_cast<size_t>(perm[static_cast<size_t>(i)])] = i;
  Shape lead;
  for (int64_t d = 0; d < R - 1; ++d) if (d != axis) lead.push_back(a.shape[static_cast<size_t>(d)]);
  auto with = [&](std::vector<Dim> tail) {
    Shape sh = lead;
    for (const Dim& d : tail) sh.push_back(d);
    return Aval(a.dtype, sh);
  };
  const Aval moved = with({Dim(n), Dim(c)}), flat = with({Dim(n * c)}), prod = with({Dim(m * 2)}),
             pairs = with({Dim(m), Dim(2)});
  std::vector<double> w(static_cast<size_t>(n * c * m * 2));
  const double two_pi = 6.283185307179586476925286766559;
  for (int64_t j = 0; j < n; ++j)
    for (int64_t k = 0; k < m; ++k) {
      double th = two_pi * static_cast<double>((j * k) % n) / static_cast<double>(n);
      double co = std::cos(th), si = std::sin(th);
      // (re + i im)(cos - i sin) = (re cos + im sin) + i (im cos - re sin)
      auto at = [&](int64_t p, int64_t q) -> double& { return w[static_cast<size_t>(((j * c + p) * m + k) * 2 + q)]; };
      at(0, 0) = co;
      at(0, 1) = -si;
      if (c == 2) { at(1, 0) = si; at(1, 1) = co; }
    }
  Value mat = a.dtype == dtype::f64 ? L.constant(w, {n * c, m * 2})
                                    : L.constant(std::vector<float>(w.begin(), w.end()), {n * c, m * 2});
  Value xt = reshape(L, transpose(L, x, a, perm), moved, flat);
  Value y = reshape(L, L.op("MatMul", {xt, mat}, prod), prod, pairs);
  return transpose(L, y, pairs, back);
}

// A forward DFT of packed `x` (type `a`, last dim 1 for a real signal or 2)
// along `axis`; `out` is the result's type.
Value dft(Lowering& L, Value x, int64_t axis, bool onesided, const Aval& out) {
  if (L.opset() < 17) return dft_matmul(L, x, axis, onesided, out);
  std::vector<Attr> attrs = {Attr::i("inverse", 0), Attr::i("onesided", onesided ? 1 : 0)};
  if (L.opset() >= 20)
    return L.op("DFT", {x, kNoValue, L.constant(std::vector<int64_t>{axis}, {})}, out, attrs);
  attrs.push_back(Attr::i("axis", axis));
  return L.op("DFT", {x}, out, attrs);
}

// `x` (type `a`) times the constant [re, im] broadcast over the trailing dim.
Value scale_parts(Lowering& L, Value x, const Aval& a, double re, double im) {
  Value c = a.dtype == dtype::f64 ? L.constant(std::vector<double>{re, im}, {2})
                                  : L.constant(std::vector<float>{static_cast<float>(re), static_cast<float>(im)}, {2});
  return L.op("Mul", {x, c}, a);
}

Value slice_axis(Lowering& L, Value x, int64_t start, int64_t end, int64_t step, int64_t axis,
                 const Aval& out) {
  return L.op("Slice", {x, i64s(L, {start}), i64s(L, {end}), i64s(L, {axis}), i64s(L, {step})}, out);
}

void lower_fft(Lowering& L) {
  const int64_t type = fft_type(L);
  const Aval in = L.in_aval(0), out = L.out_aval(0);
  const int64_t rank = in.rank(), k = static_cast<int64_t>(L.param("fft_lengths").size());
  if (k < 1 || k > 3 || rank < k)
    L.fail("fft over " + std::to_string(k) + " axes of a rank-" + std::to_string(rank) + " operand");
  const int32_t t = complex::part_dtype(type == kRfft ? complex::of_part(in.dtype) : in.dtype);
  if (t != dtype::f32 && t != dtype::f64)
    L.fail(std::string("fft of a ") + dtype::name(in.dtype) + " operand is not lowered");
  // The transform lengths: the input's axes (symbolic ones too: DFT reads the
  // length from its input), but irfft's output lengths, static ones only.
  Shape lengths;
  if (type == kIrfft) {
    for (int64_t n : L.param("fft_lengths").as_ints()) lengths.push_back(Dim(n));
  } else {
    for (int64_t i = 0; i < k; ++i) lengths.push_back(in.shape[static_cast<size_t>(rank - k + i)]);
  }
  // float32 lengths that are not (or not known to be) powers of two compute
  // in float64 (see top).
  int32_t w = t;
  for (const Dim& n : lengths) if (!n.is_static() || !power_of_two(n.value)) w = dtype::f64;

  Shape s = in.shape;  // the logical shape as the transforms go
  auto packed_as = [&](const Shape& shape) { return Aval(w, complex::packed_shape(shape)); };
  Value x = L.input(0);
  double scale = 1;  // 1 / (product of the static inverse-transformed lengths)
  std::vector<Value> runtime_lengths;  // and of these, computed at run time
  const int64_t last = rank - 1;
  if (type == kRfft) {
    // Real (..., n) as (..., n, 1), one-sided along the last axis.
    x = cast(L, x, in, w);
    Shape col = s;
    col.push_back(Dim(1));
    x = L.op("Unsqueeze", {x, i64s(L, {-1})}, Aval(w, col));
    s[static_cast<size_t>(last)] = out.shape[static_cast<size_t>(last)];  // n // 2 + 1
    x = dft(L, x, last, true, packed_as(s));
    for (int64_t ax = rank - k; ax < last; ++ax) x = dft(L, x, ax, false, packed_as(s));
  } else {
    x = cast(L, x, complex::packed(in), w);
    if (type != kFft) x = scale_parts(L, x, packed_as(s), 1, -1);  // conj
    const int64_t full_axes_end = type == kIrfft ? last : rank;
    for (int64_t ax = rank - k; ax < full_axes_end; ++ax) {
      x = dft(L, x, ax, false, packed_as(s));
      if (type != kFft) {
        const Dim& n = lengths[static_cast<size_t>(ax - (rank - k))];
        if (n.is_static()) scale /= static_cast<double>(n.value);
        else runtime_lengths.push_back(dim_value(L, n));
      }
    }
    if (type == kIrfft) {
      // Hermitian extension of the (conjugated) half spectrum, then a full
      // forward transform whose real part is n * irfft.
      const int64_t n = lengths.back().value, half = n / 2 + 1;
      const Dim& h = s[static_cast<size_t>(last)];
      if (!h.is_static() || h.value < half)
        L.fail("irfft of length " + std::to_string(n) + " needs " + std::to_string(half) +
               " input frequencies along the last axis, got " + h.str());
      if (h.value > half) {
        s[static_cast<size_t>(last)] = Dim(half);
        x = slice_axis(L, x, 0, half, 1, last, packed_as(s));
      }
      const int64_t tail = (n - 1) / 2;  // X[n-k] = conj X[k], k = tail .. 1
      if (tail > 0) {
        Shape ts = s;
        ts[static_cast<size_t>(last)] = Dim(tail);
        Value mirrored = slice_axis(L, x, tail, 0, -1, last, packed_as(ts));
        mirrored = scale_parts(L, mirrored, packed_as(ts), 1, -1);
        s[static_cast<size_t>(last)] = Dim(n);
        x = L.op("Concat", {x, mirrored}, packed_as(s), {Attr::i("axis", last)});
      }
      x = dft(L, x, last, false, packed_as(s));
      Value re = complex::split(L, x, Aval(complex::of_part(w), s)).re;
      Value r = L.op("Mul", {re, scalar(L, w, scale / static_cast<double>(n))}, Aval(w, s));
      L.bind(0, cast(L, r, Aval(w, s), out.dtype));
      return;
    }
    if (type == kIfft) {
      x = scale_parts(L, x, packed_as(s), scale, -scale);  // conj, 1/N
      for (Value n : runtime_lengths)
        x = L.op("Div", {x, cast(L, n, Aval(dtype::i64, {1}), w)}, packed_as(s));
    }
  }
  L.bind(0, cast(L, x, packed_as(s), complex::part_dtype(out.dtype)));
}

}  // namespace

JAXONNX_PLUGIN("lax_fft", "0.1.0") {
  plugin.primitive("fft", lower_fft)
      .emits({"DFT", "Mul", "Div", "Cast", "Unsqueeze", "Slice", "Concat", "Gather", "MatMul",
              "Transpose", "Reshape"})
      .emits_shape_ops()
      .doc(onnx_doc("DFT"))
      .summary("DFT on the packed form over the last 1-3 axes; inverses as conjugated forward "
               "transforms, irfft by Hermitian extension; float32 non-power-of-two lengths in float64");
}
