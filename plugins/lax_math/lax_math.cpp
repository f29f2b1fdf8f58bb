// lax_math: JAX's transcendental, rounding and float binary math primitives
// that lax_elementwise does not cover, as ONNX elementwise ops.
//
// Where ONNX has the function (Sin, Floor, Atan, Mod, ...) it is one node.
// Where it does not (expm1, log1p, cbrt, exp2, erfc, erf_inv, lgamma,
// digamma, atan2, nextafter) the function is built from elementwise ops with
// the algorithms XLA uses (Kahan's expm1/log1p, Cephes erfc, Giles' erf_inv,
// Lanczos lgamma/digamma), so results agree with JAX to a few ulp.
//
// onnxruntime (CPU) has no float64 kernels for Tan, Asin, Acos, Atan, Sinh,
// Cosh, Asinh, Acosh, Atanh: float64 takes identities over ops it does have
// (Sin, Cos, Exp, Log, Sqrt) and Cephes' double atan, keeping f64 precision.
// float16/bfloat16 compute in float32 and cast back, as XLA does.
//
// JAX-vs-ONNX semantics handled (each tested):
//  * round: AWAY_FROM_ZERO (lax.round's default) is Round (half to even)
//    corrected on exact halves; TO_NEAREST_EVEN (jnp.round) is Round.
//  * rem: C fmod (sign of the dividend) is Mod(fmod=1). For integers XLA
//    defines x rem 0 = x and INT_MIN rem -1 = 0, where C's % traps: the
//    divisor is made safe first.
//  * clamp: min(max(x, lo), hi) with NaN-propagating Max/Min (ONNX Clip
//    ignores NaN bounds), lo/hi may be scalars.
//  * atan2 / signed zeros and infinities, nextafter without a bitcast, odd
//    functions keeping -0, erf_inv(+-1) = +-inf, digamma poles = NaN.
//  * complex / real / imag / conj: ONNX has no complex dtype, so complex
//    values are carried packed as float[..., 2] (jaxonnx/complex.hpp); these
//    build and take apart that form. square of a complex is a complex product;
//    sin and cos take complex operands too, and tan, the inverse and
//    hyperbolic functions, log1p, expm1 and exp2 (jaxonnx/complex_math.hpp).
#include <jaxonnx/complex.hpp>
#include <jaxonnx/complex_math.hpp>
#include <jaxonnx/expr.hpp>
#include <jaxonnx/plugin.hpp>
#include <jaxonnx/special.hpp>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace {

using namespace jaxonnx::sdk;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kPi = 3.14159265358979323846;
constexpr double kLn2 = 0.693147180559945309417;

// ------------------------------------------------------------------ builder --

// Elementwise ops in one floating working dtype (jaxonnx/expr.hpp), with the
// Lowering at hand for what is not elementwise (casts, Loops, shapes).
struct Ops : Expr {
  Lowering& L;
  Ops(Lowering& l, int32_t dt) : Expr(l, dt), L(l) {}
};

using special::expm1;
using special::log1p;
using special::poly;

// ------------------------------------------------------------ atan family --

// Cephes atan (double): reduce |x| to [0, 0.66] via pi/4 and pi/2, then
// x + x^3 P(x^2)/Q(x^2). |x| < 2^-27: atan(x) = x, which keeps -0.
constexpr double kAtanP[] = {-8.750608600031904122785E-1, -1.615753718733365076637E1,
                             -7.500855792314704667340E1, -1.228866684490136173410E2,
                             -6.485021904942025371773E1};
constexpr double kAtanQ[] = {1.0, 2.485846490142306297962E1, 1.650270098316988542046E2,
                             4.328810604912902668951E2, 4.853903996359136964868E2,
                             1.945506571482613964425E2};
constexpr double kMoreBits = 6.123233995736765886130E-17;  // pi/2 - double(pi/2)
constexpr double kTan3Pi8 = 2.41421356237309504880;

Value atan_f64(Ops& o, Value x) {
  Value ax = o.abs(x);
  Value big = o.gt(ax, o.k(kTan3Pi8));
  Value mid = o.gt(ax, o.k(0.66));
  Value xr = o.where(big, o.div(o.k(-1), ax),
                     o.where(mid, o.div(o.sub(ax, o.k(1)), o.add(ax, o.k(1))), ax));
  Value base = o.where(big, o.k(kPi / 2), o.where(mid, o.k(kPi / 4), o.k(0)));
  Value more = o.where(big, o.k(kMoreBits), o.where(mid, o.k(0.5 * kMoreBits), o.k(0)));
  Value z = o.mul(xr, xr);
  Value p = o.div(o.mul(z, poly(o, z, kAtanP)), poly(o, z, kAtanQ));
  Value r = o.add(base, o.add(o.add(o.mul(xr, p), xr), more));
  return o.copysign(o.where(o.lt(ax, o.k(7.450580596923828e-9)), ax, r), x);
}

// atan; float32 has ONNX Atan, float64 Cephes.
Value atan_any(Ops& o, Value x) { return o.f64() ? atan_f64(o, x) : o.f("Atan", {x}); }

// atan2(y, x) from atan of t = min(|x|,|y|) / max(|x|,|y|) in [0, 1], then
// the octant: pi/2 - r when |y| > |x|, pi - r when x is negative (or -0),
// and y's sign (or -0). Both zero: t = 0; both infinite: t = 1 (pi/4 family).
Value atan2(Ops& o, Value y, Value x) {
  Value ax = o.abs(x), ay = o.abs(y);
  Value hi = o.f("Max", {ax, ay}), lo = o.f("Min", {ax, ay});
  Value t = o.div(lo, hi);
  t = o.where(o.eq(lo, o.k(kInf)), o.k(1), t);
  t = o.where(o.eq(hi, o.k(0)), o.k(0), t);
  Value r = atan_any(o, t);
  r = o.where(o.gt(ay, ax), o.sub(o.k(kPi / 2), r), r);
  r = o.where(o.signbit(x), o.sub(o.k(kPi), r), r);
  return o.mul(r, o.sign_factor(y));
}

// asin(x) = 2 atan(x / (1 + sqrt((1-x)(1+x)))), acos(x) = 2 atan(sqrt((1-x)(1+x)) / (1+x))
// (XLA's identities); |x| > 1 gives sqrt of a negative: NaN.
Value sqrt_one_minus_sq(Ops& o, Value x) {
  return o.sqrt(o.mul(o.sub(o.k(1), x), o.add(o.k(1), x)));
}
Value asin_f64(Ops& o, Value x) {
  return o.mul(o.k(2), atan_f64(o, o.div(x, o.add(o.k(1), sqrt_one_minus_sq(o, x)))));
}
Value acos_f64(Ops& o, Value x) {
  Value r = o.mul(o.k(2), atan_f64(o, o.div(sqrt_one_minus_sq(o, x), o.add(o.k(1), x))));
  return o.where(o.eq(x, o.k(-1)), o.k(kPi), r);
}

// ---------------------------------------------------------- hyperbolics --

