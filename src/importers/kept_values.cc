// The values a run starts from (memwall/importers/kept_values.h).
#include "memwall/importers/kept_values.h"

#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "memwall/base/error.h"
#include "memwall/base/output_files.h"
#include "memwall/graph/graph.h"

namespace memwall::importers {

// The graph and plan given as files must be the graph a fresh trace of its
// model gives (the values come from that trace).
void check_same_structure(const Graph& given, const Graph& traced, const std::string& file) {
  const auto differ = [&](const std::string& what) {
    fail(
        "{}: the graph differs from what its model gives on this machine's CPU now ({}); "
        "trace it on the CPU (memwall run ... --keep-values DIR writes DIR/graph.json, as does "
        "memwall trace --measure; a trace on the meta device may decompose ops differently) "
        "or let memwall run trace it",
        file, what);
  };
  // Note [Rewritten graphs]: a rewritten graph names the graph it came from.
  if (given.meta.contains("rewritten_from")) {
    const std::string from = given.meta["rewritten_from"].is_string()
                                 ? given.meta["rewritten_from"].get<std::string>()
                                 : std::string();
    if (from != graph_fingerprint(traced)) {
      differ(fmt::format("it was rewritten from a graph of fingerprint {}, the model gives {}",
                         from, graph_fingerprint(traced)));
    }
    return;
  }
  // Versions of in-place updates (Note [Buffer versions]) are appended
  // after the tracer's buffers: a graph read with or without them compares
  // on the tracer's.
  const auto original = [](const Graph& g) {
    size_t n = 0;
    for (const Buffer& b : g.buffers) n += b.version_of == kNoBuffer ? 1 : 0;
    return n;
  };
  if (given.ops.size() != traced.ops.size() || original(given) != original(traced)) {
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

// Note [Kept values]
// ~~~~~~~~~~~~~~~~~~~
// A --keep-values directory is judged before any work, since a trace takes
// seconds to minutes (issue 45: a DIR that was a regular file failed after
// 14 s of tracing). A path that is not a directory, or that cannot be made
// or written, is refused at once. A directory that holds values is read
// whole then (the graph, and the seed, steps and ranks of eager's
// reference from state.json and eager.json), and must be the values of the
// model asked for: the model its graph was traced from (meta.origin) is
// compared with the request, so another model's directory is named as
// such rather than reported as a graph that "differs from what its model
// gives" (trace it again). `memwall run` then holds its options to what
// the directory has (run_steps).
KeptValues::KeptValues(const std::string& dir) : dir_(dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status status = fs::status(dir, ec);
  if (fs::exists(status) && !fs::is_directory(status)) {
    fail("--keep-values {} is not a directory (it keeps a trace's values: give a directory)", dir);
  }
  if (!fs::exists(dir + "/state.json")) {
    // To be written after the trace: it, or the nearest folder above it
    // that exists, must take new files.
    fs::path at = fs::absolute(dir, ec).lexically_normal();
    while (!fs::exists(at, ec) && at.has_relative_path()) at = at.parent_path();
    if (!fs::is_directory(at, ec)) {
      fail("--keep-values {}: cannot make it: {} is not a directory", dir, at.string());
    }
    if (::access(at.c_str(), W_OK | X_OK) != 0) {
      fail("--keep-values {}: cannot write into {}: {}", dir, at.string(), std::strerror(errno));
    }
    return;
  }
  for (const char* name : {"eager.json", "eager.bin"}) {
    if (!fs::exists(dir + "/" + name)) {
      fail("{}: no {} (the directory `memwall run --keep-values` writes)", dir, name);
    }
  }
  trace_ = std::make_unique<RunTrace>(dir);  // reads graph.json, checks state.*
  const auto index = [&](const char* name) {
    try {
      std::ifstream in(dir + "/" + name);
      return nlohmann::json::parse(in);
    } catch (const std::exception& e) {
      fail("{}/{}: {}", dir, name, e.what());
    }
  };
  const nlohmann::json state = index("state.json");
  const nlohmann::json eager = index("eager.json");
  try {
    seed_ = state.at("seed").get<int64_t>();
    steps_ = eager.at("steps").get<int>();
    ranks_ = eager.value("ranks", 1);
  } catch (const std::exception& e) {
    fail("{}: eager.json or state.json is malformed: {}", dir, e.what());
  }
}

namespace {

// The source as the tracer records it in meta.origin (python/memwall/cli.py): scripts and
// config files by absolute path, a Hugging Face model by its hub id
// (`traced` knows it as its meta.model or origin.hf).
std::string source_of(const TorchTraceRequest& r, const Graph& traced) {
  const auto absolute = [](const std::string& path) {
    std::error_code ec;
    return std::filesystem::absolute(path, ec).lexically_normal().string();
  };
  if (!r.torchvision.empty()) return "--torchvision " + r.torchvision;
  if (!r.builtin.empty()) return "--builtin " + r.builtin;
  if (!r.hf_config.empty()) return "--hf-config " + absolute(r.hf_config);
  if (!r.hf.empty()) {
    const nlohmann::json& origin = traced.meta.value("origin", nlohmann::json::object());
    const std::string hub = origin.value("hf", "");
    const auto lower = [](std::string s) {
      for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      return s;
    };
    const bool same = r.hf == traced.meta.value("model", "") || lower(r.hf) == lower(hub);
    return "--hf " + (same ? hub : r.hf);
  }
  const size_t colon = r.script.rfind(':');
  if (colon == std::string::npos) return "--script " + r.script;
  return "--script " + absolute(r.script.substr(0, colon)) + r.script.substr(colon);
}

}  // namespace

std::string model_difference(const TorchTraceRequest& wanted, const Graph& traced) {
  const TorchTraceRequest had = request_for(traced);
  const std::string source = source_of(wanted, traced);
  if (source != source_of(had, traced)) {
    return fmt::format("traced from {}, not {}", source_of(had, traced), source);
  }
  std::string differ;
  const auto compare = [&](const char* what, const auto& asked, const auto& kept) {
    if (asked == kept) return;
    differ += fmt::format("{}{} {}, not {}", differ.empty() ? "" : ", ", what, kept, asked);
  };
  // The tracer's defaults (python/memwall/cli.py, main; memwall/sources/hf.py).
  if (!had.torchvision.empty()) {
    compare("--batch", wanted.batch, had.batch);
    const int64_t image = wanted.torchvision == "inception_v3" ? 299 : 224;
    compare("--image", wanted.image > 0 ? wanted.image : image, had.image);
    compare("--optimizer", wanted.optimizer, had.optimizer);
  } else if (!had.hf.empty() || !had.hf_config.empty()) {
    compare("--batch", wanted.batch, had.batch);
    compare("--seq", wanted.seq > 0 ? wanted.seq : 512, had.seq);
    compare("--dtype", wanted.dtype, had.dtype);
    compare("--optimizer", wanted.optimizer, had.optimizer);
    compare("--lora", wanted.lora_rank, had.lora_rank);
    if (had.lora_rank > 0 && wanted.lora_rank == had.lora_rank) {
      compare("--lora-alpha", wanted.lora_alpha > 0 ? wanted.lora_alpha : 8.0, had.lora_alpha);
      compare("--lora-targets", wanted.lora_targets.empty() ? "q,v" : wanted.lora_targets,
              had.lora_targets);
    }
  }
  // The CPU kernels' scratch depends on the thread count (request_for).
  if (wanted.threads > 0 && had.threads > 0) compare("threads", wanted.threads, had.threads);
  return differ;
}

void KeptValues::check_model(const TorchTraceRequest& wanted, const std::string& whose) const {
  if (!holds()) return;
  const std::string difference = model_difference(wanted, graph());
  if (!difference.empty()) {
    fail(
        "--keep-values {} holds the values of another model (\"{}\": {}), not of {}: keep "
        "them in another directory",
        dir_, graph().name, difference, whose);
  }
}

// A run of a different count differed from eager's reference after the
// run (exit 1), and --seed went unused.
int KeptValues::run_steps(const RunAsk& ask) const {
  if (!holds()) return ask.steps.value_or(3);
  if (ask.python) {
    fail(
        "run: --python names the interpreter that traces; {} holds a trace's values, so "
        "nothing is traced",
        dir_);
  }
  if (ask.seed && *ask.seed != seed_) {
    fail(
        "run: {} holds values traced after torch.manual_seed({}); --seed {} needs a trace of "
        "its own: keep it in another directory",
        dir_, seed_, *ask.seed);
  }
  for (int r = 1; r < ask.ranks; ++r) {
    if (!std::filesystem::exists(fmt::format("{}/inputs{}.json", dir_, r))) {
      fail(
          "{}: the values were kept for fewer than the plan's {} data-parallel ranks (no "
          "inputs{}.json): keep them in a new directory",
          dir_, ask.ranks, r);
    }
  }
  if (ask.check_eager && ranks_ != ask.ranks) {
    fail(
        "run: {} holds eager PyTorch's reference over {} data-parallel rank(s); --check-eager "
        "compares a run over as many, and this one has {}: keep its values in another directory",
        dir_, ranks_, ask.ranks);
  }
  if (ask.check_eager && ask.steps && *ask.steps != steps_) {
    fail(
        "run: {} holds eager PyTorch's results after {} step(s); --check-eager compares a run "
        "of as many: give --steps {} (or leave it out), or keep the values of {} steps in "
        "another directory",
        dir_, steps_, steps_, *ask.steps);
  }
  return ask.steps.value_or(steps_);
}

namespace {

// Copies the run's inputs to `dir` for later runs (--keep-values), with
// the graph as memwall reads it (versions made, Note [Buffer versions]): the
// graph to plan for `memwall run --graph DIR/graph.json`.
void keep_values(const RunTrace& trace, const std::string& dir) {
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

}  // namespace

std::unique_ptr<RunTrace> KeptValues::take(const TorchTraceRequest& request, int steps,
                                           int64_t seed) {
  if (holds()) {
    // Note [The CUDA run] in src/exec/cuda_run.cc: the values come from
    // the kernels that run them.
    const std::string had = graph().meta.value("device", std::string("cpu"));
    if (had != request.device) {
      fail(
          "run: {} holds values traced on the {} ({}'s kernels); a run on the {} needs values "
          "traced there: keep them in another directory",
          dir_, had == "cuda" ? "GPU" : had, had, request.device == "cuda" ? "GPU" : "CPU");
    }
    return std::move(trace_);
  }
  auto traced = std::make_unique<RunTrace>(request, steps, seed);
  if (given()) keep_values(*traced, dir_);
  return traced;
}

}  // namespace memwall::importers
