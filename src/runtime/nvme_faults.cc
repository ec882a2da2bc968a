#include "memwall/runtime/nvme_faults.h"

#include <charconv>
#include <stdexcept>

namespace memwall::runtime {

NvmeFaultPlan parse_nvme_faults(const std::string& spec) {
  NvmeFaultPlan plan;
  size_t pos = 0;
  while (pos <= spec.size()) {
    size_t comma = spec.find(',', pos);
    if (comma == std::string::npos) comma = spec.size();
    std::string item = spec.substr(pos, comma - pos);
    pos = comma + 1;
    if (item.empty()) {
      if (comma == spec.size()) break;
      continue;
    }
    auto bad = [&](const std::string& why) {
      return std::invalid_argument("nvme: bad fault '" + item + "' in '" + spec + "': " + why +
                                   " (want KIND@N, KIND eio|short|enospc|corrupt, N >= 1; or "
                                   "nodirect)");
    };
    if (item == "nodirect") {
      plan.no_direct = true;
      continue;
    }
    size_t at = item.find('@');
    if (at == std::string::npos) throw bad("no '@'");
    std::string kind = item.substr(0, at);
    NvmeFault fault = NvmeFault::kNone;
    for (const NvmeFault known :
         {NvmeFault::kEio, NvmeFault::kShort, NvmeFault::kEnospc, NvmeFault::kCorrupt}) {
      if (kind == nvme_fault_name(known)) fault = known;
    }
    if (fault == NvmeFault::kNone) throw bad("unknown kind '" + kind + "'");
    const char* first = item.data() + at + 1;
    const char* last = item.data() + item.size();
    uint64_t n = 0;
    auto [end, ec] = std::from_chars(first, last, n);
    if (ec != std::errc() || end != last || first == last || n == 0) {
      throw bad("N is not a positive integer");
    }
    if (!plan.at.emplace(n, fault).second) throw bad("operation " + std::to_string(n) + " twice");
  }
  return plan;
}

const char* nvme_fault_name(NvmeFault fault) {
  switch (fault) {
    case NvmeFault::kNone:
      return "none";
    case NvmeFault::kEio:
      return "eio";
    case NvmeFault::kShort:
      return "short";
    case NvmeFault::kEnospc:
      return "enospc";
    case NvmeFault::kCorrupt:
      return "corrupt";
  }
  return "?";
}

}  // namespace memwall::runtime