// cosh(x) = c + 1/(4c) with c = exp(|x| - log 2): no overflow before cosh does.
Value cosh_f64(Ops& o, Value x) {
  Value c = o.exp(o.sub(o.abs(x), o.k(kLn2)));
  return o.add(c, o.div(o.k(0.25), c));
}
// sinh(|x|): below 1 as (u + u/(u+1))/2 with u = expm1(|x|) (no
// cancellation); beyond, c - 1/(4c). Then x's sign.
Value sinh_f64(Ops& o, Value x) {
  Value ax = o.abs(x);
  Value u = expm1(o, ax);
  Value small = o.mul(o.k(0.5), o.add(u, o.div(u, o.add(u, o.k(1)))));
  Value c = o.exp(o.sub(ax, o.k(kLn2)));
  Value large = o.sub(c, o.div(o.k(0.25), c));
  return o.copysign(o.where(o.lt(ax, o.k(1)), small, large), x);
}
constexpr double kTwo28 = 268435456.0;  // beyond, sqrt(x^2 + 1) == |x| in double
// asinh(x) = sign(x) log1p(|x| + x^2 / (1 + sqrt(1 + x^2))); log|x| + log 2 when huge.
Value asinh_f64(Ops& o, Value x) {
  Value ax = o.abs(x);
  Value x2 = o.mul(ax, ax);
  Value mid = log1p(o, o.add(ax, o.div(x2, o.add(o.k(1), o.sqrt(o.add(o.k(1), x2))))));
  Value r = o.where(o.gt(ax, o.k(kTwo28)), o.add(o.log(ax), o.k(kLn2)), mid);
  r = o.where(o.lt(ax, o.k(1.0 / kTwo28)), ax, r);  // asinh(x) = x
  return o.copysign(r, x);
}
// acosh(x) = log1p(t + sqrt(t (t + 2))), t = x - 1; log x + log 2 when huge.
Value acosh_f64(Ops& o, Value x) {
  Value t = o.sub(x, o.k(1));
  Value mid = log1p(o, o.add(t, o.sqrt(o.mul(t, o.add(t, o.k(2))))));
  return o.where(o.gt(x, o.k(kTwo28)), o.add(o.log(x), o.k(kLn2)), mid);
}
// atanh(x) = sign(x) log1p(2|x| / (1 - |x|)) / 2.
Value atanh_f64(Ops& o, Value x) {
  Value ax = o.abs(x);
  return o.copysign(o.mul(o.k(0.5), log1p(o, o.div(o.mul(o.k(2), ax), o.sub(o.k(1), ax)))), x);
}

// -------------------------------------------------------------- rounding --

// round(x) half away from zero: Round rounds halves to even. When x sits
// exactly halfway (d = x - Round(x) is exactly +-0.5), Round went toward zero
// iff d has x's sign, and then the answer is Round(x) + sign(x): subtract
// c = Where(half, -(d + sign(x)/2), 0), which is -sign(x) or 0 (subtracting
// +0 keeps Round's -0). No floor(|x| + 0.5): that rounds 0.49999997 up.
Value round_away(Ops& o, Value x) {
  Value r = o.f("Round", {x});
  Value d = o.sub(x, r);
  Value half = o.eq(o.abs(d), o.k(0.5));
  Value c = o.where(half, o.sub(o.mul(o.f("Sign", {x}), o.k(-0.5)), d), o.k(0));
  return o.sub(r, c);
}

// cbrt(x) = sign(x) |x|^(1/3), -0 included.
Value cbrt(Ops& o, Value x) { return o.copysign(o.f("Pow", {o.abs(x), o.k(1.0 / 3.0)}), x); }

// ------------------------------------------------------------------ erfc --

// XLA's erfc: 1 - erf(x) for |x| <= 1, otherwise Cephes' erfc. float32:
//   erf(x) = x T(x^2);  erfc(x) = exp(-x^2)/|x| * (P or R)(1/x^2)
constexpr double kErfT32[] = {+7.853861353153693E-5, -8.010193625184903E-4, +5.188327685732524E-3,
                              -2.685381193529856E-2, +1.128358514861418E-1, -3.761262582423300E-1,
                              +1.128379165726710E+0};
constexpr double kErfcP32[] = {+2.326819970068386E-2, -1.387039388740657E-1, +3.687424674597105E-1,
                               -5.824733027278666E-1, +6.210004621745983E-1, -4.944515323274145E-1,
                               +3.404879937665872E-1, -2.741127028184656E-1, +5.638259427386472E-1};
constexpr double kErfcR32[] = {-1.047766399936249E+1, +1.297719955372516E+1, -7.495518717768503E+0,
                               +2.921019019210786E+0, -1.015265279202700E+0, +4.218463358204948E-1,
                               -2.820767439740514E-1, +5.641895067754075E-1};
// float64: erf(x) = x T(x^2)/U(x^2); erfc(x) = exp(-x^2) P(|x|)/Q(|x|) (< 8), R/S (>= 8).
constexpr double kErfT64[] = {9.60497373987051638749E0, 9.00260197203842689217E1,
                              2.23200534594684319226E3, 7.00332514112805075473E3,
                              5.55923013010394962768E4};
constexpr double kErfU64[] = {1.0, 3.35617141647503099647E1, 5.21357949780152679795E2,
                              4.59432382970980127987E3, 2.26290000613890934246E4,
                              4.92673942608635921086E4};
constexpr double kErfcP64[] = {2.46196981473530512524E-10, 5.64189564831068821977E-1,
                               7.46321056442269912687E0,   4.86371970985681366614E1,
                               1.96520832956077098242E2,   5.26445194995477358631E2,
                               9.34528527171957607540E2,   1.02755188689515710272E3,
                               5.57535335369399327526E2};
constexpr double kErfcQ64[] = {1.0, 1.32281951154744992508E1, 8.67072140885989742329E1,
                               3.54937778887819891062E2, 9.75708501743205489753E2,
                               1.82390916687909736289E3, 2.24633760818710981792E3,
                               1.65666309194161350182E3, 5.57535340817727675546E2};
constexpr double kErfcR64[] = {5.64189583547755073984E-1, 1.27536670759978104416E0,
                               5.01905042251180477414E0,  6.16021097993053585195E0,
                               7.40974269950448939160E0,  2.97886665372100240670E0};
constexpr double kMaxLog = 7.09782712893383996843E2;  // log(DBL_MAX)
constexpr double kErfcS64[] = {1.0, 2.26052863220117276590E0, 9.39603524938001434673E0,
                               1.20489539808096656605E1, 1.70814450747565897222E1,
                               9.60896809063285878198E0, 3.36907645100081516050E0};

Value erfc(Ops& o, Value x) {
  Value ax = o.abs(x);
  Value z = o.mul(x, x);
  Value e = o.exp(o.neg(z));
  Value near, tail;
  if (o.f64()) {
    near = o.sub(o.k(1), o.div(o.mul(x, poly(o, z, kErfT64)), poly(o, z, kErfU64)));
    tail = o.mul(e, o.where(o.lt(ax, o.k(8)), o.div(poly(o, ax, kErfcP64), poly(o, ax, kErfcQ64)),
                            o.div(poly(o, ax, kErfcR64), poly(o, ax, kErfcS64))));
    tail = o.where(o.gt(z, o.k(kMaxLog)), o.k(0), tail);  // exp underflows (and inf/inf at +-inf)
  } else {
    near = o.sub(o.k(1), o.mul(x, poly(o, z, kErfT32)));
    Value q = o.div(o.k(1), ax);
    Value y = o.mul(q, q);
    tail = o.mul(o.mul(e, q), o.where(o.lt(ax, o.k(2)), poly(o, y, kErfcP32), poly(o, y, kErfcR32)));
  }
  tail = o.where(o.lt(x, o.k(0)), o.sub(o.k(2), tail), tail);
  return o.where(o.gt(ax, o.k(1)), tail, near);
}

// erf in float64 (onnxruntime has no float64 Erf): x T(x^2)/U(x^2) below 1,
// else 1 - erfc(x), as XLA.
Value erf_f64(Ops& o, Value x) {
  Value z = o.mul(x, x);
  Value small = o.div(o.mul(x, poly(o, z, kErfT64)), poly(o, z, kErfU64));
  return o.where(o.lt(o.abs(x), o.k(1)), small, o.sub(o.k(1), erfc(o, x)));
}

// --------------------------------------------------------------- erf_inv --

