// Option groups shared by the verbs: where the graph comes from and which
// hardware profile to use.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "memwall/graph/types.h"
#include "memwall/hw/hardware.h"

namespace memwall::cli {

// --model NAME [--batch --seq --image --dtype --optimizer --flash] or --graph FILE.
struct GraphSource {
  std::string model;
  std::string graph_file;
  std::optional<int64_t> batch, seq, image;
  std::string dtype = "bf16";
  std::string optimizer = "adam";
  bool flash = false;

  void add_options(CLI::App& app, const std::string& default_model);
  // Builds or reads the graph; throws Error on bad input.
  Graph load() const;
};

// --gpu NAME or --gpu-file FILE.
struct GpuSource {
  std::string gpu;
  std::string gpu_file;

  void add_options(CLI::App& app, const std::string& default_gpu);
  Hardware load() const;
};

}  // namespace memwall::cli
