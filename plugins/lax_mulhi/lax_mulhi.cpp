// lax_mulhi: mulhi(x, y), the high half of the double-width integer product.
// Up to 32 bits the product is exact in 64 bits: unsigned types shift it
// right (BitShift on uint64); signed types floor-divide it by 2^bits, as
// (p - Mod(p, 2^bits)) / 2^bits (Mod with fmod=0 is non-negative here, so
// the division is exact). 64-bit types split each operand into 32-bit halves
// in uint64 (what JAX's own fallback does); signed ones are computed on the
// unsigned bits and corrected by subtracting y where x < 0 and x where y < 0.
#include <jaxonnx/plugin.hpp>

#include <cstdint>
#include <string>

namespace {

using namespace jaxonnx::sdk;

Value u64c(Lowering& L, uint64_t v) { return L.constant(std::vector<uint64_t>{v}, {}); }

Value mulhi_u64(Lowering& L, Value x, Value y, const Aval& a) {
  auto op = [&](const char* o, Value p, Value q) { return bitwise(L, o, {p, q}, a); };
  auto shr = [&](Value v) { return L.op("BitShift", {v, u64c(L, 32)}, a, {Attr::s("direction", "RIGHT")}); };
  Value m = u64c(L, 0xffffffffull);
  Value xl = op("BitwiseAnd", x, m), xh = shr(x), yl = op("BitwiseAnd", y, m), yh = shr(y);
  Value hh = op("Mul", xh, yh), hl = op("Mul", xh, yl), lh = op("Mul", xl, yh), ll = op("Mul", xl, yl);
  Value cross = op("Add", op("Add", op("BitwiseAnd", hl, m), op("BitwiseAnd", lh, m)), shr(ll));
  return op("Add", op("Add", hh, shr(lh)), op("Add", shr(hl), shr(cross)));
}

void lower_mulhi(Lowering& L) {
  const Aval a = L.in_aval(0), out = L.out_aval(0);
  const int32_t t = a.dtype;
  if (!dtype::is_int(t)) L.fail(std::string("mulhi takes integers, got ") + dtype::name(t));
  const bool sg = dtype::is_signed_int(t);
  const int bits = static_cast<int>(dtype::itemsize(t)) * 8;
  Value x = L.input(0), y = L.input(1);
  if (bits == 64) {
    const Aval u = a.with_dtype(dtype::u64);
    Value xu = cast(L, x, a, dtype::u64), yu = cast(L, y, a, dtype::u64);
    Value hi = mulhi_u64(L, xu, yu, u);
    if (sg) {
      const Aval b = a.with_dtype(dtype::boolean);
      Value zero = scalar(L, dtype::i64, 0), uzero = u64c(L, 0);
      Value fx = where(L, L.op("Less", {x, zero}, b), yu, uzero, u);
      Value fy = where(L, L.op("Less", {y, zero}, b), xu, uzero, u);
      hi = L.op("Sub", {L.op("Sub", {hi, fx}, u), fy}, u);
    }
    L.bind(0, cast(L, hi, u, t));
    return;
  }
  const int32_t w = sg ? dtype::i64 : dtype::u64;
  const Aval wa = a.with_dtype(w);
  Value p = L.op("Mul", {cast(L, x, a, w), cast(L, y, a, w)}, wa);
  Value hi;
  if (sg) {
    Value k = scalar(L, dtype::i64, static_cast<double>(int64_t{1} << bits));
    Value r = L.op("Mod", {p, k}, wa, {Attr::i("fmod", 0)});
    hi = L.op("Div", {L.op("Sub", {p, r}, wa), k}, wa);
  } else {
    hi = L.op("BitShift", {p, u64c(L, static_cast<uint64_t>(bits))}, wa, {Attr::s("direction", "RIGHT")});
  }
  L.bind(0, cast(L, hi, wa, out.dtype));
}

}  // namespace

JAXONNX_PLUGIN("lax_mulhi", "0.1.0") {
  plugin.primitive("mulhi", lower_mulhi)
      .emits({"Cast", "Mul", "Mod", "Sub", "Div", "BitShift", "BitwiseAnd", "Add", "Less", "Where"})
      .summary("high half of the double-width product");
}