// Giles, "Approximating the erfinv function" (XLA's ErfInv; jaxonnx/special.hpp).
Value erf_inv(Ops& o, Value x) { return special::erf_inv(o, x); }

// ------------------------------------------------------ lgamma / digamma --

// XLA's Lanczos approximation (g = 7, n = 9) with the reflection formula for
// x < 0.5, in the input's float type.
constexpr double kLanczosGamma = 7;
constexpr double kLanczosBase = 0.99999999999980993227684700473478;
constexpr double kLanczos[] = {676.520368121885098567009190444019, -1259.13921672240287047156078755283,
                               771.3234287776530788486528258894,   -176.61502916214059906584551354,
                               12.507343278686904814458936853,     -0.13857109526572011689554707,
                               9.984369578019570859563e-6,         1.50563273514931155834e-7};

struct LanczosParts {
  Value reflect, z, log_t, t;
};
LanczosParts lanczos_common(Ops& o, Value x) {
  LanczosParts s;
  s.reflect = o.lt(x, o.k(0.5));
  s.z = o.where(s.reflect, o.neg(x), o.sub(x, o.k(1)));
  s.t = o.add(o.k(kLanczosGamma + 0.5), s.z);
  s.log_t = o.add(o.k(std::log(kLanczosGamma + 0.5)), log1p(o, o.div(s.z, o.k(kLanczosGamma + 0.5))));
  return s;
}

// lgamma(z + 1) = log sqrt(2 pi) + (z + 1/2 - t/log t) log t + log A(z);
// x < 0.5: log pi - lgamma(1 - x) - log|sin(pi x)|, sin taken of the reduced
// fraction of |x| so poles give log 0 = -inf and lgamma = +inf.
Value lgamma(Ops& o, Value x) {
  LanczosParts s = lanczos_common(o, x);
  Value a = o.k(kLanczosBase);
  for (size_t i = 0; i < std::size(kLanczos); ++i)
    a = o.add(a, o.div(o.k(kLanczos[i]), o.add(s.z, o.k(static_cast<double>(i) + 1))));
  Value log_y = o.add(o.add(o.k((std::log(2.0) + std::log(kPi)) / 2),
                            o.mul(o.sub(o.add(s.z, o.k(0.5)), o.div(s.t, s.log_t)), s.log_t)),
                      o.log(a));
  Value ax = o.abs(x);
  Value frac = o.sub(ax, o.floor(ax));
  Value reduced = o.where(o.gt(frac, o.k(0.5)), o.sub(o.k(1), frac), frac);
  Value denom = o.log(o.f("Sin", {o.mul(o.k(kPi), reduced)}));
  Value finite = o.lt(o.abs(denom), o.k(kInf));
  Value reflection = o.where(finite, o.sub(o.sub(o.k(std::log(kPi)), denom), log_y), o.neg(denom));
  Value r = o.where(s.reflect, reflection, log_y);
  return o.where(o.eq(ax, o.k(kInf)), o.k(kInf), r);
}

Value digamma(Ops& o, Value x);

// ------------------------------------------------------- zeta / polygamma --

// Hurwitz zeta(x, q) by Euler-Maclaurin summation, as Cephes: the terms
// q^-x .. (q+9)^-x, the integral and half-term corrections at w = q + 9, and
// 12 Bernoulli terms (Cephes stops once a term is below machine epsilon;
// summing them all changes the result by less). Poles and domain as XLA:
// x == 1 -> inf, x < 1 -> NaN, q a non-positive integer -> inf, q < 0 with
// a non-integer x -> NaN. Accurate for q > 0 (q < 0 sums from q + 9 < 9).
constexpr double kZetaA[] = {12.0,
                             -720.0,
                             30240.0,
                             -1209600.0,
                             47900160.0,
                             -1.8924375803183791606e9,
                             7.47242496e10,
                             -2.950130727918164224e12,
                             1.1646782814350067249e14,
                             -4.5979787224074726105e15,
                             1.8152105401943546773e17,
                             -7.1661652561756670113e18};

Value zeta(Ops& o, Value x, Value q) {
  Value negx = o.neg(x);
  Value a = q, b = o.f("Pow", {q, negx}), s = b;
  for (int i = 0; i < 9; ++i) {
    a = o.add(a, o.k(1));
    b = o.f("Pow", {a, negx});
    s = o.add(s, b);
  }
  Value w = a;
  s = o.add(s, o.div(o.mul(b, w), o.sub(x, o.k(1))));
  s = o.sub(s, o.mul(o.k(0.5), b));
  Value fac = o.k(1);
  double k = 0;
  for (double ai : kZetaA) {
    fac = o.mul(fac, o.add(x, o.k(k)));
    b = o.div(b, w);
    s = o.add(s, o.div(o.mul(fac, b), o.k(ai)));
    k += 1;
    fac = o.mul(fac, o.add(x, o.k(k)));
    b = o.div(b, w);
    k += 1;
  }
  Value q_int = o.eq(q, o.floor(q)), x_int = o.eq(x, o.floor(x));
  s = o.where(o.and_(o.lt(q, o.k(0)), o.b("Not", {x_int})), o.k(NAN), s);
  s = o.where(o.and_(o.le(q, o.k(0)), q_int), o.k(kInf), s);
  s = o.where(o.lt(x, o.k(1)), o.k(NAN), s);
  return o.where(o.eq(x, o.k(1)), o.k(kInf), s);
}

// polygamma(n, x): digamma for n == 0; else (-1)^(n+1) n! zeta(n+1, x), n!
// as exp(lgamma(n+1)) as XLA; NaN unless n is a non-negative integer.
Value polygamma(Ops& o, Value n, Value x) {
  Value n1 = o.add(n, o.k(1));
  Value odd = o.sub(n, o.mul(o.k(2), o.floor(o.mul(n, o.k(0.5)))));  // 1 for odd n
  Value sign = o.sub(o.mul(o.k(2), odd), o.k(1));
  Value r = o.mul(o.mul(sign, o.exp(lgamma(o, n1))), zeta(o, n1, x));
  r = o.where(o.eq(n, o.k(0)), digamma(o, x), r);
  Value bad = o.or_(o.lt(n, o.k(0)), o.b("Not", {o.eq(n, o.floor(n))}));
  return o.where(bad, o.k(NAN), r);
}

// ---------------------------------------------------------- igamma / igammac --

// The regularized incomplete gamma functions P(a, x) (igamma) and Q(a, x)
// (igammac), as JAX's igamma_impl / igammac_impl: Cephes' power series for
// P where x < 1 or x < a, else the continued fraction for Q, each iterated
// per element until its term falls below machine epsilon. The iterations are
// ONNX Loops over the whole tensor with a per-element `enabled` mask (the
// series runs while any element is enabled; the continued fraction at most
// 2000 times, as JAX), so every element takes JAX's steps.

// Any element of the bool tensor v, as a bool scalar.
Value any_of(Ops& o, Value v) {
  Aval a = o.L.aval_of(v);
  Value u = cast(o.L, v, a, dtype::u8);
  Value m = o.L.op("ReduceMax", {u}, Aval(dtype::u8, {}), {Attr::i("keepdims", 0)});
  return cast(o.L, m, Aval(dtype::u8, {}), dtype::boolean);
}

