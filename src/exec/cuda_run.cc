// The executor's device on a GPU (cuda_run.h).
#include "cuda_run.h"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>

#include <ATen/Context.h>
#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>

#include "exec_error.h"
#include "memwall/exec/library.h"

// Note [The CUDA run]
// ~~~~~~~~~~~~~~~~~~~
// `memwall run --device cuda` runs the plan's steps as on the emulated
// device (Note [Emulated device] in device_memory.h), with three changes:
// - Device memory is torch's CUDA memory, which libmemwall_exec_cuda.so
//   (Note [CUDA device memory]) makes memwall's allocator on the CUDA VMM
//   device with the plan's budget as capacity: a kernel's output, its
//   temporaries and cuBLAS's workspaces alike, refused past the budget.
//   The executor's own buffers are byte tensors made by at::empty on the
//   GPU, and a view's dispatch key follows its storage's device, so the
//   dispatcher takes the CUDA kernels; call records' device arguments are
//   the GPU's, a CPU step's the CPU's (call.cc).
// - Bytes into, out of and within device memory go through the library's
//   copies (Note [Device bytes]); swaps go through the runtime's CUDA copy
//   engine (src/runtime/cuda_copy_engine.cc) between the GPU and the host
//   pool, whose pages the engine registers with the driver. A kernel runs
//   on torch's current stream and a copy on one of the engine's two; the
//   order between them is kept on the device (Note [Device-side waits] in
//   src/runtime/cuda_copy_engine.cc): torch's stream waits for a swap-in's
//   copy before the op that reads the buffer, and a swap-out's copy stream
//   for an event recorded on torch's stream, so that the copy reads what
//   the kernels wrote while the host goes on. Frees are stream-ordered in
//   the library: a block freed here is reused only once torch's stream has
//   passed the free.
// - Values: the trace ran on the same GPU (`python -m memwall --values DIR
//   --device cuda`), under torch.use_deterministic_algorithms(True) and
//   CUBLAS_WORKSPACE_CONFIG=:4096:8, so eager's reference came from the
//   GPU's kernels; the run sets the same before CUDA starts. The values'
//   generator state is the CUDA generator's seed and Philox offset, and a
//   random op's recompute restores it (Note [Recomputed randomness]).
// Not yet: a plan's offsets on the GPU (the arena on the CUDA VMM device),
// data-parallel ranks, and sessions (memwall.Trainer); each is refused in
// one line. The first runs on a GPU are scripts/gpu-check.sh's (docs/gpu.md).

namespace memwall::exec {
namespace {

// The library's functions, resolved once per process.
struct CudaLibrary {
  CudaInstallFunction install = nullptr;
  CudaStatsFunction stats = nullptr;
  CudaResetPeakFunction reset_peak = nullptr;
  CudaLastErrorFunction last_error = nullptr;
  CudaCopyFunction copy = nullptr;
  CudaZeroFunction zero = nullptr;
  CudaStreamSynchronizeFunction stream_synchronize = nullptr;
  CudaMarkFunction mark = nullptr;
  CudaElapsedFunction elapsed = nullptr;
  CudaClearMarksFunction clear_marks = nullptr;
  CudaRecordFunction record = nullptr;
  CudaStreamWaitFunction stream_wait = nullptr;
  // What the one install asked (torch's allocator is set once per process).
  bool installed = false;
  uint64_t budget = 0;
  std::string policy;
};

std::mutex g_mutex;
CudaLibrary g_library;

std::string library_path() {
  if (const char* chosen = std::getenv("MEMWALL_EXEC_CUDA_LIBRARY"); chosen != nullptr && *chosen) {
    return chosen;
  }
  // Beside this library (the build's and the installed package's layout).
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&library_path), &info) == 0 || info.dli_fname == nullptr) {
    bad_input("--device cuda: cannot tell where libmemwall_exec.so is (dladdr failed)");
  }
  return (std::filesystem::path(info.dli_fname).parent_path() / kCudaLibrary).string();
}

template <typename Function>
void resolve(void* handle, const std::string& path, const char* name, Function& out) {
  out = reinterpret_cast<Function>(::dlsym(handle, name));
  if (out == nullptr) bad_input("--device cuda: {} has no {}: a library of another version", path, name);
}

