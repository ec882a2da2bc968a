// `memwall models` and `memwall gpus`: what is built in.
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "memwall/hw/hardware.h"
#include "memwall/models/zoo.h"
#include "memwall/report/format.h"
#include "memwall/report/hardware_tables.h"

namespace memwall::cli {
namespace {

std::string_view family_name(ModelFamily f) {
  switch (f) {
    case ModelFamily::kDecoder:
      return "decoder";
    case ModelFamily::kEncoder:
      return "encoder";
    case ModelFamily::kCnn:
      return "cnn";
  }
  return "?";
}

}  // namespace

void add_models(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("models", "list the built-in models");
  auto json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "machine-readable output");
  cmd->callback([&action, json] {
    action = [json] {
      if (*json) {
        nlohmann::json out = nlohmann::json::array();
        for (const ModelInfo& m : model_zoo()) {
          out.push_back({{"name", m.name},
                         {"family", family_name(m.family)},
                         {"param_count", m.param_count},
                         {"default_batch", m.default_batch},
                         {"default_seq", m.default_seq},
                         {"max_seq", m.max_seq},
                         {"default_image", m.default_image},
                         {"description", m.description}});
        }
        std::cout << out.dump(2) << "\n";
        return 0;
      }
      std::cout << fmt::format("{:<14} {:<8} {:>16}  {:<14} {}\n", "model", "family", "parameters",
                               "defaults", "description");
      for (const ModelInfo& m : model_zoo()) {
        std::string defaults = m.family == ModelFamily::kCnn
                                   ? fmt::format("b{} i{}", m.default_batch, m.default_image)
                                   : fmt::format("b{} s{}", m.default_batch, m.default_seq);
        std::cout << fmt::format("{:<14} {:<8} {:>16}  {:<14} {}\n", m.name, family_name(m.family),
                                 grouped(static_cast<uint64_t>(m.param_count)), defaults,
                                 m.description);
      }
      return 0;
    };
  });
}

void add_gpus(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("gpus", "list the built-in hardware profiles");
  auto json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "machine-readable output (full profiles)");
  cmd->callback([&action, json] {
    action = [json] {
      if (*json) {
        nlohmann::json out = nlohmann::json::array();
        for (const Hardware& hw : builtin_gpus()) out.push_back(hardware_to_json(hw));
        std::cout << out.dump(2) << "\n";
        return 0;
      }
      std::cout << gpus_table(builtin_gpus());
      return 0;
    };
  });
}

}  // namespace memwall::cli
