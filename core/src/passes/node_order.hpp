// The order of a graph's nodes while a pass inserts and erases them in place:
// nodes keep their index into graph.nodes (which Uses and plugin rules hold),
// new ones are appended there and linked in where they belong, erased ones
// are unlinked. Gapped keys answer "does a come before b" in O(1). A pass
// writes the order back once at its end (sequence()), so a rewrite costs
// what it touches, not the graph.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace jaxonnx::passes {

class NodeOrder {
 public:
  static constexpr size_t kNone = static_cast<size_t>(-1);

  // Nodes 0 .. count-1, in index order.
  explicit NodeOrder(size_t count) : prev_(count), next_(count), key_(count) {
    for (size_t k = 0; k < count; ++k) {
      prev_[k] = k ? k - 1 : kNone;
      next_[k] = k + 1 < count ? k + 1 : kNone;
    }
    head_ = count ? 0 : kNone;
    tail_ = count ? count - 1 : kNone;
    renumber();
  }

  size_t head() const { return head_; }
  size_t tail() const { return tail_; }
  size_t next(size_t k) const { return next_[k]; }
  size_t prev(size_t k) const { return prev_[k]; }
  // keys()[a] < keys()[b] iff node a comes before node b (both linked).
  const std::vector<int64_t>& keys() const { return key_; }

  // Links nodes first .. first+count-1 (just appended to graph.nodes, in that
  // order) in before node `at`.
  void insert_before(size_t at, size_t first, size_t count) {
    if (!count) return;
    prev_.resize(first + count, kNone);
    next_.resize(first + count, kNone);
    key_.resize(first + count, 0);
    if (key_[at] - low(at) <= static_cast<int64_t>(count)) renumber();
    int64_t lo = low(at), step = (key_[at] - lo) / static_cast<int64_t>(count + 1);
    size_t before = prev_[at];
    for (size_t i = 0; i < count; ++i) {
      size_t n = first + i;
      key_[n] = lo + step * static_cast<int64_t>(i + 1);
      prev_[n] = before;
      (before == kNone ? head_ : next_[before]) = n;
      before = n;
    }
    next_[before] = at;
    prev_[at] = before;
  }

  void unlink(size_t k) {
    (prev_[k] == kNone ? head_ : next_[prev_[k]]) = next_[k];
    (next_[k] == kNone ? tail_ : prev_[next_[k]]) = prev_[k];
    prev_[k] = next_[k] = kNone;
  }

  // The linked nodes, first to last.
  std::vector<size_t> sequence() const {
    std::vector<size_t> out;
    for (size_t k = head_; k != kNone; k = next_[k]) out.push_back(k);
    return out;
  }

 private:
  static constexpr int64_t kGap = int64_t{1} << 32;

  // The key below which `at`'s new predecessors go.
  int64_t low(size_t at) const { return prev_[at] == kNone ? key_[at] - kGap : key_[prev_[at]]; }

  // Even gaps again, when an insertion finds none left between two keys.
  void renumber() {
    int64_t key = kGap;
    for (size_t k = head_; k != kNone; k = next_[k], key += kGap) key_[k] = key;
  }

  size_t head_ = kNone, tail_ = kNone;
  std::vector<size_t> prev_, next_;
  std::vector<int64_t> key_;
};

}  // namespace jaxonnx::passes
