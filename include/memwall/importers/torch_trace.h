// `memwall trace`: imports a real PyTorch training iteration as a Graph.
//
// The tracer is Python (the package python/memwall, docs/trace.md), compiled
// into this library as text at build time so that the binary needs no
// source tree at run time. It runs under the interpreter tracer_python()
// chooses (memwall's own environment with torch 2.x from PyPI unless the
// user names another), writes memwall.graph/1 JSON, and the C++ side reads
// and validates what it wrote.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "memwall/graph/types.h"

namespace memwall {
class PrivateDir;
}

namespace memwall::importers {

// The Python package python/memwall, compiled in: every .py file under
// python/memwall by its path relative to python/ ("memwall/cli.py"), sorted
// by path (CMakeLists.txt).
struct PythonFile {
  std::string_view path;
  std::string_view source;
};
std::span<const PythonFile> python_package_files();

// Writes the package into `dir`, subdirectories kept (each file and
// directory named through `dir`, so that an interrupt removes them); returns
// the path of the entry the C++ side starts, `dir`/memwall/__main__.py
// (`python ENTRY ARGS`: the tracer's ARGS, or `cpu-adam-contenders THREADS`).
std::string write_python_package(PrivateDir& dir);

// Note [Tracer interpreter]: the Python that runs the tracer, the first of
//  1. `chosen` (`memwall trace --python PATH`), when not empty;
//  2. $MEMWALL_PYTHON, when set and not empty;
//  3. memwall's environment, made by `scripts/install-deps.sh --torch`
//     (Note [Python environment] there):
//     ${XDG_CACHE_HOME:-$HOME/.cache}/memwall/venv-KEY/bin/python, KEY the
//     hash of python/requirements.txt this binary was built with, when the
//     environment is complete;
//  4. the first python3 on PATH (a user's own activated environment).
// A user's own environment therefore wins only when named (1, 2) or when
// memwall's does not exist.
std::string tracer_python(const std::string& chosen = {});

// memwall's environment's interpreter (3 above), whether or not it exists.
std::string memwall_env_python();

struct TorchTraceRequest {
  std::string torchvision;  // a torchvision classification model name, or
  std::string script;       // "FILE.py:FUNCTION" returning (model, batch, loss_fn, optimizer), or
  std::string builtin;      // a built-in model (python/memwall/sources/builtin.py)
  // A Hugging Face transformers model built from its configuration on the
  // meta device (python/memwall/sources/hf.py): a built-in name or a config.json.
  std::string hf;
  std::string hf_config;
  int64_t seq = 0;                 // --hf: sequence length; 0: the tracer's default (512)
  std::string dtype = "bf16";      // --hf: fp32, or bf16/fp16 mixed precision
  int64_t lora_rank = 0;           // --hf: LoRA adapters of this rank; 0: none
  std::string lora_targets;        // --hf: q,k,v,o,gate,up,down or all; empty: q,v
  double lora_alpha = 0;           // --hf: 0: peft's default (8)
  int64_t batch = 32;              // torchvision only
  int64_t image = 0;               // torchvision only; 0: the model's own (224, Inception v3 299)
  std::string optimizer = "adam";  // torchvision only: sgd, momentum, adam, adamw
  bool measure = false;            // run on the CPU and record each op's time
  // Whose kernels the meta-device trace stands for: "cuda" or "cpu" (what
  // they save differs: dropout's mask is one byte per element on CUDA, the
  // input's dtype on the CPU). Empty: CUDA's, or the CPU's when measuring.
  std::string kernels;
  double timeout_s = 600;  // the tracer is stopped past it
  std::string python;      // the interpreter; empty: tracer_python()'s choice
  int threads = 0;  // torch.set_num_threads first (CPU kernels' choices depend on it); 0: torch's
  // RunTrace: values for this many data-parallel ranks (each its own
  // micro-batch; eager's reference averages their gradients, Note
  // [Data-parallel reference] in python/memwall/values/reference.py).
  int ranks = 1;
  // RunTrace: where the values' step and eager's reference run: "cpu", or
  // "cuda" (the GPU torch sees, for `memwall run --device cuda`).
  std::string device = "cpu";
};

// Traces one training iteration and returns the validated graph. What the
// tracer (and the user's script) prints goes to standard error as it comes.
// Throws Error with one line naming the problem: no python or torch, an
// unknown model, a missing script or function, the aten operator that
// failed, a graph that does not validate, the time limit.
Graph trace_torch(const TorchTraceRequest& request);

// What `memwall bench fidelity` compares: the meta-device trace of one
// step and the same step run for real on the CPU under PyTorch's allocator
// records (python/memwall/fidelity.py).
struct MeasuredStep {
  Graph graph;
  uint64_t measured_peak_bytes = 0;
  uint64_t baseline_bytes = 0;     // model states and batch before the step
  std::string measured_peak_op;    // the outermost aten op at the peak ("aten::div")
  std::string measured_peak_node;  // its autograd node, if any ("ConvolutionBackward0")
  int threads = 0;
  // Every top-level aten op of the run in order: its graph op type and the
  // scratch the profiler saw (docs/cost-model.md, "Kernel scratch").
  std::vector<std::pair<std::string, uint64_t>> op_scratch;
};
MeasuredStep trace_and_measure(const TorchTraceRequest& request);

// A trace on real CPU tensors for `memwall run`: the graph with its call
// records, and a private directory with the values the step starts from
// and eager PyTorch's results after `steps` steps from `seed` (Note [Run
// inputs] in python/memwall/values/files.py). The directory goes with the object.
class RunTrace {
 public:
  RunTrace(const TorchTraceRequest& request, int steps, int64_t seed);
  // The values of an earlier trace, kept in `values` (memwall run
  // --keep-values): read, not traced again.
  explicit RunTrace(const std::string& values);
  ~RunTrace();
  RunTrace(const RunTrace&) = delete;
  RunTrace& operator=(const RunTrace&) = delete;
  const Graph& graph() const;
  const std::string& values_dir() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The request that rebuilds the model `graph` was traced from (its meta's
// "origin"); throws Error when the graph does not say.
TorchTraceRequest request_for(const Graph& graph);

// Runs the embedded tracer with `args` from a private temporary directory
// (its working directory is the caller's) and returns its standard output.
// Throws Error carrying the tracer's one-line message when it fails or
// outlives `timeout_s`.
std::string run_torch_tracer(const std::vector<std::string>& args, double timeout_s = 3600,
                             const std::string& python = {});

}  // namespace memwall::importers
