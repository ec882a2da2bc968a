// Keeps the nodes a node-based standard container gives up (C++17 node
// handles) for its next insert, so that a steady stream of inserts and erases
// allocates nothing (Note [Allocation-free fast path]). Internal to src/alloc.
#pragma once

#include <utility>
#include <vector>

namespace memwall::alloc {

template <typename Container>
class NodeRecycler {
 public:
  using Node = typename Container::node_type;
  Node take() {
    if (spare_.empty()) return Node();
    Node node = std::move(spare_.back());
    spare_.pop_back();
    return node;
  }
  void give(Node&& node) { spare_.push_back(std::move(node)); }

 private:
  std::vector<Node> spare_;
};

}  // namespace memwall::alloc
