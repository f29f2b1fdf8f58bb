// Deduplication: common subexpression elimination and identical initializers.
// Needs: topologically sorted (a node's inputs are canonical before it is keyed,
// so whole duplicate chains merge in one sweep).
// Rewrites: an initializer equal to an earlier one (dtype, dims, bytes; found
// by content hash, confirmed byte for byte) -> the earlier one; a node with
// the same op, domain, attributes (tensors by content) and inputs as an
// earlier node -> the earlier node's outputs. The first occurrence is kept,
// so the result depends only on node order.
// Refuses: nondeterministic ops (RandomNormal, Dropout, ...), nodes outside
// the default domain (a call site's body is opaque), nodes holding a
// subgraph, and a duplicate whose output is a graph output (its name stays).
// Guarantees: no duplicate initializers, no common subexpressions (among
// deterministic default-domain nodes); the exceptions above stay.
#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <tuple>
#include <utility>

#include "jaxonnx/core/passes.hpp"
#include "onnx_ops.hpp"
#include "rewrite.hpp"

namespace jaxonnx::passes {
namespace {

template <typename T>
void put(std::string& key, const T& v) {
  key.append(reinterpret_cast<const char*>(&v), sizeof v);
}

void put(std::string& key, const std::string& s) {
  put(key, s.size());
  key += s;
}

void put(std::string& key, const Tensor& t) {
  put(key, t.dtype);
  put(key, t.dims.size());
  for (int64_t d : t.dims) put(key, d);
  put(key, t.nbytes);
  key.append(static_cast<const char*>(t.data), t.nbytes);
}

// A hash of the bytes, eight at a time (FNV-1a's mixing over words).
uint64_t content_hash(const Tensor& t) {
  const char* p = static_cast<const char*>(t.data);
  uint64_t h = 1469598103934665603ull;
  size_t i = 0;
  for (; i + 8 <= t.nbytes; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ w) * 1099511628211ull;
  }
  for (; i < t.nbytes; ++i) h = (h ^ static_cast<unsigned char>(p[i])) * 1099511628211ull;
  return h;
}

bool same_content(const Tensor& a, const Tensor& b) {
  return a.dtype == b.dtype && a.dims == b.dims && a.nbytes == b.nbytes &&
         (a.nbytes == 0 || std::memcmp(a.data, b.data, a.nbytes) == 0);
}

// The node's identity for CSE, or empty when it must not be merged.
std::string node_key(const ir::Node& n) {
  if (!onnx_ops::is_deterministic(n) || n.outputs.empty()) return {};
  std::vector<const ir::Attribute*> attrs;
  for (const ir::Attribute& a : n.attrs) {
    if (a.graph) return {};
    attrs.push_back(&a);
  }
  std::sort(attrs.begin(), attrs.end(),
            [](const ir::Attribute* a, const ir::Attribute* b) { return a->name < b->name; });
  std::string key;
  put(key, n.op_type);
  put(key, n.domain);
  put(key, n.inputs.size());
  for (ir::ValueId v : n.inputs) put(key, v);
  put(key, n.outputs.size());
  for (const ir::Attribute* a : attrs) {
    put(key, a->name);
    put(key, a->type);
    switch (a->type) {
      case JXO_ATTR_INT: put(key, a->i); break;
      case JXO_ATTR_FLOAT: put(key, a->f); break;
      case JXO_ATTR_STRING: put(key, a->s); break;
      case JXO_ATTR_INTS: put(key, a->ints.size()); for (int64_t v : a->ints) put(key, v); break;
      case JXO_ATTR_FLOATS: put(key, a->floats.size()); for (double v : a->floats) put(key, v); break;
      case JXO_ATTR_STRINGS:
        put(key, a->strings.size());
        for (const std::string& s : a->strings) put(key, s);
        break;
      case JXO_ATTR_TENSOR: put(key, *a->tensor); break;
      default: return {};
    }
  }
  return key;
}

// Calls on_duplicate(k, first) for each node k that repeats an earlier node
// `first` and may be merged into it (no output of k is a graph output), in
// node order, until it returns false. A node is keyed when the scan reaches
// it, so a callback that merges k has rewritten later readers first and
// whole duplicate chains are found in one sweep. Shared by the pass and its
// guarantee, so they cannot disagree on what a duplicate is.
template <typename F>
void scan_duplicates(const ir::Graph& g, F on_duplicate) {
  std::set<ir::ValueId> outputs(g.outputs.begin(), g.outputs.end());
  std::map<std::string, size_t> seen;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    std::string key = node_key(g.nodes[k]);
    if (key.empty()) continue;
    auto [it, fresh] = seen.emplace(std::move(key), k);
    if (fresh) continue;
    bool interface = false;
    for (ir::ValueId v : g.nodes[k].outputs) interface = interface || outputs.count(v);
    if (!interface && !on_duplicate(k, it->second)) return;
  }
}

