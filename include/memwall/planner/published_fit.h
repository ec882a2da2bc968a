// The published-runs table and the cost model fitted to it (`memwall bench
// published`, Note [Fitting to published runs] in published_fit.cc).
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "memwall/graph/types.h"
#include "memwall/hw/hardware.h"
#include "memwall/planner/published.h"

namespace memwall {

struct PublishedCase {
  PublishedRun run;
  Graph graph;  // the row's model at its micro-batch
  // Why the model could not be built (a trace that failed: no torch, no
  // transformers); the row is then shown without a prediction.
  std::string unavailable;
};

// Efficiencies the fit sets on the built-in profiles (Note [Fitted
// efficiencies] in src/hw/cost_model.cc): per GPU family ("v100", "a100",
// "h100": the profile's name up to '-'), and shared.
struct EfficiencyFit {
  std::map<std::string, double> matmul_efficiency;  // by family
  double matmul_half_dim = 0;
  double attention_ratio = 1;  // attention_efficiency / matmul_efficiency
};

// The GPU family of a built-in profile's name ("a100-80g" -> "a100").
std::string gpu_family(const std::string& gpu);
// `hw` with the fit's efficiencies for its family (unchanged without one).
Hardware with_fit(const Hardware& hw, const EfficiencyFit& fit);

struct PublishedRow {
  PublishedRun run;
  PublishedPrediction prediction;
  double params = 0;             // the model's parameter count
  double published_seconds = 0;  // the published figure as seconds per step
  double predicted = 0;          // memwall's step in the row's metric
  double ratio = 0;              // predicted / published step seconds; 0: no plan
  // DeepSpeed's estimators' answer for the row ({"gpu_bytes", "cpu_bytes",
  // ...} or {"error"}); null: not asked (no ZeRO, or not run).
  nlohmann::json deepspeed;
};

struct PublishedTable {
  std::vector<PublishedRow> rows;
  int held_out = 0;                  // rows neither fitted nor unmatched
  int unmatched = 0;                 // rows memwall cannot match (PublishedRun::unmatched)
  int held_out_within = 0;           // of them, ratio within [0.80, 1.25]
  double held_out_median_error = 0;  // median |ratio - 1| of held-out rows
  double fitted_median_error = 0;
  bool fitted = false;  // predicted with a fit (--fit), not the built-ins
  EfficiencyFit fit;
  std::string fit_text;  // the fit in words, for the terminal
};

// Every row predicted with the built-in profiles as they are, or, with
// `unfitted`, without their fitted efficiencies (compute_efficiency for
// every kernel, as before the fit).
PublishedTable evaluate_published(const std::vector<PublishedCase>& cases, bool unfitted = false);
// Fits EfficiencyFit to the rows marked fitted, then predicts every row
// with it.
PublishedTable fit_published(const std::vector<PublishedCase>& cases);
nlohmann::json published_table_json(const PublishedTable& table);

}  // namespace memwall
