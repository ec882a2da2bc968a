// Shared by `memwall alloc-replay` and `memwall bench alloc` (alloc_runner.h).
#include "alloc_runner.h"

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

}  // namespace memwall::cli
