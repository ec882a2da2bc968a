// The values a run of a traced graph starts from (`memwall run`, `memwall
// calibrate --graph`): a fresh trace of its model on real CPU tensors
// (RunTrace, torch_trace.h), or the one kept in a --keep-values directory
// (Note [Kept values] in src/importers/kept_values.cc). The executor reads
// the directory either gives (RunTrace::values_dir; memwall/exec/values.h).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "memwall/graph/types.h"
#include "memwall/importers/torch_trace.h"

namespace memwall::importers {

// The graph and plan given as files must be the graph a fresh trace of its
// model gives (the values come from that trace); throws Error naming `file`
// and the first difference.
void check_same_structure(const Graph& given, const Graph& traced, const std::string& file);

// What differs between the model `wanted` asks for and the model `traced`
// was traced from (its meta.origin), with the tracer's defaults filled in
// as it records them: "" when they are the same model.
std::string model_difference(const TorchTraceRequest& wanted, const Graph& traced);

// A --keep-values directory, judged before any work (Note [Kept values]).
class KeptValues {
 public:
  KeptValues() = default;  // none given
  // Throws Error when `dir` is not a directory, cannot be made or written,
  // or holds an incomplete or unreadable trace.
  explicit KeptValues(const std::string& dir);

  bool given() const { return !dir_.empty(); }
  // Whether `dir` holds a trace's values (then read, never traced again).
  bool holds() const { return trace_ != nullptr; }
  const std::string& dir() const { return dir_; }
  // Of the values held: the graph, eager's steps, the seed, the ranks of
  // eager's reference.
  const Graph& graph() const { return trace_->graph(); }
  int steps() const { return steps_; }
  int64_t seed() const { return seed_; }
  int ranks() const { return ranks_; }

  // Throws Error unless the values held are of the model `wanted` asks for
  // (`whose` names it: "the model asked for", "g.json's model").
  void check_model(const TorchTraceRequest& wanted, const std::string& whose) const;

  // What `memwall run` asks of the values, checked by run_steps.
  struct RunAsk {
    std::optional<int> steps;  // --steps
    std::optional<int64_t> seed;
    int ranks = 1;
    bool check_eager = false;
    bool python = false;  // --python given
  };
  // The steps a run takes (Note [Kept values]): without values held,
  // --steps or 3; with them, --steps or theirs. Throws Error, before any
  // work, for what the values held cannot give: another seed, fewer ranks,
  // --check-eager over other steps or ranks than eager's reference, a
  // --python with nothing to trace.
  int run_steps(const RunAsk& ask) const;

  // The values held; else a fresh trace of `request` with `steps` eager
  // steps after torch.manual_seed(seed), kept in the directory when one is
  // given. Call once.
  std::unique_ptr<RunTrace> take(const TorchTraceRequest& request, int steps, int64_t seed);

 private:
  std::string dir_;
  std::unique_ptr<RunTrace> trace_;
  int steps_ = 0;
  int64_t seed_ = 0;
  int ranks_ = 1;
};

}  // namespace memwall::importers