CudaLibrary load() {
  CudaLibrary l;
  const std::string path = library_path();
  if (!std::filesystem::exists(path)) {
    bad_input(
        "--device cuda: this build has no {} (it is built only against a torch wheel with CUDA "
        "and where CMake finds the CUDA toolkit, and not under the sanitizers)",
        path);
  }
  // As libmemwall_exec.so itself is loaded (Note [Executor symbols]).
  void* handle = open_torch_library(path);
  if (handle == nullptr) bad_input("--device cuda: cannot load {}: {}", path, ::dlerror());
  resolve(handle, path, kCudaInstallSymbol, l.install);
  resolve(handle, path, kCudaStatsSymbol, l.stats);
  resolve(handle, path, kCudaResetPeakSymbol, l.reset_peak);
  resolve(handle, path, kCudaLastErrorSymbol, l.last_error);
  resolve(handle, path, kCudaCopySymbol, l.copy);
  resolve(handle, path, kCudaZeroSymbol, l.zero);
  resolve(handle, path, kCudaStreamSynchronizeSymbol, l.stream_synchronize);
  resolve(handle, path, kCudaMarkSymbol, l.mark);
  resolve(handle, path, kCudaElapsedSymbol, l.elapsed);
  resolve(handle, path, kCudaClearMarksSymbol, l.clear_marks);
  resolve(handle, path, kCudaRecordSymbol, l.record);
  resolve(handle, path, kCudaStreamWaitSymbol, l.stream_wait);
  return l;
}

// A call of the library that returned -1: the run fails with its reason.
[[noreturn]] void library_failed(const char* what) {
  run_failed("CUDA: {} failed: {}", what, g_library.last_error());
}

}  // namespace

CudaRun::CudaRun(uint64_t budget, const std::string& policy) {
  std::lock_guard lock(g_mutex);
  CudaLibrary& l = g_library;
  if (l.installed) {
    if (l.budget != budget || l.policy != policy) {
      bad_input(
          "--device cuda: this process's CUDA device memory has the budget {} and policy {}; torch "
          "sets its CUDA allocator once per process, so a run with {} and {} needs a new process",
          l.budget, l.policy, budget, policy);
    }
    return;
  }
  if (l.install == nullptr) l = load();
  // The eager reference's settings (Note [The CUDA run]): before cuBLAS
  // makes its first handle, which reads the variable.
  ::setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", /*overwrite=*/0);
  at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/false);
  at::globalContext().setBenchmarkCuDNN(false);
  at::globalContext().setDeterministicCuDNN(true);
  if (l.install(0, budget, policy.c_str()) != 0) {
    bad_input("--device cuda: memwall's CUDA device memory cannot start: {}", l.last_error());
  }
  l.installed = true;
  l.budget = budget;
  l.policy = policy;
}

DeviceBytes CudaRun::bytes() const {
  return DeviceBytes{.copy_function = g_library.copy,
                     .zero_function = g_library.zero,
                     .last_error = g_library.last_error};
}

c10::Storage CudaRun::storage(uint64_t bytes) const {
  const at::Tensor t = at::empty({static_cast<int64_t>(bytes)},
                                 at::TensorOptions().dtype(at::kByte).device(device()));
  return t.storage();
}

at::Generator CudaRun::generator() const { return at::globalContext().defaultGenerator(device()); }

MemwallExecCudaStatsV2 CudaRun::stats() const {
  MemwallExecCudaStatsV2 s{};
  if (g_library.stats(&s) != 0) library_failed("reading device memory's figures");
  return s;
}

void CudaRun::reset_peak() const {
  if (g_library.reset_peak() != 0) library_failed("resetting the device memory's peak");
}

void CudaRun::synchronize() const {
  if (g_library.stream_synchronize() != 0) library_failed("waiting for torch's stream");
}

// Note [Kernel timing on a GPU]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A kernel launch returns before the kernel runs, so the host's clock
// around an op's call measures its launch. On a GPU the executor records an
// event on torch's stream before and after each device op, and one as the
// iteration begins; once the iteration's work is done it reads each op's
// time between its two events (an op's kernels, as the simulator prices
// them) and puts the trace's compute spans where the events say, measured
// from the iteration's first event. Host steps (CPU optimizer steps) keep
// the host's clock.
uint64_t CudaRun::mark() const {
  uint64_t m = 0;
  if (g_library.mark(&m) != 0) library_failed("recording a timing event");
  return m;
}

double CudaRun::elapsed(uint64_t from, uint64_t to) const {
  double seconds = 0;
  if (g_library.elapsed(from, to, &seconds) != 0) library_failed("reading a timing event");
  return seconds;
}

void CudaRun::clear_marks() const { (void)g_library.clear_marks(); }

void* CudaRun::record() const {
  void* event = nullptr;
  if (g_library.record(&event) != 0) library_failed("recording an ordering event");
  return event;
}

void CudaRun::stream_wait(void* event) const {
  if (g_library.stream_wait(event) != 0) library_failed("making torch's stream wait for a copy");
}

}  // namespace memwall::exec
