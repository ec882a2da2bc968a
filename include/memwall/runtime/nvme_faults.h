// Fault injection for the NVMe engine (docs/nvme.md "Faults"): a spec such
// as "eio@3,short@5,enospc@7,corrupt@9" names which block operations fail
// and how, so that tests and users can check the engine's recovery paths on
// a healthy drive.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace memwall::runtime {

enum class NvmeFault {
  kNone,
  kEio,      // the operation completes with -EIO (retried)
  kShort,    // the operation completes with half its bytes (the rest resubmitted)
  kEnospc,   // the operation completes with -ENOSPC (not retried: one clear error)
  kCorrupt,  // a read returns its block with one bit flipped (CRC mismatch, re-read)
};

struct NvmeFaultPlan {
  // Block operation number (1-based, counting every submission, retries
  // included) -> the fault it suffers.
  std::map<uint64_t, NvmeFault> at;
  // "nodirect": opening a swap file with O_DIRECT fails with EINVAL, as on a
  // filesystem without direct I/O (exercises the buffered fallback).
  bool no_direct = false;

  NvmeFault take(uint64_t op) const {
    auto it = at.find(op);
    return it == at.end() ? NvmeFault::kNone : it->second;
  }
};

// Parses a spec; throws std::invalid_argument with a one-line message naming
// the bad item. An empty spec is no faults.
NvmeFaultPlan parse_nvme_faults(const std::string& spec);

// A kind's name in a spec ("eio"); parse_nvme_faults reads these names.
const char* nvme_fault_name(NvmeFault fault);

}  // namespace memwall::runtime
