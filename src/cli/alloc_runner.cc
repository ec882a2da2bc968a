// Shared by `memwall alloc-replay` and `memwall bench alloc` (alloc_runner.h).
#include "alloc_runner.h"

#include <algorithm>

#include <fmt/format.h>

#include "memwall/base/error.h"
#include "memwall/report/format.h"
#include "options.h"

namespace memwall::cli {

void AllocFlags::add_options(CLI::App& app) {
  app.add_option("--policy", policy, "caching, expandable, stitching, plan, or all")
      ->capture_default_str();
  app.add_option("--capacity", capacity,
                 "device bytes: bytes, 80GiB, or a percentage of the GPU's memory (default: "
                 "the GPU's memory)");
  app.add_option("--granularity", granularity, "bytes per physical chunk (a power of two)")
      ->capture_default_str();
  app.add_option("--max-split-size", max_split_size,
                 "caching: blocks this large are never split (PyTorch's max_split_size_mb)");
  app.add_option("--layout-time", layout_seconds, "seconds for the plan policy's layout")
      ->capture_default_str();
}

AllocSetup AllocFlags::parse(const Hardware& hw) const {
  AllocSetup setup;
  if (policy == "all") {
    for (const std::string_view p : alloc::policy_names()) setup.policies.emplace_back(p);
  } else {
    const auto names = alloc::policy_names();
    if (std::find(names.begin(), names.end(), policy) == names.end()) {
      fail("--policy: unknown policy '{}' (known: caching, expandable, stitching, plan, all)",
           policy);
    }
    setup.policies = {policy};
  }
  setup.capacity = capacity.empty() ? hw.device_memory_bytes
                                    : parse_bytes(capacity, "--capacity", hw.device_memory_bytes);
  setup.capacity_source = capacity.empty() ? hw.name + "'s memory" : "--capacity";
  setup.granularity = parse_bytes(granularity, "--granularity", 0);
  if ((setup.granularity & (setup.granularity - 1)) != 0 || setup.granularity % 4096 != 0) {
    fail("--granularity: {} is not a power of two of at least 4096 bytes", setup.granularity);
  }
  if (setup.capacity < setup.granularity) {
    fail("--capacity: {} bytes hold no {}-byte chunk", setup.capacity, setup.granularity);
  }
  if (!max_split_size.empty()) {
    setup.options.max_split_size = parse_bytes(max_split_size, "--max-split-size", 0);
  }
  if (!(layout_seconds > 0) || layout_seconds > 86400) {
    fail("--layout-time must be a number of seconds in (0, 86400] (got {})", layout_seconds);
  }
  setup.layout_seconds = layout_seconds;
  return setup;
}

std::string replay_table(const std::vector<PolicyReplay>& runs, uint64_t peak_live) {
  // A space before the counts' columns keeps huge counts apart.
  std::string out = fmt::format("  {:<11}{:>15}{:>15}{:>14}{:>15}{:>10} {:>8} {:>9}  {}\n",
                                "policy", "peak allocated", "peak reserved", "reserved/live",
                                "fragmentation", "segments", "maps", "stitches", "fits");
  for (const PolicyReplay& r : runs) {
    const alloc::Stats& s = r.result.stats;
    const double ratio = peak_live == 0 ? 0
                                        : static_cast<double>(s.peak_reserved_bytes) /
                                              static_cast<double>(peak_live);
    const std::string fits =
        r.result.fits
            ? "yes"
            : fmt::format("no: out of memory at event {}; needs {} reserved",
                          grouped(r.result.failed_event), human_bytes(r.unlimited_peak_reserved));
    out += fmt::format("  {:<11}{:>15}{:>15}{:>14.4f}{:>14.2f}%{:>10} {:>8} {:>9}  {}\n", r.policy,
                       human_bytes(s.peak_allocated_bytes), human_bytes(s.peak_reserved_bytes),
                       ratio, 100 * s.fragmentation(), grouped(s.segments_created), grouped(s.maps),
                       grouped(s.stitches), fits);
  }
  return out;
}

}  // namespace memwall::cli
