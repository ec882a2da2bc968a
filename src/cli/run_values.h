// The values a run of a traced graph starts from (`memwall run`, `memwall
// calibrate --graph`): a fresh trace of its model on real CPU tensors, or
// the one kept in a --keep-values directory.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "memwall/graph/types.h"
#include "memwall/importers/torch_trace.h"

namespace memwall::cli {

// The graph and plan given as files must be the graph a fresh trace of its
// model gives (the values come from that trace); throws Error naming `file`
// and the first difference.
void check_same_structure(const Graph& given, const Graph& traced, const std::string& file);

// Copies the run's inputs to `dir` for later runs (--keep-values), with the
// graph as memwall reads it. Throws Error when `dir` cannot be written.
void keep_values(const importers::RunTrace& trace, const std::string& dir);

// The values kept in `keep` when it has them (steps and seed then come
// from there); else a fresh trace of `request` with `steps` eager steps
// after torch.manual_seed(seed), kept in `keep` when it is given.
std::unique_ptr<importers::RunTrace> run_values(const importers::TorchTraceRequest& request,
                                                const std::string& keep, int steps, int64_t seed);

}  // namespace memwall::cli