// Runs `step` (state -> next state, state[0] the bool mask) in a Loop of at
// most `trips` iterations (kNoValue: unbounded) while any element is enabled;
// disabled elements keep their values. `step` gets the iteration number too.
template <typename Step>
std::vector<Value> masked_loop(Ops& o, const std::vector<Value>& init, Value trips, Step step) {
  Lowering& L = o.L;
  std::vector<Aval> avals;
  for (Value v : init) avals.push_back(L.aval_of(v));
  Value cond0 = any_of(o, init[0]);
  Subgraph g = L.begin_subgraph("igamma_body");
  Value iter = g.input(Aval(dtype::i64, {}), "iter");
  g.input(Aval(dtype::boolean, {}), "cond_in");
  std::vector<Value> state;
  for (const Aval& a : avals) state.push_back(g.input(a, "carry"));
  std::vector<Value> next = step(iter, state);
  for (size_t j = 1; j < next.size(); ++j) next[j] = o.where(state[0], next[j], state[j]);
  std::vector<Value> outs{any_of(o, next[0])};
  outs.insert(outs.end(), next.begin(), next.end());
  GraphRef gr = g.end(outs);
  std::vector<Value> ins{trips, cond0};
  ins.insert(ins.end(), init.begin(), init.end());
  return L.op_n("Loop", ins, avals, {Attr::graph("body", gr)});
}

double eps_of(Ops& o) { return o.f64() ? std::numeric_limits<double>::epsilon() : std::numeric_limits<float>::epsilon(); }

// `v` (a scalar constant) expanded to the shape of `like`.
Value full_like(Ops& o, Value like, double v) {
  Aval a = o.L.aval_of(like);
  return o.L.op("Expand", {o.k(v), shape_value(o.L, a.shape)}, a.with_dtype(o.t));
}

// Cephes' series for P(a, x): ans * ax / a.
Value igamma_series(Ops& o, Value ax, Value x, Value a, Value enabled) {
  const double eps = eps_of(o);
  std::vector<Value> out = masked_loop(
      o, {enabled, a, full_like(o, x, 1), full_like(o, x, 1)}, kNoValue,
      [&](Value, const std::vector<Value>& s) {
        Value r = o.add(s[1], o.k(1));
        Value c = o.mul(s[2], o.div(x, r));
        Value ans = o.add(s[3], c);
        Value more = o.and_(s[0], o.gt(o.div(c, ans), o.k(eps)));
        return std::vector<Value>{more, r, c, ans};
      });
  return o.div(o.mul(out[3], ax), a);
}

// Cephes' continued fraction for Q(a, x): ans * ax.
Value igammac_fraction(Ops& o, Value ax, Value x, Value a, Value enabled) {
  const double eps = eps_of(o);
  Value y = o.sub(o.k(1), a);
  Value z = o.add(o.add(x, y), o.k(1));
  Value pkm2 = full_like(o, x, 1), qkm2 = x, pkm1 = o.add(x, o.k(1)), qkm1 = o.mul(z, x);
  Value ans = o.div(pkm1, qkm1);
  std::vector<Value> out = masked_loop(
      o, {enabled, ans, y, z, pkm1, qkm1, pkm2, qkm2}, scalar(o.L, dtype::i64, 2000),
      [&](Value iter, const std::vector<Value>& s) {
        Value c = cast(o.L, o.L.op("Add", {iter, scalar(o.L, dtype::i64, 1)}, Aval(dtype::i64, {})),
                           Aval(dtype::i64, {}), o.t);
        Value y1 = o.add(s[2], o.k(1)), z1 = o.add(s[3], o.k(2));
        Value yc = o.mul(y1, c);
        Value pk = o.sub(o.mul(s[4], z1), o.mul(s[6], yc));
        Value qk = o.sub(o.mul(s[5], z1), o.mul(s[7], yc));
        Value nz = o.b("Not", {o.eq(qk, o.k(0))});
        Value r = o.div(pk, qk);
        Value t = o.where(nz, o.abs(o.div(o.sub(s[1], r), r)), o.k(1));
        Value ans1 = o.where(nz, r, s[1]);
        Value rescale = o.gt(o.abs(pk), o.k(1 / eps));
        auto scaled = [&](Value v) { return o.where(rescale, o.mul(v, o.k(eps)), v); };
        Value more = o.and_(s[0], o.gt(t, o.k(eps)));
        return std::vector<Value>{more, ans1, y1, z1, scaled(pk), scaled(qk), scaled(s[4]), scaled(s[5])};
      });
  return o.mul(out[1], ax);
}

struct GammaCommon {
  Value domain, x_inf, a0, x0, underflow, ax;
};
GammaCommon gamma_common(Ops& o, Value a, Value x) {
  GammaCommon g;
  Value is_nan = o.or_(o.b("IsNaN", {a}), o.b("IsNaN", {x}));
  g.x_inf = o.eq(x, o.k(kInf));
  g.a0 = o.eq(a, o.k(0));
  g.x0 = o.eq(x, o.k(0));
  g.domain = o.or_(o.or_(o.lt(x, o.k(0)), o.lt(a, o.k(0))), o.or_(o.and_(g.a0, g.x0), is_nan));
  Value ax = o.sub(o.sub(o.mul(a, o.log(x)), x), lgamma(o, a));
  const double log_max = o.f64() ? std::log(std::numeric_limits<double>::max())
                                 : std::log(std::numeric_limits<float>::max());
  g.underflow = o.lt(ax, o.k(-log_max));
  g.ax = o.exp(ax);
  return g;
}

Value igamma(Ops& o, Value a, Value x) {
  GammaCommon g = gamma_common(o, a, x);
  Value use_c = o.and_(o.b("GreaterOrEqual", {x, o.k(1)}), o.gt(x, a));
  Value enabled = o.b("Not", {o.or_(o.or_(g.x0, g.domain), o.or_(g.underflow, g.x_inf))});
  Value not_c = o.b("Not", {use_c});
  Value r = o.where(use_c, o.sub(o.k(1), igammac_fraction(o, g.ax, x, a, o.and_(enabled, use_c))),
                    igamma_series(o, g.ax, x, a, o.and_(enabled, not_c)));
  r = o.where(g.x0, o.k(0), r);
  r = o.where(g.x_inf, o.k(1), r);
  return o.where(g.domain, o.k(NAN), r);
}

Value igammac(Ops& o, Value a, Value x) {
  GammaCommon g = gamma_common(o, a, x);
  Value use_p = o.or_(o.lt(x, o.k(1)), o.lt(x, a));
  Value enabled = o.b("Not", {o.or_(o.or_(g.domain, g.underflow), o.or_(g.x_inf, g.a0))});
  Value r = o.where(use_p, o.sub(o.k(1), igamma_series(o, g.ax, x, a, o.and_(enabled, use_p))),
                    igammac_fraction(o, g.ax, x, a, o.and_(enabled, o.b("Not", {use_p}))));
  r = o.where(o.or_(g.x_inf, g.a0), o.k(0), r);
  return o.where(g.domain, o.k(NAN), r);
}

// ------------------------------------------------ regularized_incomplete_beta --

int32_t working_dtype(int32_t t);
void require_float(Lowering& L, int32_t t);

