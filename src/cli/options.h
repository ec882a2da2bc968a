// Option groups shared by the verbs: where the graph comes from and which
// hardware profile to use.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "memwall/graph/types.h"
#include "memwall/hw/hardware.h"
#include "memwall/models/zoo.h"

namespace memwall::cli {

// --model NAME [--batch --seq --image --dtype --optimizer --flash] or --graph FILE.
struct GraphSource {
  std::string model;
  std::string graph_file;
  // Kept as text and parsed by parse_count: CLI11 saturates overflowing
  // integers silently, which would turn a typo into a huge batch.
  std::optional<std::string> batch, seq, image;
  std::string dtype = "bf16";
  std::string optimizer = "adam";
  bool flash = false;

  void add_options(CLI::App& app, const std::string& default_model);
  // Builds or reads the graph; throws Error on bad input.
  Graph load() const;
  // The zoo options of --model (batch, seq, ... as given); throws Error on
  // bad values or when the graph comes from --graph.
  ModelOptions model_options() const;
};

// A positive integer flag value; throws Error naming the flag otherwise.
int64_t parse_count(const std::string& text, const char* flag);

// A memory size: plain bytes ("42949672960"), a decimal number with a unit
// (KiB, MiB, GiB, TiB; KB, MB, GB, TB in powers of ten), or a percentage of
// `reference` bytes ("80%"). Throws Error naming the flag for anything else,
// for zero, and for sizes above 2^62 bytes.
uint64_t parse_bytes(const std::string& text, const char* flag, uint64_t reference);

// --gpus-per-node N: a positive integer up to kMaxGpusPerNode; throws Error
// naming the flag otherwise.
int parse_gpus_per_node(const std::string& text);

// --gpu NAME or --gpu-file FILE.
struct GpuSource {
  std::string gpu;
  std::string gpu_file;

  void add_options(CLI::App& app, const std::string& default_gpu);
  Hardware load() const;
};

// A directory of ../shared/data: `given` (--data) when set, which must
// exist; else the first of $MEMWALL_DATA/<sub>, ../shared/data/<sub> and the
// same next to the source tree (the data lives beside the checkout); "" when
// none exists.
std::string find_data_dir(const std::string& given, const std::string& sub);

// The .csv files of `dir`, sorted by path.
std::vector<std::string> csv_files(const std::string& dir);

}  // namespace memwall::cli
