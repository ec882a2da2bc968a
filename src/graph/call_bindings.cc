// Whether each op's call record names only buffers its op binds (calls.h).
//
// Note [Call bindings]
// ~~~~~~~~~~~~~~~~~~~~
// The executor runs an op's call over the storages of the buffers the op
// lists: what it reads (`in`), what it updates in place (`updates`) and the
// buffers whose new version it writes (an `out` with `version_of`), each by
// the root of its version chain (src/exec/executor_compute.cc, `resolve`).
// A call that names any other buffer cannot run: the executor stopped at
// it mid-iteration ("names buffer B, which it neither reads nor writes")
// after `memwall plan` and `memwall simulate` had accepted the graph, since
// neither reads calls. Checking it where graphs are validated refuses such
// a graph when it is read, before anything is planned or run (issue 45: a
// bf16 ZeRO-Offload rewrite whose CPU step still wrote the 16-bit
// parameter, which only the device holds). memwall's own calls bind more:
//  - memwall::cpu_step (Note [CPU step calls] in src/swap/offload.cc): the
//    parameter's references mean its fp32 master copy (`master`) or, for a
//    16-bit parameter whose step only overwrites it from the trace's own
//    master, the host copy of its new values (`update`);
//  - memwall::apply: `from` is read and `to` updated, nothing else.
// Ids out of range are refused too: the executor would index past its
// slots.
#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "memwall/graph/calls.h"
#include "memwall/graph/describe.h"
#include "memwall/graph/graph.h"

namespace memwall {
namespace {

using detail::buffer_label;
using detail::op_label;

// The keys of memwall's own calls that name buffers outside the arguments.
bool is_call_binding_key(const std::string& key) {
  return key == "results" || key == "param" || key == "master" || key == "update" ||
         key == "from" || key == "to";
}

void collect_call_arguments(const nlohmann::json& v, std::vector<int64_t>& out) {
  if (v.is_array()) {
    for (const nlohmann::json& x : v) collect_call_arguments(x, out);
    return;
  }
  if (!v.is_object()) return;
  if (const auto t = v.find("t"); t != v.end() && t->is_number_integer()) {
    out.push_back(t->get<int64_t>());
  }
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (it.key() != "t" && !is_call_binding_key(it.key())) collect_call_arguments(*it, out);
  }
}

// A buffer id named by `key` ({"t": B}), or kNoBuffer for null or absent.
BufferId call_named_buffer(const Graph& graph, const Op& op, const nlohmann::json& call,
                           const char* key) {
  const auto it = call.find(key);
  if (it == call.end() || it->is_null()) return kNoBuffer;
  const auto t = it->is_object() ? it->find("t") : it->end();
  if (t == it->end() || !t->is_number_integer()) {
    fail("graph: {}: its call's \"{}\" is not a buffer reference", op_label(graph, op.id), key);
  }
  const int64_t id = t->get<int64_t>();
  if (id < 0 || static_cast<size_t>(id) >= graph.buffers.size()) {
    fail("graph: {}: its call's \"{}\" names buffer {}, which does not exist",
         op_label(graph, op.id), key, id);
  }
  return static_cast<BufferId>(id);
}

template <typename Ids>
bool binds_buffer(const Ids& ids, BufferId b) {
  return std::find(ids.begin(), ids.end(), b) != ids.end();
}

class CallBindings {
 public:
  explicit CallBindings(const Graph& graph) : graph_(graph), root_(graph.buffers.size()) {
    for (size_t b = 0; b < graph.buffers.size(); ++b) {
      BufferId r = static_cast<BufferId>(b);
      while (graph.buffers[r].version_of != kNoBuffer) r = graph.buffers[r].version_of;
      root_[b] = r;
    }
  }

  void check(const Op& op) {
    const nlohmann::json call = call_object(op.call);
    const std::string name = call.value("op", std::string());
    if (name == "memwall::apply") {
      check_apply(op, call);
      return;
    }
    bound_.clear();
    for (const BufferId b : op.in) bound_.push_back(root_[b]);
    for (const BufferId b : op.updates) bound_.push_back(root_[b]);
    if (name == "memwall::cpu_step") {
      const BufferId param = call_named_buffer(graph_, op, call, "param");
      const BufferId master = call_named_buffer(graph_, op, call, "master");
      const BufferId update = call_named_buffer(graph_, op, call, "update");
      if (master != kNoBuffer && !binds_buffer(op.in, master) &&
          !binds_buffer(op.updates, master)) {
        fail("graph: {}: its CPU step's master copy {} is neither read nor updated by the op",
             op_label(graph_, op.id), buffer_label(graph_, master));
      }
      if (update != kNoBuffer && !binds_buffer(op.out, update)) {
        fail("graph: {}: its CPU step's update {} is not an output of the op",
             op_label(graph_, op.id), buffer_label(graph_, update));
      }
      if (param != kNoBuffer && master == kNoBuffer && update != kNoBuffer &&
          !call_only_overwrites(call, graph_.buffers[param])) {
        fail(
            "graph: {}: its CPU step reads {}, a 16-bit parameter that the host does not "
            "hold (only a step that overwrites it from an fp32 master copy runs there)",
            op_label(graph_, op.id), buffer_label(graph_, param));
      }
      if (param != kNoBuffer && (master != kNoBuffer || update != kNoBuffer)) {
        bound_.push_back(root_[param]);
      }
    } else if (name != "memwall::sequence") {
      for (const BufferId v : op.out) {
        if (graph_.buffers[v].version_of != kNoBuffer) bound_.push_back(root_[v]);
      }
    }
    arguments_.clear();
    collect_call_arguments(call, arguments_);
    for (const int64_t id : arguments_) {
      if (id < 0 || static_cast<size_t>(id) >= graph_.buffers.size()) {
        fail("graph: {}: its call names buffer {}, which does not exist", op_label(graph_, op.id),
             id);
      }
      if (!binds_buffer(bound_, root_[static_cast<size_t>(id)])) {
        fail(
            "graph: {}: its call names {}, which the op neither reads nor writes, so it cannot "
            "run (Note [Call bindings])",
            op_label(graph_, op.id), buffer_label(graph_, static_cast<BufferId>(id)));
      }
    }
  }

 private:
  void check_apply(const Op& op, const nlohmann::json& call) {
    const BufferId from = call_named_buffer(graph_, op, call, "from");
    const BufferId to = call_named_buffer(graph_, op, call, "to");
    if (from == kNoBuffer || !binds_buffer(op.in, from) || to == kNoBuffer ||
        !binds_buffer(op.updates, to)) {
      fail("graph: {}: an apply must read its \"from\" and update its \"to\"",
           op_label(graph_, op.id));
    }
  }

  const Graph& graph_;
  std::vector<BufferId> root_;
  std::vector<BufferId> bound_;
  std::vector<int64_t> arguments_;
};

}  // namespace

void check_call_bindings(const Graph& graph) {
  CallBindings bindings(graph);
  for (const Op& op : graph.ops) {
    if (!op.call.empty()) bindings.check(op);
  }
}

}  // namespace memwall