// I_x(a, b) as JAX's regularized_incomplete_beta_impl: the continued fraction
// of DLMF 8.17.22 by the Lentz-Thompson-Barnett algorithm (all elements step
// together until every one has converged; at most 199 / 599 steps for
// float32 / float64, as JAX), on the symmetric side where it converges fast.
Value betainc(Ops& o, Value a, Value b, Value x) {
  Lowering& L = o.L;
  const double eps = eps_of(o), small = eps / 2;
  const double tiny = o.f64() ? std::numeric_limits<double>::min() : std::numeric_limits<float>::min();
  Value a_zero = o.or_(o.eq(a, o.k(0)), o.eq(b, o.k(kInf)));
  Value b_zero = o.or_(o.eq(b, o.k(0)), o.eq(a, o.k(kInf)));
  Value x_zero = o.eq(x, o.k(0)), x_one = o.eq(x, o.k(1));
  Value is_nan = o.or_(o.or_(o.b("IsNaN", {a}), o.b("IsNaN", {b})), o.b("IsNaN", {x}));
  Value res_zero = o.or_(o.and_(b_zero, o.b("Not", {x_one})), o.and_(a_zero, x_zero));
  Value res_one = o.or_(o.and_(a_zero, o.b("Not", {x_zero})), o.and_(b_zero, x_one));
  Value res_nan = o.or_(o.or_(o.lt(a, o.k(0)), o.lt(b, o.k(0))), o.or_(o.lt(x, o.k(0)), o.gt(x, o.k(1))));
  res_nan = o.or_(res_nan, o.or_(o.and_(a_zero, b_zero), is_nan));
  Value fast = o.lt(x, o.div(o.add(a, o.k(1)), o.add(o.add(a, b), o.k(2))));
  Value a2 = o.where(fast, a, b), b2 = o.where(fast, b, a), x2 = o.where(fast, x, o.sub(o.k(1), x));

  // h0 = small (the 0th partial denominator is 0), c = h0, d = 0.
  Value h0 = full_like(o, x2, small);
  const int64_t trips = (o.f64() ? 600 : 200) - 1;
  Value go = scalar(L, dtype::boolean, 1);
  std::vector<Value> out = masked_loop(
      o, {go, h0, full_like(o, x2, 0), h0}, scalar(L, dtype::i64, static_cast<double>(trips)),
      [&](Value iter, const std::vector<Value>& s) {
        const Aval i64(dtype::i64, {}), bl(dtype::boolean, {});
        Value n = L.op("Add", {iter, scalar(L, dtype::i64, 1)}, i64);  // iterations 1, 2, ...
        Value even = L.op("Equal", {L.op("Mod", {n, scalar(L, dtype::i64, 2)}, i64), scalar(L, dtype::i64, 0)}, bl);
        Value one = L.op("Equal", {n, scalar(L, dtype::i64, 1)}, bl);
        Value mi = L.op("Div", {L.op("Sub", {n, scalar(L, dtype::i64, 1)}, i64), scalar(L, dtype::i64, 2)}, i64);
        Value m_zero = L.op("Equal", {mi, scalar(L, dtype::i64, 0)}, bl);
        Value m = cast(L, mi, i64, o.t);
        Value two_m = o.mul(o.k(2), m);
        Value zero_num = o.div(o.mul(o.neg(o.add(a2, b2)), x2), o.add(a2, o.k(1)));
        Value even_num = o.div(o.mul(o.mul(o.neg(o.add(a2, m)), o.add(o.add(a2, b2), m)), x2),
                               o.mul(o.add(a2, two_m), o.add(o.add(a2, two_m), o.k(1))));
        even_num = o.where(m_zero, zero_num, even_num);
        Value odd_num = o.div(o.mul(o.mul(m, o.sub(b2, m)), x2),
                              o.mul(o.sub(o.add(a2, two_m), o.k(1)), o.add(a2, two_m)));
        Value num = o.where(one, o.k(1), o.where(even, even_num, odd_num));
        Value c = o.add(o.k(1), o.div(num, s[1]));
        c = o.where(o.lt(o.abs(c), o.k(small)), o.k(small), c);
        Value d = o.add(o.k(1), o.mul(num, s[2]));
        d = o.where(o.lt(o.abs(d), o.k(small)), o.k(small), d);
        d = o.div(o.k(1), d);
        Value delta = o.mul(c, d);
        Value h = o.mul(s[3], delta);
        Value more = any_of(o, o.b("GreaterOrEqual", {o.abs(o.sub(delta, o.k(1))), o.k(small)}));
        return std::vector<Value>{more, c, d, h};
      });
  Value cf = out[3];
  Value lbeta_small = o.sub(lgamma(o, b2), lgamma(o, o.add(a2, b2)));
  Value lbeta = o.add(lgamma(o, a2), lbeta_small);
  Value l1mx = log1p(o, o.neg(x2));
  Value factor = o.where(o.lt(a2, o.k(tiny * 2)), o.exp(o.sub(o.mul(l1mx, b2), lbeta_small)),
                         o.div(o.exp(o.sub(o.add(o.mul(o.log(x2), a2), o.mul(l1mx, b2)), lbeta)), a2));
  Value r = o.mul(cf, factor);
  r = o.where(fast, r, o.sub(o.k(1), r));
  r = o.where(res_zero, o.k(0), r);
  r = o.where(res_one, o.k(1), r);
  return o.where(res_nan, o.k(NAN), r);
}

void lower_betainc(Lowering& L) {
  Aval a = L.in_aval(0), out = L.out_aval(0);
  require_float(L, a.dtype);
  Ops o{L, working_dtype(a.dtype)};
  Value y = betainc(o, cast(L, L.input(0), a, o.t), cast(L, L.input(1), L.in_aval(1), o.t),
                    cast(L, L.input(2), L.in_aval(2), o.t));
  L.bind(0, cast(L, y, L.aval_of(y), out.dtype));
}

// digamma(z + 1) = log t + A'(z)/A(z) - g/t; x < 0.5: digamma(1 - x) -
// pi cot(pi x) on x shifted into [-0.5, 0.5]; NaN at 0 and negative integers.
Value digamma(Ops& o, Value x) {
  LanczosParts s = lanczos_common(o, x);
  Value num = o.k(0), den = o.k(kLanczosBase);
  for (size_t i = 0; i < std::size(kLanczos); ++i) {
    Value zi = o.add(s.z, o.k(static_cast<double>(i) + 1));
    num = o.sub(num, o.div(o.k(kLanczos[i]), o.mul(zi, zi)));
    den = o.add(den, o.div(o.k(kLanczos[i]), zi));
  }
  Value y = o.sub(o.add(s.log_t, o.div(num, den)), o.div(o.k(kLanczosGamma), s.t));
  Value reduced = o.add(x, o.abs(o.floor(o.add(x, o.k(0.5)))));
  Value pr = o.mul(o.k(kPi), reduced);
  Value reflection = o.sub(y, o.div(o.mul(o.k(kPi), o.f("Cos", {pr})), o.f("Sin", {pr})));
  Value r = o.where(s.reflect, reflection, y);
  Value pole = o.and_(o.le(x, o.k(0)), o.eq(x, o.floor(x)));
  return o.where(pole, o.k(NAN), r);
}

// ------------------------------------------------------------- nextafter --

// nextafter(x, y) without a bitcast (ONNX has none). For finite x, adding
// d = |x| * 1.25 * 2^-p (p = significand bits) towards y lands within
// (1/2, 3/2) of the neighbour's spacing in that direction (also below a power
// of two, where the spacing halves), so the rounded sum IS the neighbour.
// d must not be subnormal for that, so |x| < 2^-100 (f32) / 2^-900 (f64)
// works scaled up by an exact power of two and scales back; at |x| <= the
// smallest normal the neighbours are x +- the smallest subnormal, exactly.
// Then: inf -> +-max, x == y -> y, NaN -> NaN (via the sign of y - x).
Value nextafter(Ops& o, Value x, Value y) {
  const bool d = o.f64();
  const double p_eps = d ? 1.25 * std::ldexp(1.0, -53) : 1.25 * std::ldexp(1.0, -24);
  const double small = d ? std::ldexp(1.0, -900) : std::ldexp(1.0, -100);
  const double scale = d ? std::ldexp(1.0, 600) : std::ldexp(1.0, 50);
  const double min_normal = d ? std::numeric_limits<double>::min() : std::numeric_limits<float>::min();
  const double denorm = d ? std::numeric_limits<double>::denorm_min() : std::numeric_limits<float>::denorm_min();
  const double max = d ? std::numeric_limits<double>::max() : std::numeric_limits<float>::max();

  Value dir = o.f("Sign", {o.sub(y, x)});  // NaN if x or y is NaN
  Value ax = o.abs(x);
  Value is_small = o.lt(ax, o.k(small));
  Value s = o.where(is_small, o.k(scale), o.k(1));
  Value sx = o.mul(x, s);
  Value step = o.mul(dir, o.mul(o.abs(sx), o.k(p_eps)));
  Value r = o.div(o.add(sx, step), s);
  r = o.where(o.le(ax, o.k(min_normal)), o.add(x, o.mul(dir, o.k(denorm))), r);
  r = o.where(o.eq(ax, o.k(kInf)), o.mul(o.abs(dir), o.k(max)), r);  // |dir|: NaN for y NaN
  // Magnitude, then the sign (Where loses -0): y's when x == y, the
  // direction's when leaving 0, else x's (kept when stepping onto 0).
  Value same = o.eq(x, y);
  Value mag = o.where(same, o.abs(y), o.abs(r));
  Value sign = o.where(same, o.sign_factor(y), o.where(o.eq(x, o.k(0)), dir, o.sign_factor(x)));
  return o.mul(mag, sign);
}