class Deduplication : public Pass {
 public:
  const char* name() const override { return "cse"; }
  Properties needs() const override { return {topologically_sorted()}; }
  Properties guarantees() const override {
    return {no_duplicate_initializers(), no_common_subexpressions()};
  }

  bool run(ir::Graph& g) override {
    std::set<ir::ValueId> outputs(g.outputs.begin(), g.outputs.end());
    Uses uses(g);  // kept current, so each merge costs its readers, not the graph
    bool changed = false;

    // Weights can be large: contents are hashed only within a group of
    // equal dtype, dims and size that has several members, and each tensor's
    // hash is kept across rounds (the cache holds the tensor, so its address
    // is never reused for another).
    std::map<std::tuple<int32_t, std::vector<int64_t>, size_t>, std::vector<size_t>> by_type;
    for (size_t k = 0; k < g.initializers.size(); ++k) {
      const Tensor& t = *g.initializers[k].tensor;
      by_type[{t.dtype, t.dims, t.nbytes}].push_back(k);
    }
    std::vector<bool> drop(g.initializers.size(), false);
    for (const auto& [type, group] : by_type) {
      if (group.size() < 2) continue;
      std::map<uint64_t, std::vector<size_t>> by_hash;
      for (size_t k : group) {
        const ir::Initializer& init = g.initializers[k];
        std::vector<size_t>& same = by_hash[hash_of(init.tensor)];
        auto first = std::find_if(same.begin(), same.end(), [&](size_t j) {
          return same_content(*g.initializers[j].tensor, *init.tensor);
        });
        if (first == same.end() || outputs.count(init.value)) {
          same.push_back(k);
          continue;
        }
        uses.replace(g, init.value, g.initializers[*first].value);
        drop[k] = changed = true;
      }
    }
    if (changed) {
      std::vector<ir::Initializer> kept;
      for (size_t k = 0; k < g.initializers.size(); ++k)
        if (!drop[k]) kept.push_back(std::move(g.initializers[k]));
      g.initializers = std::move(kept);
    }

    scan_duplicates(g, [&](size_t k, size_t first) {
      std::vector<ir::ValueId> dups = g.nodes[k].outputs;
      const std::vector<ir::ValueId>& keep = g.nodes[first].outputs;
      uses.erase(g, k);
      for (size_t i = 0; i < dups.size(); ++i) uses.replace(g, dups[i], keep[i]);
      changed = true;
      return true;
    });
    erase_marked(g);
    return changed;
  }

 private:
  uint64_t hash_of(const std::shared_ptr<const Tensor>& t) {
    auto [it, fresh] = hashes_.try_emplace(t.get(), t, 0);
    if (fresh) it->second.second = content_hash(*t);
    return it->second.second;
  }
  std::map<const Tensor*, std::pair<std::shared_ptr<const Tensor>, uint64_t>> hashes_;
};

}  // namespace

std::unique_ptr<Pass> deduplication() { return std::make_unique<Deduplication>(); }

// A later initializer equal to an earlier one, unless the later is a graph
// output (its name stays). Compared byte for byte within groups of equal
// dtype and dims, where memcmp stops at the first difference.
Property no_duplicate_initializers() {
  return {"no duplicate initializers", [](const ir::Graph& g) -> std::string {
            std::set<ir::ValueId> outputs(g.outputs.begin(), g.outputs.end());
            std::map<std::tuple<int32_t, std::vector<int64_t>, size_t>, std::vector<size_t>> by_type;
            for (size_t k = 0; k < g.initializers.size(); ++k) {
              const Tensor& t = *g.initializers[k].tensor;
              std::vector<size_t>& same = by_type[{t.dtype, t.dims, t.nbytes}];
              if (!outputs.count(g.initializers[k].value))
                for (size_t j : same)
                  if (same_content(*g.initializers[j].tensor, t))
                    return "initializer '" + g.values[g.initializers[k].value].name +
                           "' holds what '" + g.values[g.initializers[j].value].name + "' holds";
              same.push_back(k);
            }
            return {};
          }};
}

// A later node with the same key as an earlier one, unless one of its outputs
// is a graph output.
Property no_common_subexpressions() {
  return {"no common subexpressions", [](const ir::Graph& g) -> std::string {
            std::string found;
            scan_duplicates(g, [&](size_t k, size_t first) {
              found = "node #" + std::to_string(k) + " " + g.nodes[k].op_type + " '" + g.nodes[k].name +
                      "' computes what node #" + std::to_string(first) + " '" + g.nodes[first].name +
                      "' does";
              return false;
            });
            return found;
          }};
}

}  // namespace jaxonnx::passes
