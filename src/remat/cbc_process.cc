// CBC in a child process under a hard deadline (cbc_process.h).
//
// Note [Hard deadline]
// ~~~~~~~~~~~~~~~~~~~~
// CBC 2.10's time limit (Cbc_setMaximumSeconds) is checked between the
// phases of its search, not inside them: the feasibility pump and the
// root's cut rounds run to their end. A 3 s limit took 7.8 s of wall time
// (3.75 s of CPU) on a 76-op graph, the pump exiting 3.4 s late, and 19 s
// on ResNet-152's stage chain (issue 19). The C API has no callback that could stop it. So the
// solve runs in a forked child (Note [Child under a deadline] in
// child_process.cc) that writes its answer (status, objective, bound, every
// column) to a pipe and exits, and is killed at the deadline. CBC keeps a
// smaller limit of its own (checkmate.cc), so that it normally ends by
// itself with its incumbent. A killed child's incumbent is lost: the 2.10 C
// API reports none as they are found (it has no incumbent or event
// callback), so checkmate falls back on the warm start it gave CBC, which
// CBC's incumbent is never worse than.
//
// Note [Builds without CBC]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// CBC (coinor-libcbc-dev) is a Debian package that GPU machines rented by
// the hour do not have, and the GPU check kit (scripts/gpu-kit.sh,
// docs/gpu.md) builds memwall there without it: CMake defines
// MEMWALL_HAVE_CBC only where pkg-config finds cbc. Without it Checkmate and
// the pipeline placement's integer programme refuse in one line, the
// memwall planner runs its other proposers, and plans that need CBC are
// made on a machine that has it (the kit carries them).
#include "cbc_process.h"

#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "child_process.h"
#include "memwall/base/error.h"
#include "memwall/remat/remat.h"

#ifdef MEMWALL_HAVE_CBC

namespace memwall {
namespace {

using remat_detail::kChildWriteFailed;
using remat_detail::write_all;

// The answer's fixed part; the columns follow when has_solution.
struct Header {
  uint64_t magic = 0;
  uint64_t columns = 0;
  uint32_t has_solution = 0;
  uint32_t proven_optimal = 0;
  uint32_t proven_infeasible = 0;
  uint32_t pad = 0;
  double objective = 0;
  double bound = 0;
};
constexpr uint64_t kMagic = 0x6d656d77616c6c31;  // "memwall1"

void solve_and_write(Cbc_Model* model, int fd) {
  Cbc_solve(model);
  Header h;
  h.magic = kMagic;
  h.columns = static_cast<uint64_t>(Cbc_getNumCols(model));
  const double* x = Cbc_bestSolution(model);
  h.has_solution = x != nullptr;
  h.proven_optimal = Cbc_isProvenOptimal(model) != 0;
  h.proven_infeasible = Cbc_isProvenInfeasible(model) != 0;
  h.objective = x != nullptr ? Cbc_getObjValue(model) : 0;
  h.bound = Cbc_getBestPossibleObjValue(model);
  if (!write_all(fd, &h, sizeof h) ||
      (x != nullptr && !write_all(fd, x, sizeof(double) * h.columns))) {
    ::_exit(kChildWriteFailed);
  }
}

}  // namespace

CbcAnswer solve_cbc_in_child(Cbc_Model* model, Deadline deadline, std::string_view what) {
  const remat_detail::ChildRun run = remat_detail::run_in_child(
      [model](int fd) { solve_and_write(model, fd); }, deadline, what);
  CbcAnswer answer;
  if (!run.finished) return answer;
  Header h;
  if (run.bytes.size() < sizeof h) {
    fail("{}'s process answered {} bytes, less than its header", what, run.bytes.size());
  }
  std::memcpy(&h, run.bytes.data(), sizeof h);
  const auto columns = static_cast<uint64_t>(Cbc_getNumCols(model));
  const size_t expected = sizeof h + (h.has_solution ? sizeof(double) * columns : 0);
  if (h.magic != kMagic || h.columns != columns || run.bytes.size() != expected) {
    fail("{}'s process answered {} bytes, not the {} expected", what, run.bytes.size(),
         expected);
  }
  answer.finished = true;
  answer.objective = h.objective;
  answer.bound = h.bound;
  answer.proven_optimal = h.proven_optimal != 0;
  answer.proven_infeasible = h.proven_infeasible != 0;
  if (h.has_solution) {
    answer.x.resize(columns);
    std::memcpy(answer.x.data(), run.bytes.data() + sizeof h, sizeof(double) * columns);
  }
  return answer;
}

}  // namespace memwall

#endif  // MEMWALL_HAVE_CBC

namespace memwall {

bool cbc_available() {
#ifdef MEMWALL_HAVE_CBC
  return true;
#else
  return false;
#endif
}

}  // namespace memwall