// ------------------------------------------------------------ lowerings --

using Fn1 = Value (*)(Ops&, Value);
using Fn2 = Value (*)(Ops&, Value, Value);

// float16/bfloat16 compute in float32 (few of these ops have half kernels,
// and XLA upcasts these functions too); the result is cast back.
int32_t working_dtype(int32_t t) { return t == dtype::f16 || t == dtype::bf16 ? dtype::f32 : t; }

void require_float(Lowering& L, int32_t t) {
  if (!dtype::is_float(t))
    L.fail(std::string(L.primitive()) + " takes floating operands, got " + dtype::name(t));
}

// A complex operand (packed, jaxonnx/complex.hpp) of the functions
// complex_math.hpp defines.
void lower_complex_unary(Lowering& L) {
  Aval a = L.in_aval(0);
  complex::Function fn = complex::function(L.primitive());
  if (!fn) L.fail(std::string(L.primitive()) + " of a complex operand is not lowered by lax_math");
  L.bind(0, complex::pack(L, fn(L, complex::split(L, L.input(0), a), complex::part(a)), a));
}

void lower_unary(Lowering& L, Fn1 fn) {
  Aval in = L.in_aval(0), out = L.out_aval(0);
  if (complex::is(in.dtype)) return lower_complex_unary(L);
  require_float(L, in.dtype);
  Ops o{L, working_dtype(in.dtype)};
  Value y = fn(o, cast(L, L.input(0), in, o.t));
  L.bind(0, cast(L, y, L.aval_of(y), out.dtype));
}

void lower_binary(Lowering& L, Fn2 fn) {
  Aval a = L.in_aval(0), b = L.in_aval(1), out = L.out_aval(0);
  require_float(L, a.dtype);
  Ops o{L, working_dtype(a.dtype)};
  Value y = fn(o, cast(L, L.input(0), a, o.t), cast(L, L.input(1), b, o.t));
  L.bind(0, cast(L, y, L.aval_of(y), out.dtype));
}

// One-op functions by dtype: the ONNX op where onnxruntime has a kernel for
// the working dtype, else (float64) the identity-based build.
struct Unary {
  const char* primitive;
  const char* onnx;  // the op for float32 (and float64 when f64 is null)
  Fn1 f64;           // float64 replacement, or null
  std::vector<const char*> f64_ops;
};

// tan = sin / cos. onnxruntime's float64 Cos is accurate in absolute, not
// relative, terms (~1e-16), so within ~1e-7 of a pole tan's relative error
// grows to ~1e-9 (JAX's own tan is exact there).
Value tan_f64(Ops& o, Value x) { return o.div(o.f("Sin", {x}), o.f("Cos", {x})); }

// Ops the shared helpers emit, for .emits().
#define LOG1P_OPS "Add", "Sub", "Mul", "Div", "Log", "Equal", "Where"
#define ATAN_OPS "Abs", "Greater", "Less", "Where", "Div", "Sub", "Add", "Mul", "Or"
// copysign
#define SIGN_OPS "Abs", "Less", "Div", "Or", "Where", "Mul"

const Unary kUnary[] = {
    {"sin", "Sin", nullptr, {"Gather", "Exp", "Neg", "Mul", "Add", "Sub", "Abs", "Less", "Where",
                             "Cos", "Unsqueeze", "Concat"}},  // complex operands
    {"erf", "Erf", erf_f64, {"Abs", "Mul", "Add", "Sub", "Div", "Neg", "Exp", "Less", "Greater", "Where"}},
    {"cos", "Cos", nullptr, {"Gather", "Exp", "Neg", "Mul", "Add", "Sub", "Abs", "Less", "Where",
                             "Sin", "Unsqueeze", "Concat"}},  // complex operands
    {"floor", "Floor", nullptr, {}},
    {"ceil", "Ceil", nullptr, {}},
    {"tan", "Tan", tan_f64, {"Sin", "Cos", "Div"}},
    {"atan", "Atan", atan_f64, {ATAN_OPS}},
    {"asin", "Asin", asin_f64, {ATAN_OPS, "Sqrt"}},
    {"acos", "Acos", acos_f64, {ATAN_OPS, "Sqrt", "Equal"}},
    {"sinh", "Sinh", sinh_f64, {"Exp", "Log", "Sub", "Add", "Equal", SIGN_OPS}},
    {"cosh", "Cosh", cosh_f64, {"Exp", "Abs", "Sub", "Add", "Div"}},
    {"asinh", "Asinh", asinh_f64, {LOG1P_OPS, SIGN_OPS, "Sqrt", "Greater"}},
    {"acosh", "Acosh", acosh_f64, {LOG1P_OPS, "Sqrt", "Greater"}},
    {"atanh", "Atanh", atanh_f64, {LOG1P_OPS, SIGN_OPS}},
};

// sin / cos of a complex z = a + bi (packed, jaxonnx/complex.hpp):
//   sin z = sin a cosh b + i cos a sinh b,  cos z = cos a cosh b - i sin a sinh b,
// cosh b = (e^b + e^-b)/2, sinh b the same difference, or its Taylor series
// below |b| = 0.1 where the difference cancels (the series' first omitted
// term is 3e-15 relative there).
void lower_complex_sin_cos(Lowering& L, bool sin) {
  Aval a = L.in_aval(0);
  Aval p = complex::part(a);
  complex::Parts z = complex::split(L, L.input(0), a);
  Ops o{L, p.dtype};
  Value e = o.exp(z.im), ie = o.exp(o.f("Neg", {z.im}));
  Value cosh = o.mul(o.k(0.5), o.add(e, ie));
  Value b2 = o.mul(z.im, z.im);
  Value series = o.mul(z.im, o.add(o.k(1), o.mul(b2, o.add(o.k(1.0 / 6), o.mul(b2, o.add(
                     o.k(1.0 / 120), o.mul(b2, o.k(1.0 / 5040))))))));
  Value sinh = o.where(o.lt(o.abs(z.im), o.k(0.1)), series, o.mul(o.k(0.5), o.sub(e, ie)));
  Value sa = o.f("Sin", {z.re}), ca = o.f("Cos", {z.re});
  Value re = o.mul(sin ? sa : ca, cosh);
  Value im = sin ? o.mul(ca, sinh) : o.f("Neg", {o.mul(sa, sinh)});
  L.bind(0, complex::pack(L, re, im, a));
}

