// The published-runs table and the fit (published_fit.h).
//
// Note [Fitting to published runs]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The fit sets the efficiencies of Note [Fitted efficiencies] (src/hw/
// cost_model.cc) from the rows marked `fitted` only, so that the held-out
// rows test a prediction, not the fit's memory of them:
//  - per GPU family, the matmul efficiency r_inf;
//  - shared by all families, Hockney's half dimension d_half and the ratio
//    of the attention kernels' efficiency to the matmuls'.
// Every other figure (peaks, bandwidths, the CPU's Adam rate, collectives)
// stays the profile's sourced value. The shared two are searched on a small
// grid; for each point, each family's r_inf is the fixed point of
// r <- r * exp(mean log(predicted / published)) over the family's fitted
// rows (a step mostly bound by compute takes 1/r times as long, so the
// update lands on the answer in a few rounds; it stops at 0.5% or after
// kRounds). The point with the smallest sum of squared log ratios wins.
// Plans are made again for each try: a faster kernel can change what the
// simulator overlaps, never which technique the row ran.
#include "memwall/planner/published_fit.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "memwall/base/error.h"
#include "memwall/graph/counts.h"

namespace memwall {
namespace {

constexpr int kRounds = 6;
constexpr double kTolerance = 0.005;
constexpr double kHalfDims[] = {0, 32, 64, 96, 128, 192, 256, 512};
constexpr double kAttentionRatios[] = {0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 2.5, 3.0};
constexpr double kLowRatio = 0.80, kHighRatio = 1.25;

// The built-in profile without its fitted efficiencies: compute_efficiency
// for every kernel, as before the fit.
Hardware unfitted(Hardware hw) {
  hw.matmul_efficiency = 0;
  hw.matmul_half_dim = 0;
  hw.attention_efficiency = 0;
  return hw;
}

PublishedRow predict_row(const PublishedCase& c, const EfficiencyFit* fit,
                         bool without_fit = false) {
  PublishedRow row;
  row.run = c.run;
  if (!c.unavailable.empty()) {
    row.prediction.why = c.unavailable;
    return row;
  }
  row.params = static_cast<double>(model_param_count(c.graph));
  row.published_seconds = published_step_seconds(c.run, row.params);
  const Hardware builtin = published_hardware(c.run);
  const Hardware hw = fit != nullptr ? with_fit(builtin, *fit)
                      : without_fit  ? unfitted(builtin)
                                     : builtin;
  try {
    row.prediction = predict_published(c.run, c.graph, hw);
  } catch (const Error& e) {
    row.prediction.fits = false;
    row.prediction.why = e.what();
  }
  if (row.prediction.fits) {
    row.predicted = in_metric(c.run, row.prediction.step_seconds, row.params);
    row.ratio = row.prediction.step_seconds / row.published_seconds;
  }
  return row;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

PublishedTable summarize(std::vector<PublishedRow> rows) {
  PublishedTable t;
  std::vector<double> held, fitted;
  for (const PublishedRow& r : rows) {
    // A row memwall finds no plan for counts as an error of 100%.
    const double error = r.ratio > 0 ? std::abs(r.ratio - 1) : 1;
    if (r.run.fitted) {
      fitted.push_back(error);
      continue;
    }
    if (!r.run.unmatched.empty()) {
      ++t.unmatched;
      continue;
    }
    ++t.held_out;
    if (r.ratio >= kLowRatio && r.ratio <= kHighRatio) ++t.held_out_within;
    held.push_back(error);
  }
  t.held_out_median_error = median(held);
  t.fitted_median_error = median(fitted);
  t.rows = std::move(rows);
  return t;
}

// Sum of squared log ratios of the fitted rows under `fit`; a row without
// a plan weighs as a factor of 4.
double fit_cost(const std::vector<const PublishedCase*>& fitted, const EfficiencyFit& fit) {
  double cost = 0;
  for (const PublishedCase* c : fitted) {
    const PublishedRow r = predict_row(*c, &fit);
    const double l = r.ratio > 0 ? std::log(r.ratio) : std::log(4.0);
    cost += l * l;
  }
  return cost;
}

// Each family's r_inf for the shared constants in `fit` (the fixed point
// of the Note).
void fit_families(const std::vector<const PublishedCase*>& fitted, EfficiencyFit& fit) {
  std::map<std::string, std::vector<const PublishedCase*>> by_family;
  for (const PublishedCase* c : fitted) by_family[gpu_family(c->run.gpu)].push_back(c);
  for (auto& [family, cases] : by_family) {
    double& r = fit.matmul_efficiency[family];
    if (!(r > 0)) r = find_gpu(cases.front()->run.gpu).compute_efficiency;
    for (int round = 0; round < kRounds; ++round) {
      double sum = 0;
      int n = 0;
      for (const PublishedCase* c : cases) {
        const PublishedRow row = predict_row(*c, &fit);
        if (row.ratio > 0) {
          sum += std::log(row.ratio);
          ++n;
        }
      }
      if (n == 0) break;
      const double step = std::exp(sum / n);
      r = std::clamp(r * step, 0.05, 1.0);
      if (std::abs(step - 1) < kTolerance) break;
    }
  }
}

}  // namespace

std::string gpu_family(const std::string& gpu) { return gpu.substr(0, gpu.find('-')); }

Hardware with_fit(const Hardware& hw, const EfficiencyFit& fit) {
  const auto it = fit.matmul_efficiency.find(gpu_family(hw.name));
  if (it == fit.matmul_efficiency.end()) return hw;
  Hardware out = hw;
  out.matmul_efficiency = it->second;
  out.matmul_half_dim = fit.matmul_half_dim;
  out.attention_efficiency = std::min(kMaxAttentionEfficiency, it->second * fit.attention_ratio);
  return out;
}

PublishedTable evaluate_published(const std::vector<PublishedCase>& cases, bool unfitted) {
  std::vector<PublishedRow> rows;
  for (const PublishedCase& c : cases) rows.push_back(predict_row(c, nullptr, unfitted));
  return summarize(std::move(rows));
}

PublishedTable fit_published(const std::vector<PublishedCase>& cases) {
  std::vector<const PublishedCase*> fitted;
  for (const PublishedCase& c : cases) {
    if (c.run.fitted) fitted.push_back(&c);
  }
  if (fitted.empty()) fail("--fit: none of the rows is marked fitted");
  EfficiencyFit best;
  double best_cost = std::numeric_limits<double>::infinity();
  for (const double half_dim : kHalfDims) {
    for (const double ratio : kAttentionRatios) {
      EfficiencyFit fit;
      fit.matmul_half_dim = half_dim;
      fit.attention_ratio = ratio;
      fit_families(fitted, fit);
      const double cost = fit_cost(fitted, fit);
      if (cost < best_cost) {
        best_cost = cost;
        best = fit;
      }
    }
  }
  std::vector<PublishedRow> rows;
  for (const PublishedCase& c : cases) rows.push_back(predict_row(c, &best));
  PublishedTable t = summarize(std::move(rows));
  t.fitted = true;
  t.fit = best;
  t.fit_text = fmt::format("fit on {} rows: matmul half dimension {:g}, attention / matmul {:g}",
                           fitted.size(), best.matmul_half_dim, best.attention_ratio);
  for (const auto& [family, e] : best.matmul_efficiency) {
    t.fit_text += fmt::format("; {} matmul efficiency {:.3f}", family, e);
  }
  t.fit_text += fmt::format(" (sum of squared log ratios {:.4f})\n", best_cost);
  return t;
}

nlohmann::json published_table_json(const PublishedTable& table) {
  nlohmann::json rows = nlohmann::json::array();
  for (const PublishedRow& r : table.rows) {
    nlohmann::json row = {
        {"id", r.run.id},
        {"source", r.run.source},
        {"setting", r.run.setting},
        {"gpu", r.run.gpu},
        {"gpus", published_gpus(r.run)},
        {"technique", r.run.technique},
        {"checkpointing", r.run.checkpointing.empty() ? "own" : r.run.checkpointing},
        {"published",
         {{"value", r.run.value},
          {"as_published", r.run.value_text},
          {"step_seconds", r.published_seconds}}},
        {"predicted", nullptr},
        {"ratio", nullptr},
        {"fitted", r.run.fitted},
        {"unmatched",
         r.run.unmatched.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.run.unmatched)},
        {"params", r.params},
    };
    if (!r.deepspeed.is_null()) row["deepspeed"] = r.deepspeed;
    if (r.prediction.fits) {
      row["memwall_states"] = {{"gpu_bytes", r.prediction.state_device_bytes},
                               {"cpu_bytes", r.prediction.state_host_bytes}};
      row["predicted"] = {{"value", r.predicted},
                          {"step_seconds", r.prediction.step_seconds},
                          {"iteration_seconds", r.prediction.iteration_seconds},
                          {"device_peak_bytes", r.prediction.device_peak},
                          {"plan", r.prediction.plan}};
      if (!r.prediction.over_memory.empty()) row["over_memory"] = r.prediction.over_memory;
      row["ratio"] = r.ratio;
    } else {
      row["why"] = r.prediction.why;
    }
    rows.push_back(std::move(row));
  }
  nlohmann::json out = {{"rows", rows},
                        {"held_out", table.held_out},
                        {"held_out_within", table.held_out_within},
                        {"unmatched", table.unmatched},
                        {"held_out_median_error", table.held_out_median_error},
                        {"fitted_median_error", table.fitted_median_error},
                        {"ratio", "predicted step seconds / published step seconds"}};
  if (table.fitted) {
    nlohmann::json families = nlohmann::json::object();
    for (const auto& [family, e] : table.fit.matmul_efficiency) families[family] = e;
    out["fit"] = {{"matmul_efficiency", families},
                  {"matmul_half_dim", table.fit.matmul_half_dim},
                  {"attention_ratio", table.fit.attention_ratio}};
  }
  return out;
}

}  // namespace memwall
