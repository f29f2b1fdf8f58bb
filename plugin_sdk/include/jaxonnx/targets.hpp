// jaxonnx plugin SDK: target profiles, the runtimes a model is for.
//
// A user picks one with to_onnx(target=...). A profile is data: what the
// target lacks, as ONNX op types of the default domain and as named
// capabilities (lower_snake_case), and which operator domains beyond the
// standard ones it runs ("com.microsoft"). Plugins ask through the ABI
// (target_supports, ABI 1.5) and choose a lowering; the host refuses a node of
// a refused op or of a runtime's domain another profile names but this one
// does not (refuses_domain), skips a rewrite rule that may emit one, and
// answers target_supports for everything here.
// docs/targets.md is generated from this table. Header-only, no dependencies:
// the core includes it too. SDK data, not ABI: the struct may grow.
//
// Profiles grow by measurement (benchmarks/portability.py): an entry names
// why the target lacks it.
#pragma once

#include <cstdint>
#include <string_view>

namespace jaxonnx::sdk::targets {

struct Lack {
  std::string_view what;  // an ONNX op type ("Attention") or a capability ("if_guard")
  // true: the host refuses a node of this op (there is always another
  // lowering); false: advisory, a plugin avoids it where it can.
  bool refused;
  std::string_view why;
};

struct Profile {
  std::string_view name;
  int64_t default_opset;  // the opset to_onnx uses for this target unless told
  std::string_view summary;
  const Lack* lacks;
  size_t num_lacks;
  // Operator domains besides the standard ("" and "ai.onnx") that the target
  // runs (see refuses_domain; a function call site, which the core makes, is
  // the model's own and always allowed).
  const std::string_view* domains = nullptr;
  size_t num_domains = 0;
};

// Capabilities a plugin may ask about (target_supports). Op types are asked by
// their ONNX name, a domain by its name (it has a dot, which op types and
// capabilities have not: target_supports("com.microsoft")).
//  if_guard:     an If whose only job is to skip an op on an empty size
//                (onnxruntime's fused ops refuse a dim of 0 that JAX allows).
//  negative_pad: Pad with negative pads (cropping).
//  dequantize_weights: DequantizeLinear of a constant weight feeding a
//                product, rather than Cast + Mul of it.
// onnxruntime's own tools misread the standard Attention op, so only the
// opt-in onnxruntime-contrib target (a session, no tools) has it.
inline constexpr Lack kAttentionLack = {
    "Attention", true,
    "onnxruntime's symbolic shape inference applies its com.microsoft Attention rule to the "
    "standard op and fails; its quantize_dynamic rewrites a top-level one into an invalid "
    "com.microsoft QAttention"};

// A weight dequantized in the graph: onnxruntime's CPU provider runs
// DequantizeLinear + MatMul of a constant int8/int4 weight 20-90x slower than
// float32 (it dequantizes at every run, or fuses the pair into its MatMulNBits
// with int8 activations, 2e-2 off JAX), where Cast + Mul of the same integer
// initializer folds into a float32 weight at load: the same small file, float32
// speed, exact (docs/quantization.md). A plugin keeps Cast + Mul there.
inline constexpr Lack kDequantizeLack = {
    "dequantize_weights", false,
    "onnxruntime's CPU provider runs DequantizeLinear + MatMul of a constant weight 20-90x "
    "slower than float32, and its default session fuses it with int8 activations (2e-2 off "
    "JAX); Cast + Mul of the integer weight folds into float32 at load (docs/quantization.md)"};

inline constexpr Lack kOnnxruntimeLacks[] = {kAttentionLack, kDequantizeLack};
inline constexpr Lack kContribLacks[] = {kDequantizeLack};

inline constexpr Lack kPortableLacks[] = {
    kAttentionLack,
    {"if_guard", false,
     "tract names every If node \"If\" and stops at a model's second one"},
    {"Loop", false,
     "tract has no Loop; the reference evaluator concatenates Loop scan outputs of rank >= 2 "
     "instead of stacking them; quantize_dynamic loses a value a Loop body reads from outside. "
     "A scan of static length is unrolled instead (up to 20000 body equations in all)"},
    {"negative_pad", false, "tract aborts the process on a negative Pad; the reference evaluator refuses it"},
};

// onnxruntime's contrib ops: only those measured faster than what
// onnxruntime's session optimizer makes of the standard graph
// (tools/contrib_ops.py; docs/benchmarks/contrib_ops.md).
inline constexpr std::string_view kContribDomains[] = {"com.microsoft"};

inline constexpr Profile kProfiles[] = {
    {"onnxruntime", 23,
     "the default: onnxruntime's CPU provider and its tools (symbolic shape inference, "
     "quantization), standard ONNX only, the fastest graph they all read", kOnnxruntimeLacks,
     sizeof(kOnnxruntimeLacks) / sizeof(kOnnxruntimeLacks[0])},
    {"portable", 17,
     "what onnxruntime, OpenVINO, tract, the ONNX reference evaluator and onnxruntime's symbolic "
     "shape inference all run: opset 17, no guard If, no fused op a tool misreads",
     kPortableLacks, sizeof(kPortableLacks) / sizeof(kPortableLacks[0])},
    {"onnxruntime-contrib", 23,
     "opt-in, for an onnxruntime session alone: the fastest graph there, with the standard "
     "Attention op (which onnxruntime's tools misread) and onnxruntime's com.microsoft ops where "
     "they are measurably faster (GroupQueryAttention for causal self-attention and for attention "
     "over a KV cache, MatMulNBits for int4 weights; int8 too under fusion=\"approximate\")",
     kContribLacks, sizeof(kContribLacks) / sizeof(kContribLacks[0]), kContribDomains,
     sizeof(kContribDomains) / sizeof(kContribDomains[0])},
};

inline const Profile* find(std::string_view name) {
  for (const Profile& p : kProfiles)
    if (p.name == name) return &p;
  return nullptr;
}

// What `profile` lacks of `what`, or nullptr when it has it.
inline const Lack* lack(const Profile& profile, std::string_view what) {
  for (size_t i = 0; i < profile.num_lacks; ++i)
    if (profile.lacks[i].what == what) return &profile.lacks[i];
  return nullptr;
}

// A standard domain ("", "ai.onnx") or one the profile names.
inline bool allows_domain(const Profile& profile, std::string_view domain) {
  if (domain.empty() || domain == "ai.onnx") return true;
  for (size_t i = 0; i < profile.num_domains; ++i)
    if (profile.domains[i] == domain) return true;
  return false;
}

// A runtime's own domain that some profile names (com.microsoft) but
// `profile` does not: a model for this target must not need it. A domain no
// profile names is a third-party plugin's own (its ops, its runtime), allowed.
inline bool refuses_domain(const Profile& profile, std::string_view domain) {
  if (allows_domain(profile, domain)) return false;
  for (const Profile& p : kProfiles)
    if (allows_domain(p, domain)) return true;
  return false;
}

// `what` is an op type or capability (supported unless lacked) or, with a dot,
// a domain (supported unless refused).
inline bool supports(const Profile& profile, std::string_view what) {
  if (what.find('.') != std::string_view::npos) return !refuses_domain(profile, what);
  return !lack(profile, what);
}

}  // namespace jaxonnx::sdk::targets