void lower_table_unary(Lowering& L, const Unary& u) {
  Aval in = L.in_aval(0);
  if (complex::is(in.dtype) && (u.onnx == std::string("Sin") || u.onnx == std::string("Cos")))
    return lower_complex_sin_cos(L, u.onnx == std::string("Sin"));
  if (complex::is(in.dtype)) return lower_complex_unary(L);
  require_float(L, in.dtype);
  if (in.dtype == dtype::f64 && u.f64) {
    lower_unary(L, u.f64);
    return;
  }
  int32_t t = working_dtype(in.dtype);
  Value y = L.op(u.onnx, {cast(L, L.input(0), in, t)}, in.with_dtype(t));
  L.bind(0, cast(L, y, in.with_dtype(t), in.dtype));
}

// round: rounding_method 0 = AWAY_FROM_ZERO, 1 = TO_NEAREST_EVEN.
void lower_round(Lowering& L) {
  int64_t method = L.param("rounding_method").as_int();
  if (method == 1) {
    lower_unary(L, [](Ops& o, Value x) { return o.f("Round", {x}); });
  } else if (method == 0) {
    lower_unary(L, round_away);
  } else {
    L.fail("round: unsupported rounding_method " + std::to_string(method));
  }
}

// is_finite: |x| < inf, false for NaN.
void lower_is_finite(Lowering& L) {
  lower_unary(L, [](Ops& o, Value x) { return o.lt(o.abs(x), o.k(kInf)); });
}

// rem: sign of the dividend. Floats: Mod(fmod=1) (x rem 0 = NaN, x rem inf =
// x, as JAX). Integers: XLA gives x rem 0 = x and INT_MIN rem -1 = 0, where
// C's % traps; since x rem y == x rem |y| for truncated remainders, divide by
// |y| (Abs(INT_MIN) wraps to INT_MIN, still a safe divisor) or by 1 for y == 0.
// onnxruntime's integer Mod(fmod=1) goes through double fmod, inexact beyond
// 2^53: 64-bit integers take x - (x / d) * d (Div truncates) instead.
void lower_rem(Lowering& L) {
  Aval a = L.in_aval(0), b = L.in_aval(1), out = L.out_aval(0);
  const Attr fmod = Attr::i("fmod", 1);
  if (dtype::is_float(a.dtype)) {
    lower_binary(L, [](Ops& o, Value x, Value y) { return o.op("Mod", {x, y}, o.t, {Attr::i("fmod", 1)}); });
    return;
  }
  Value x = L.input(0), y = L.input(1);
  Aval mask = b.with_dtype(dtype::boolean);
  Value zero = L.op("Equal", {y, scalar(L, b.dtype, 0)}, mask);
  Value d = dtype::is_signed_int(b.dtype) ? L.op("Abs", {y}, b) : y;
  d = where(L, zero, scalar(L, b.dtype, 1), d, b);
  Value r = dtype::itemsize(out.dtype) == 8
                ? L.op("Sub", {x, L.op("Mul", {L.op("Div", {x, d}, out), d}, out)}, out)
                : L.op("Mod", {x, d}, out, {fmod});
  L.bind(0, where(L, zero, x, r, out));
}

// clamp(lo, x, hi) = min(max(x, lo), hi), as XLA: NaN in any operand gives
// NaN, lo > hi gives hi. Not Clip: onnxruntime's Clip ignores NaN bounds.
// Max/Min have no 16-bit integer kernels in onnxruntime (int32 holds them);
// on bool, max/min are or/and.
void lower_clamp(Lowering& L) {
  Aval lo = L.in_aval(0), x = L.in_aval(1), hi = L.in_aval(2), out = L.out_aval(0);
  // JAX's clamp of complex values follows neither the lexicographic order of
  // its max/min nor the real parts alone (clamp(0, 1+2j, 1+1j) is 1+2j).
  if (complex::is(x.dtype)) L.fail("clamp of complex operands is not lowered (XLA's order for it is unspecified)");
  if (x.dtype == dtype::boolean) {
    Value m = L.op("Or", {L.input(1), L.input(0)}, out);
    L.bind(0, L.op("And", {m, L.input(2)}, out));
    return;
  }
  int32_t t = x.dtype == dtype::i16 || x.dtype == dtype::u16 ? dtype::i32 : working_dtype(x.dtype);
  Aval w = out.with_dtype(t);
  Value m = L.op("Max", {cast(L, L.input(1), x, t), cast(L, L.input(0), lo, t)}, w);
  Value r = L.op("Min", {m, cast(L, L.input(2), hi, t)}, w);
  L.bind(0, cast(L, r, w, out.dtype));
}

// square: x * x (exact, any numeric type), not Pow.
void lower_square(Lowering& L) {
  Value x = L.input(0);
  if (complex::is(L.in_aval(0).dtype)) {
    Aval a = L.in_aval(0);
    complex::Parts z = complex::split(L, x, a);
    L.bind(0, complex::pack(L, complex::mul(L, z, z, complex::part(a)), a));
    return;
  }
  L.bind(0, L.op("Mul", {x, x}, L.out_aval(0)));
}

// complex(re, im): the packed form from the parts (JAX has broadcast them,
// except a rank-0 literal, which Expand brings to the output's shape).
void lower_complex(Lowering& L) {
  Aval out = L.out_aval(0);
  Aval p = complex::part(out);
  Value parts[2];
  for (size_t i = 0; i < 2; ++i) {
    Aval a = L.in_aval(i);
    parts[i] = L.input(i);
    if (a.shape.size() != out.shape.size())
      parts[i] = L.op("Expand", {parts[i], shape_value(L, out.shape)}, p.with_dtype(a.dtype));
  }
  L.bind(0, complex::pack(L, parts[0], parts[1], out));
}

// real / imag: one part of the packed form.
void lower_real_imag(Lowering& L) {
  Aval a = L.in_aval(0);
  if (!complex::is(a.dtype)) L.fail(std::string(L.primitive()) + " of a " + dtype::name(a.dtype) + " operand");
  complex::Parts z = complex::split(L, L.input(0), a);
  L.bind(0, L.primitive() == "real" ? z.re : z.im);
}

// conj: the packed form times [1, -1] (broadcast over the trailing dim); a
// real operand gives a complex result with a zero imaginary part.
void lower_conj(Lowering& L) {
  Aval a = L.in_aval(0), out = L.out_aval(0);
  if (!complex::is(a.dtype)) {
    L.bind(0, complex::from_real(L, L.input(0), a, out));
    return;
  }
  int32_t t = complex::part_dtype(a.dtype);
  Value flip = t == dtype::f64 ? L.constant(std::vector<double>{1.0, -1.0}, {2})
                               : L.constant(std::vector<float>{1.0f, -1.0f}, {2});
  L.bind(0, L.op("Mul", {L.input(0), flip}, complex::packed(out)));
}

// Registers a primitive; `ops` may repeat (the helpers' op lists overlap),
// each is declared once.
Plugin::PrimitiveRef add(Plugin& plugin, const char* name, LowerFn fn, std::vector<const char*> ops,
                         const char* doc_op, std::string summary = "") {
  auto ref = plugin.primitive(name, std::move(fn));
  std::vector<std::string> seen;
  for (const char* op : ops) {
    bool dup = false;
    for (const std::string& s : seen) dup = dup || s == op;
    if (!dup) { seen.emplace_back(op); ref.emits({op}); }
  }
  if (doc_op) ref.doc(onnx_doc(doc_op));
  if (!summary.empty()) ref.summary(std::move(summary));
  return ref;
}

Value exp2(Ops& o, Value x) { return o.f("Pow", {o.k(2), x}); }
// expm1 and log1p have x's sign: copysign restores a -0 lost in a Where.
Value expm1_signed(Ops& o, Value x) { return o.copysign(expm1(o, x), x); }
Value log1p_signed(Ops& o, Value x) { return o.copysign(log1p(o, x), x); }

