// The values a run starts from and eager PyTorch's results (Note [Run
// inputs] in python/memwall/values/files.py), as bytes in memory: the tracer's
// files mapped (ValueFiles), or tensors a caller holds (a Python extension
// handing over its step's inputs). The executor reads a StepValues and no
// file; memwall/exec/library.h runs a plan from either.
//
//   exec::StepValues v;  // views: the bytes stay the caller's
//   v.state.add(buffer.id, buffer.name, bytes_of(tensor));   // each persistent buffer and input
//   v.rng = generator_state;                                  // torch.get_rng_state()
//   exec::run_plan(graph, plan, v, options, result, error);
//
// Names no torch type; holds views only.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace memwall::exec {

// Bytes of some of a graph's buffers, by id and by name (memwall's rewrites
// renumber buffers and keep names). Views: the bytes belong to whoever
// made the set and must outlive its use.
class ValueSet {
 public:
  // `name` may be empty (values matched by id only). A later value of the
  // same id or name replaces the earlier.
  void add(int64_t id, const std::string& name, std::span<const std::byte> bytes);
  // The bytes of buffer `id`; an empty span when the set has none.
  std::span<const std::byte> buffer(int64_t id) const;
  // The bytes of the buffer named `name`; nullopt when the set has none.
  std::optional<std::span<const std::byte>> named(const std::string& name) const;
  bool has(int64_t id) const { return by_id_.count(id) != 0; }
  const std::map<int64_t, std::span<const std::byte>>& buffers() const { return by_id_; }

 private:
  std::map<int64_t, std::span<const std::byte>> by_id_;
  std::map<std::string, std::span<const std::byte>> by_name_;
};

// What eager PyTorch did from the same values (RunOptions::check_eager).
struct EagerReference {
  // Every parameter and persistent state after `steps` steps (with ranks,
  // rank 0's module buffers: Note [Data-parallel reference]).
  ValueSet states;
  std::vector<double> losses;                    // per step (rank 0's with ranks)
  std::vector<std::vector<double>> rank_losses;  // per rank; empty for one rank
  int steps = 0;
  int ranks = 1;
};

struct StepValues {
  // Named in messages about the values: the directory they were read from.
  std::string source = "the values in memory";
  // Every buffer that exists before the first op (parameters, optimizer
  // states, running statistics, the batch, constants) as the step finds
  // them.
  ValueSet state;
  // The CPU generator's state the step starts from (torch.get_rng_state()'s
  // bytes); required.
  std::span<const std::byte> rng;
  int threads = 0;  // intra-op threads the values were made with; 0: torch's default
  // Rank r > 0 of a data-parallel run: its own micro-batch (the inputs by
  // name); the rest of `state` is shared.
  std::optional<ValueSet> inputs;
  std::optional<EagerReference> eager;  // needed by check_eager
};

// The tracer's files in `dir` (`memwall trace --values`, a --keep-values
// directory) mapped read-only: state.json/.bin; eager.json/.bin when
// `eager`; inputs<rank>.json/.bin when rank > 0 (of `ranks`). Throws Error
// naming the file when one is missing, malformed or shorter than its index
// says.
class ValueFiles {
 public:
  ValueFiles(const std::string& dir, int rank, int ranks, bool eager);
  ~ValueFiles();
  ValueFiles(const ValueFiles&) = delete;
  ValueFiles& operator=(const ValueFiles&) = delete;

  const StepValues& values() const { return values_; }

 private:
  struct File;
  std::vector<std::unique_ptr<File>> files_;
  StepValues values_;
};

}  // namespace memwall::exec
