// The values a run starts from (run_values.h).
#include "run_values.h"

#include <filesystem>
#include <map>

#include <fmt/format.h>

#include "memwall/graph/error.h"
#include "memwall/graph/graph.h"
#include "memwall/graph/output_files.h"

namespace memwall::cli {

// The graph and plan given as files must be the graph a fresh trace of its
// model gives (the values come from that trace).
void check_same_structure(const Graph& given, const Graph& traced, const std::string& file) {
  const auto differ = [&](const std::string& what) {
    fail(
        "{}: the graph differs from what its model gives on this machine's CPU now ({}); "
        "trace it again here (memwall trace --kernels cpu) or let memwall run trace it",
        file, what);
  };
  // Versions of in-place updates (Note [Buffer versions]) are appended
  // after the tracer's buffers: a graph read with or without them compares
  // on the tracer's.
  const auto original = [](const Graph& g) {
    size_t n = 0;
    for (const Buffer& b : g.buffers) n += b.version_of == kNoBuffer ? 1 : 0;
    return n;
  };
  if (given.ops.size() != traced.ops.size()) {
    // A graph memwall's planners rewrote (offload's CPU steps): the model
    // states and the batch by name (the rewrites keep names).
    std::map<std::string, uint64_t> bytes;
    for (const Buffer& b : given.buffers) bytes[b.name] = b.bytes;
    for (const Buffer& b : traced.buffers) {
      if (!exists_before_first_op(b.kind)) continue;
      const auto it = bytes.find(b.name);
      // ZeRO's rank graphs hold 1/N shards (Note [Shards at run time]).
      const int ranks = given.meta.contains("zero") ? given.meta["zero"].value("ranks", 1) : 1;
      const bool shard = it != bytes.end() && it->second < b.bytes &&
                         it->second * static_cast<uint64_t>(ranks) >= b.bytes;
      if (it == bytes.end() || (it->second != b.bytes && !shard)) {
        differ(fmt::format("it has no buffer {} of {} bytes", b.name, b.bytes));
      }
    }
    return;
  }
  if (original(given) != original(traced)) {
    differ(fmt::format("{} ops and {} buffers against {} and {}", given.ops.size(), original(given),
                       traced.ops.size(), original(traced)));
  }
  for (size_t b = 0; b < original(given); ++b) {
    if (given.buffers[b].bytes != traced.buffers[b].bytes) {
      differ(fmt::format("buffer {} ({}) has {} bytes against {}", b, given.buffers[b].name,
                         given.buffers[b].bytes, traced.buffers[b].bytes));
    }
  }
  for (size_t o = 0; o < given.ops.size(); ++o) {
    if (given.ops[o].type != traced.ops[o].type) {
      differ(fmt::format("op {} is {} against {}", o, given.ops[o].type, traced.ops[o].type));
    }
  }
}

// Copies the run's inputs to `dir` for later runs (--keep-values), with
// the graph as memwall reads it (versions made, Note [Buffer versions]): the
// graph to plan for `memwall run --graph DIR/graph.json`.
void keep_values(const importers::RunTrace& trace, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) fail("cannot create {}: {}", dir, ec.message());
  OutputFiles outputs;
  outputs.declare(dir + "/graph.json");
  outputs.set(dir + "/graph.json", graph_to_json_text(trace.graph()));
  outputs.commit();
  const std::string& from = trace.values_dir();
  std::vector<std::string> names = {"state.json", "state.bin", "eager.json", "eager.bin"};
  for (int r = 1; std::filesystem::exists(fmt::format("{}/inputs{}.json", from, r)); ++r) {
    names.push_back(fmt::format("inputs{}.json", r));
    names.push_back(fmt::format("inputs{}.bin", r));
  }
  for (const std::string& name : names) {
    std::filesystem::copy_file(from + "/" + name, dir + "/" + name,
                               std::filesystem::copy_options::overwrite_existing, ec);
    if (ec) fail("cannot write {}/{}: {}", dir, name, ec.message());
  }
}

std::unique_ptr<importers::RunTrace> run_values(const importers::TorchTraceRequest& request,
                                                const std::string& keep, int steps, int64_t seed) {
  if (!keep.empty() && std::filesystem::exists(keep + "/state.json")) {
    for (int r = 1; r < request.ranks; ++r) {
      if (!std::filesystem::exists(fmt::format("{}/inputs{}.json", keep, r))) {
        fail(
            "{}: the values were kept for fewer than the plan's {} data-parallel ranks (no "
            "inputs{}.json): keep them in a new directory",
            keep, request.ranks, r);
      }
    }
    return std::make_unique<importers::RunTrace>(keep);
  }
  auto traced = std::make_unique<importers::RunTrace>(request, steps, seed);
  if (!keep.empty()) keep_values(*traced, keep);
  return traced;
}

}  // namespace memwall::cli