// atan2; complex operands by XLA's expansion (complex_math.hpp).
void lower_atan2(Lowering& L) {
  Aval out = L.out_aval(0);
  if (!complex::is(out.dtype)) return lower_binary(L, atan2);
  const Aval p = complex::part(out);
  // A rank-0 operand (a literal) is expanded: the expansion's products would
  // otherwise be rank 0 where they are declared of the result's shape.
  auto operand = [&](size_t i) {
    complex::Parts z = complex::operand(L, i, out.with_shape(L.in_aval(i).shape));
    if (L.in_aval(i).shape == out.shape) return z;
    Value shape = shape_value(L, out.shape);
    return complex::Parts{L.op("Expand", {z.re, shape}, p), L.op("Expand", {z.im, shape}, p)};
  };
  complex::Parts y = operand(0), x = operand(1);
  L.bind(0, complex::pack(L, complex::atan2_complex(L, y, x, p), out));
}

void lower_nextafter(Lowering& L) {
  int32_t t = L.in_aval(0).dtype;
  if (t != dtype::f32 && t != dtype::f64)
    L.fail(std::string("nextafter supports float32 and float64, got ") + dtype::name(t));
  lower_binary(L, nextafter);
}

}  // namespace

JAXONNX_PLUGIN("lax_math", "0.1.0") {
  for (const Unary& u : kUnary) {
    const Unary* e = &u;
    std::vector<const char*> ops = {u.onnx, "Cast"};
    ops.insert(ops.end(), u.f64_ops.begin(), u.f64_ops.end());
    auto ref = add(plugin, u.primitive, [e](Lowering& L) { lower_table_unary(L, *e); }, ops, u.onnx,
                   u.f64 ? std::string(u.onnx) + "; float64 built from other ops (onnxruntime has no float64 " +
                               u.onnx + ")"
                         : "");
    if (complex::function(u.primitive)) complex::emits_functions(ref);
  }
  auto unary = [](Fn1 fn) { return [fn](Lowering& L) { lower_unary(L, fn); }; };
  add(plugin, "round", lower_round, {"Round", "Sub", "Abs", "Equal", "Sign", "Mul", "Where", "Cast"},
      "Round", "Round (half to even); half away from zero corrects exact halves");
  add(plugin, "is_finite", lower_is_finite, {"Abs", "Less", "Cast"}, "Less", "|x| < inf");
  complex::emits_functions(add(plugin, "exp2", unary(exp2), {"Pow", "Cast"}, "Pow", "Pow(2, x)"));
  add(plugin, "cbrt", unary(cbrt), {"Pow", SIGN_OPS, "Cast"}, "Pow", "sign(x) |x|^(1/3)");
  complex::emits_functions(add(plugin, "expm1", unary(expm1_signed), {"Exp", "Log", "Sub", "Equal", SIGN_OPS, "Cast"}, "Exp",
      "Kahan's expm1 from Exp and Log"));
  complex::emits_functions(add(plugin, "log1p", unary(log1p_signed), {LOG1P_OPS, SIGN_OPS, "Cast"}, "Log",
      "Kahan's log1p from Log"));
  add(plugin, "erfc", unary(erfc),
      {"Abs", "Mul", "Add", "Sub", "Div", "Neg", "Exp", "Less", "Greater", "Where", "Cast"}, "Exp",
      "XLA's (Cephes) rational approximations of erf/erfc");
  add(plugin, "erf_inv", unary(erf_inv), {LOG1P_OPS, SIGN_OPS, "Neg", "Sqrt", "Cast"}, "Log",
      "Giles' erfinv polynomials, as XLA");
  add(plugin, "lgamma", unary(lgamma),
      {LOG1P_OPS, "Neg", "Less", "Greater", "Abs", "Floor", "Sin", "Cast"}, "Log",
      "Lanczos approximation with reflection, as XLA");
  add(plugin, "zeta", [](Lowering& L) { lower_binary(L, zeta); },
      {"Pow", "Neg", "Add", "Sub", "Mul", "Div", "Floor", "Equal", "Less", "LessOrEqual", "And", "Not",
       "Where", "Cast"},
      "Pow", "Hurwitz zeta by Euler-Maclaurin summation, as Cephes");
  add(plugin, "polygamma", [](Lowering& L) { lower_binary(L, polygamma); },
      {"Pow", "Neg", "Add", "Sub", "Mul", "Div", "Floor", "Equal", "Less", "LessOrEqual", "And", "Not",
       "Or", "Exp", "Log", "Greater", "Abs", "Sin", "Cos", "Where", "Cast"},
      "Pow", "(-1)^(n+1) n! zeta(n+1, x); digamma for n = 0");
  for (auto [name, fn] : {std::pair<const char*, Fn2>{"igamma", igamma}, {"igammac", igammac}})
    add(plugin, name, [fn = fn](Lowering& L) { lower_binary(L, fn); },
        {"Loop", "ReduceMax", "Expand", LOG1P_OPS, "IsNaN", "Or", "And", "Not", "Less", "Greater",
         "GreaterOrEqual", "Abs", "Floor", "Sin", "Neg", "Exp", "Cast", "Shape", "Concat"},
        "Loop", "Cephes' series / continued fraction in masked Loops, as JAX");
  add(plugin, "regularized_incomplete_beta", lower_betainc,
      {"Loop", "ReduceMax", "Expand", LOG1P_OPS, "IsNaN", "Or", "And", "Not", "Less", "Greater",
       "GreaterOrEqual", "Abs", "Floor", "Sin", "Neg", "Exp", "Mod", "Cast", "Shape", "Concat"},
      "Loop", "Lentz's continued fraction in a Loop, as JAX");
  add(plugin, "digamma", unary(digamma),
      {LOG1P_OPS, "Neg", "Less", "LessOrEqual", "And", "Abs", "Floor", "Sin", "Cos", "Cast"}, "Log",
      "Lanczos approximation with reflection, as XLA");
  auto atan2_prim = add(plugin, "atan2", lower_atan2,
      {"Atan", ATAN_OPS, "Max", "Min", "Equal", "Cast", "Expand", "Pad"}, "Atan",
      "Atan of min(|x|,|y|)/max(|x|,|y|) and the octant; float64 via Cephes atan; "
      "complex: -i log((x + iy) / sqrt(x^2 + y^2))");
  complex::emits_functions(atan2_prim);
  atan2_prim.emits_shape_ops();  // complex: a literal operand expanded
  add(plugin, "nextafter", lower_nextafter, {"Sign", "Sub", "Add", "LessOrEqual", "Equal", SIGN_OPS},
      "Add", "exact float arithmetic (ONNX has no bitcast)");
  add(plugin, "rem", lower_rem, {"Mod", "Equal", "Abs", "Where", "Div", "Mul", "Sub", "Cast"}, "Mod",
      "Mod(fmod=1); integer divisors made safe");
  add(plugin, "clamp", lower_clamp, {"Max", "Min", "Or", "And", "Cast"}, "Max", "Min(Max(x, lo), hi)");
  add(plugin, "square", lower_square, {"Mul", "Gather", "Sub", "Add", "Unsqueeze", "Concat"}, "Mul",
      "x * x (complex: the product of the packed parts)");
  add(plugin, "complex", lower_complex, {"Expand", "Unsqueeze", "Concat", "Shape", "Concat", "Add", "Sub", "Mul", "Neg", "Mod", "Div", "Max", "Min"}, "Concat",
      "packs re and im as float[..., 2]");
  add(plugin, "real", lower_real_imag, {"Gather"}, "Gather", "[..., 0] of the packed form");
  add(plugin, "imag", lower_real_imag, {"Gather"}, "Gather", "[..., 1] of the packed form");
  add(plugin, "conj", lower_conj, {"Mul", "Cast", "Unsqueeze", "Pad"}, "Mul",
      "packed form times [1, -1]; a real operand gets a zero imaginary part");
}
