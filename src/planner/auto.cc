// The automatic planner (planner.h).
//
// Note [Automatic planning]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// The search is over model-state configurations (ZeRO stage when there are
// several ranks; optimizer on device, host or NVMe; parameters on device,
// host or NVMe, offloaded only with the optimizer) and, inside each, over
// activation planners: keep every activation, memwall's rematerialization
// planner, Capuchin's swap-or-recompute policy with swaps to the host while
// the host memory the model states leave allows, and to NVMe beyond.
// Each configuration's unconstrained time (all activations kept, no device
// limit) bounds every plan of it from below, so configurations are tried
// from the fastest bound up, and the search stops at the first whose bound
// is no better than the best plan found; inside a configuration, keeping
// every activation is tried first and ends it when it fits, and below the
// proven bound of its planning view (remat_lower_bound) only memwall's
// planner runs, to say why nothing fits. The single
// techniques of the side-by-side table are candidates too, so the result
// is never slower than the best of them. A configuration whose rewrite does
// not apply to the graph (a traced optimizer step that is not one run of
// ops per parameter, Note [Traced optimizer steps] in
// swap/optimizer_steps.cc) is skipped with its reason; one rank with every
// state on the device needs no rewrite, so a plan can still come from it.
// Last, a plan whose optimizer steps run on the CPU gets device chunks
// (Note [Device chunk search]).
#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "config_work.h"
#include "memwall/base/deadline.h"
#include "memwall/base/error.h"
#include "memwall/base/stopwatch.h"
#include "memwall/remat/remat.h"

namespace memwall {
namespace {

using planner_detail::Activations;
using planner_detail::build;
using planner_detail::Built;
using planner_detail::ConfigWork;
using planner_detail::DeviceChunkSearch;
using planner_detail::failure_of;
using planner_detail::fit;
using planner_detail::with_most_on_host;
using planner_detail::Work;

void check(const PlannerOptions& options) {
  if (options.ranks < 1) fail("--ranks must be at least 1 (got {})", options.ranks);
  if (options.zero_stage && (*options.zero_stage < 0 || *options.zero_stage > 3)) {
    fail("ZeRO stage {} does not exist (0, 1, 2 or 3)", *options.zero_stage);
  }
  if (!(options.time_limit > 0)) fail("the time limit must be positive");
  if (!options.checkpointing.empty() && find_remat_planner(options.checkpointing) == nullptr) {
    std::string known;
    for (const RematPlanner& p : remat_planners())
      known += (known.empty() ? "" : ", ") + std::string(p.name);
    fail("unknown checkpointing '{}' (known: {})", options.checkpointing, known);
  }
}

std::vector<int> stages(const PlannerOptions& options) {
  if (options.zero_stage) return {*options.zero_stage};
  if (options.ranks == 1) return {0};
  return {0, 1, 2, 3};
}

constexpr std::pair<Tier, Tier> kPlacements[] = {
    {Tier::kDevice, Tier::kDevice}, {Tier::kHost, Tier::kDevice}, {Tier::kNvme, Tier::kDevice},
    {Tier::kHost, Tier::kHost},     {Tier::kNvme, Tier::kHost},   {Tier::kNvme, Tier::kNvme},
};

constexpr Activations kActivationPlanners[] = {Activations::kKeepAll, Activations::kRemat,
                                               Activations::kCapuchinSpill,
                                               Activations::kCapuchinNvme};

}  // namespace

namespace {

struct Single {
  std::string_view technique;
  StateConfig config;
  Activations activations;
};

// Note [Checkpointing under a technique]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The published systems that move model states all ran with activation
// checkpointing: ZeRO-Offload's and ZeRO-Infinity's evaluations (Ren et al.
// 2021, Rajbhandari et al. 2021), DeepSpeed's tutorials and FSDP's
// benchmarks. As single techniques they keep every activation, which is
// what ZeRO does without it; PlannerOptions::checkpointing runs the
// techniques that manage model states with a rematerialization planner
// instead (per-layer: Megatron's and Hugging Face's full checkpointing,
// selective: Korthikanti et al.'s), so that a published setting can be
// planned as it ran. The activation techniques (remat, vdnn, capuchin)
// plan activations themselves and take none.
bool manages_states(std::string_view technique) {
  return technique != "remat" && technique != "vdnn" && technique != "capuchin";
}

// The single techniques for these options. With several ranks, offloading
// rides on ZeRO as DeepSpeed ships it (ZeRO-Offload on stage 2,
// ZeRO-Infinity on stage 3); the activation techniques keep plain data
// parallelism. `with_zero`: also "zero", the states on the device (Note
// [Checkpointing under a technique]).
std::vector<Single> singles_for(const PlannerOptions& options, bool with_zero = false) {
  const bool many = options.ranks > 1;
  const int plain = options.zero_stage.value_or(0);
  const int offload_stage = options.zero_stage.value_or(many ? 2 : 0);
  const int infinity_stage = options.zero_stage.value_or(many ? 3 : 0);
  const Tier spill = options.no_nvme ? Tier::kHost : Tier::kNvme;
  std::vector<Single> singles = {
      {"remat", {plain, Tier::kDevice, Tier::kDevice}, Activations::kRemat},
      {"vdnn", {plain, Tier::kDevice, Tier::kDevice}, Activations::kVdnn},
      {"capuchin", {plain, Tier::kDevice, Tier::kDevice}, Activations::kCapuchinHost},
      // The published systems step the CPU after backward (Note [Steps
      // after backward] in swap/offload.cc).
      // DeepSpeed's, with its host buffers (Note [Host buffers of the
      // published systems] in swap/deepspeed_buffers.cc); ZeRO-Infinity
      // offloads to the CPU where there is no NVMe (its CPU-only limit).
      {"zero-offload",
       {.stage = offload_stage,
        .optimizer = Tier::kHost,
        .steps_after_backward = true,
        .as_deepspeed = true},
       Activations::kKeepAll},
      {"zero-infinity",
       {.stage = infinity_stage,
        .optimizer = spill,
        .params = spill,
        .steps_after_backward = true,
        .as_deepspeed = true},
       Activations::kKeepAll},
      {"patrickstar",
       {.stage = infinity_stage, .optimizer = spill, .steps_after_backward = true},
       Activations::kRemat},
      // bitsandbytes' paged optimizer with activation checkpointing, as
      // QLoRA trains (Dettmers et al. 2023).
      {"paged", {.stage = plain, .optimizer = Tier::kHost, .paged = true}, Activations::kRemat},
  };
  if (with_zero) {
    singles.push_back(
        {"zero", {infinity_stage, Tier::kDevice, Tier::kDevice}, Activations::kKeepAll});
  }
  if (!options.checkpointing.empty()) {
    for (Single& s : singles) {
      if (manages_states(s.technique)) s.activations = Activations::kCheckpoint;
    }
  }
  return singles;
}

// PatrickStar-style placement (Fang et al. 2022, chunks in order of use):
// the parameters stay on the device, the optimizer states fill the device
// chunk by chunk in step order, then the host, and spill to NVMe, read when
// their step comes (no read-ahead); activations are checkpointed, as
// PatrickStar trains. The device's room is what the plan without device
// chunks leaves below the budget (PatrickStar measures the activations'
// peak in a warm-up iteration and gives chunks the margin); a plan that
// does not fit with them falls back to none.
Candidate fit_patrickstar(const Graph& graph, const Hardware& hw, const PlannerOptions& options,
                          const Single& single, const Built& all_nvme, uint64_t budget) {
  const Deadline deadline = Deadline::in(options.time_limit);
  // A configuration's fit in the time left, or none when it does not build.
  const auto fit_work = [&](const ConfigWork& work) {
    PlannerOptions left = options;
    left.time_limit = std::max(deadline.left(), 1e-9);
    return fit(work, single.activations, hw, budget, left);
  };
  const auto fit_config = [&](const StateConfig& config) -> std::optional<Candidate> {
    Built b = build(graph, config, options.ranks);
    if (!b.work) return std::nullopt;
    return fit_work(*b.work);
  };
  std::optional<Work> split =
      with_most_on_host(graph, *all_nvme.work, hw, options, 1, /*in_order=*/true, deadline);
  const ConfigWork& base = split ? split->work : *all_nvme.work;
  Candidate c = fit_work(base);
  // The host share comes from the keep-all run; an activation plan's
  // different pace can queue more on the host (gradients waiting for their
  // CPU step): a few points less each try.
  // A try that misses by more than the one before ends the retries, and
  // the closer one stays (Note [What ran out] in no_plan.cc).
  StateConfig config = base.config;
  for (int retry = 0; retry < 3 && split && !c.fits && !deadline.passed() &&
                      c.short_of.memory == Tier::kHost && c.short_of.limit > 0;
       ++retry) {
    StateConfig lower = config;
    lower.optimizer_host_share -= 0.05;
    if (lower.optimizer_host_share < 0.02) break;
    std::optional<Candidate> refit = fit_config(lower);
    if (!refit || (!refit->fits && refit->short_of.ratio() > c.short_of.ratio())) break;
    config = lower;
    c = std::move(*refit);
  }
  const uint64_t states = base.offload ? optimizer_state_bytes(*base.offload) : 0;
  const uint64_t peak = c.sim.peak_bytes[static_cast<size_t>(Tier::kDevice)];
  if (!c.fits || states == 0 || peak >= budget || deadline.passed()) return c;
  // The margin, less 2% for what the chunks' own steps hold.
  const double share =
      std::min(1.0, 0.98 * static_cast<double>(budget - peak) / static_cast<double>(states));
  if (share < 0.01) return c;
  StateConfig on_device = config;  // the same host share, the device's on top
  on_device.optimizer_device_share = share;
  on_device.optimizer_host_share = std::min(on_device.optimizer_host_share, 1 - share);
  on_device.chunks_in_order = true;
  // A margin that holds every chunk offloads nothing.
  if (share >= 1) on_device = {config.stage, Tier::kDevice, Tier::kDevice};
  std::optional<Candidate> filled = fit_config(on_device);
  return filled && filled->fits ? std::move(*filled) : c;
}

Candidate run_single(const Graph& graph, const Hardware& hw, const PlannerOptions& options,
                     const Single& single, const Built* same_config) {
  const uint64_t budget = options.budget > 0 ? options.budget : default_budget(hw);
  const Built own = same_config ? Built{} : build(graph, single.config, options.ranks);
  const Built& built = same_config ? *same_config : own;
  Candidate c;
  if (built.work && single.technique == "patrickstar") {
    c = fit_patrickstar(graph, hw, options, single, built, budget);
  } else if (built.work) {
    c = fit(*built.work, single.activations, hw, budget, options);
  } else {
    c.activations = std::string(planner_detail::to_string(single.activations));
    c.states = single.config;
    c.why = fmt::format("{} does not apply: {}", single.config.name(), built.why);
  }
  c.technique = std::string(single.technique);
  return c;
}

// A technique the time limit left no time for (Note [Time limits are wall time]).
Candidate not_tried(const Single& single, const PlannerOptions& options) {
  Candidate c;
  c.technique = std::string(single.technique);
  c.activations = std::string(to_string(single.activations));
  c.states = single.config;
  c.why = fmt::format("not tried: the {} s time limit ran out", options.time_limit);
  return c;
}

}  // namespace

std::vector<std::string_view> single_technique_names() {
  std::vector<std::string_view> names;
  for (const Single& s : singles_for({}, /*with_zero=*/true)) names.push_back(s.technique);
  return names;
}

Candidate plan_single_technique(const Graph& graph, const Hardware& hardware,
                                const PlannerOptions& options, std::string_view technique) {
  check(options);
  const Hardware hw = planner_detail::with_host(hardware, options);
  if (!options.checkpointing.empty() && !manages_states(technique)) {
    fail(
        "checkpointing {} applies to the techniques that move model states (zero, zero-offload, "
        "zero-infinity, patrickstar, paged), not to {}, which plans activations itself",
        options.checkpointing, technique);
  }
  for (const Single& s : singles_for(options, /*with_zero=*/true)) {
    if (s.technique == technique) return run_single(graph, hw, options, s, nullptr);
  }
  fail(
      "unknown technique '{}' (known: remat, vdnn, capuchin, zero-offload, zero-infinity, "
      "patrickstar, paged, zero)",
      technique);
}

std::vector<Candidate> single_techniques(const Graph& graph, const Hardware& hardware,
                                         const PlannerOptions& options) {
  check(options);
  const Deadline deadline = Deadline::in(options.time_limit);
  const Hardware hw = planner_detail::with_host(hardware, options);
  const std::vector<Single> singles = singles_for(options);
  // The activation techniques share one configuration: build it once.
  const Built on_device = build(graph, singles[0].config, options.ranks);
  std::vector<Candidate> out;
  for (const Single& s : singles) {
    if (deadline.passed()) {
      out.push_back(not_tried(s, options));
      continue;
    }
    PlannerOptions left = options;
    left.time_limit = deadline.left();
    const bool same = s.config.stage == singles[0].config.stage &&
                      s.config.optimizer == Tier::kDevice && s.config.params == Tier::kDevice;
    out.push_back(run_single(graph, hw, left, s, same ? &on_device : nullptr));
  }
  return out;
}

namespace {

// Note [Automatic planning], step by step: plan_auto runs each step once,
// in the order they are declared.
class AutoSearch {
 public:
  AutoSearch(const Graph& graph, const Hardware& hardware, const PlannerOptions& options)
      : graph_(graph), options_(options), deadline_(start(options)) {
    result_.hardware = planner_detail::with_host(hardware, options);
    result_.budget = options.budget > 0 ? options.budget : default_budget(hw());
    opts_ = options;
    opts_.budget = result_.budget;
  }

  // The lower bound and the single techniques, the fastest of which is the
  // plan to beat.
  void plan_singles();
  // Every model-state configuration whose rewrite applies, with its
  // unconstrained time; the others are skipped with their reason.
  void build_configs();
  // Note [Chunked optimizer states].
  void add_chunked_configs();
  // The configurations from the fastest bound up, each with its activation
  // planners, until a bound is no better than the best plan.
  void search_configs();
  // Note [Device chunk search].
  void search_device_chunks();
  // The best plan found, or an Error saying why none fits.
  AutoPlan finish();

 private:
  // Checks the options and starts the clock. Note [Time limits are wall
  // time]: the limit is the whole search's; each planner gets what is left,
  // and configurations not reached are skipped.
  static Deadline start(const PlannerOptions& options) {
    check(options);
    return work_deadline(options.time_limit);
  }
  const Hardware& hw() const { return result_.hardware; }
  // Options for a planner: the time left.
  PlannerOptions left() const {
    PlannerOptions left = opts_;
    left.time_limit = deadline_.left();
    return left;
  }

  const Graph& graph_;
  const PlannerOptions& options_;
  const Stopwatch clock_;
  const Deadline deadline_;
  AutoPlan result_;
  PlannerOptions opts_;              // with the budget
  const Candidate* best_ = nullptr;  // the fastest single technique that fits
  Candidate found_;                  // the best from the configuration search, if better
  double best_time_ = std::numeric_limits<double>::infinity();
  std::vector<Work> works_;
  std::vector<planner_detail::Failure> failures_;
  bool out_of_time_ = false;
};

void AutoSearch::plan_singles() {
  result_.bound = iteration_lower_bound(graph_, hw(), opts_);
  {
    PlannerOptions left = opts_;
    left.time_limit = std::max(deadline_.left(), 1e-9);  // past it: every single is "not tried"
    result_.singles = single_techniques(graph_, hw(), left);
  }
  for (const Candidate& c : result_.singles) {
    // Of times equal within rounding the first, simpler technique stays
    // (PatrickStar's device-filling chunks can tie with everything kept).
    if (c.fits && (!best_ || c.sim.iteration_time < best_->sim.iteration_time * (1 - 1e-6))) {
      best_ = &c;
    }
  }
  if (best_) best_time_ = best_->sim.iteration_time;
}

void AutoSearch::build_configs() {
  for (const int stage : stages(options_)) {
    // The placements, and the paged optimizer's states on the host stepped
    // on the device (Note [Paged optimizer] in swap/offload.cc).
    std::vector<StateConfig> configs;
    for (const auto& [optimizer, params] : kPlacements) {
      if (options_.no_nvme && (optimizer == Tier::kNvme || params == Tier::kNvme)) continue;
      configs.push_back({stage, optimizer, params});
    }
    configs.push_back({.stage = stage, .optimizer = Tier::kHost, .paged = true});
    for (const StateConfig& config : configs) {
      // Each costs a simulation: 28 of them with ZeRO stages to search.
      if (deadline_.passed() && !works_.empty()) {
        out_of_time_ = true;
        break;
      }
      Built b = build(graph_, config, options_.ranks);
      if (!b.work) {
        result_.skipped.push_back({config, std::move(b.why)});
        continue;
      }
      planner_detail::Unconstrained u = planner_detail::unconstrained_time(*b.work, hw(), opts_);
      works_.push_back({std::move(*b.work), std::move(u)});
    }
  }
}

// Note [Chunked optimizer states]: each configuration with the optimizer
// on NVMe also gets split ones, which keep as much of the optimizer
// states on the host as the host memory holds (Note [Optimizer chunks] in
// swap/offload.h) and read the NVMe chunks a few CPU steps ahead: less
// NVMe traffic, the rest streamed under the CPU steps. The largest host
// share whose keep-all simulation fits is found by bisection (the host
// also stages the chunks read ahead and queues gradients, so the free
// memory of the all-NVMe run is only where it starts). The all-NVMe
// configuration stays a candidate.
void AutoSearch::add_chunked_configs() {
  const size_t whole = works_.size();
  // A split is worth its simulations only where the host cannot hold every
  // optimizer state: when the same configuration with the optimizer on the
  // host fits, it is at least as fast as any split of it.
  const auto host_holds_all = [&](const StateConfig& c) {
    for (size_t j = 0; j < whole; ++j) {
      const StateConfig& o = works_[j].work.config;
      if (o.stage == c.stage && o.optimizer == Tier::kHost && o.params == c.params &&
          std::isfinite(works_[j].bound.seconds)) {
        return true;
      }
    }
    return false;
  };
  for (size_t i = 0; i < whole && !deadline_.passed(); ++i) {
    if (works_[i].work.config.optimizer != Tier::kNvme || host_holds_all(works_[i].work.config)) {
      continue;
    }
    for (const int ahead : {4, 8, 16}) {
      std::optional<Work> split = with_most_on_host(graph_, works_[i].work, hw(), opts_, ahead,
                                                    /*in_order=*/false, deadline_);
      if (split) works_.push_back(std::move(*split));
    }
  }
}

void AutoSearch::search_configs() {
  std::stable_sort(works_.begin(), works_.end(),
                   [](const Work& a, const Work& b) { return a.bound.seconds < b.bound.seconds; });
  // Why each configuration failed: its activation planner that came
  // closest (Note [What ran out] in no_plan.cc), memwall's
  // rematerialization planner's on a tie (it names the lowest budget it
  // reaches, or the proven bound no plan goes below).
  for (const Candidate& c : result_.singles) {
    if (!c.fits && !c.why.starts_with("not tried")) failures_.push_back(failure_of(c));
  }
  for (size_t i = 0; i < works_.size(); ++i) {
    const Work& w = works_[i];
    if (w.bound.seconds >= best_time_) {
      failures_.push_back({w.work.config, "keep-all", w.bound.why, w.bound.short_of});
      continue;
    }
    if (deadline_.passed()) {
      out_of_time_ = true;
      continue;
    }
    ++result_.configs_tried;
    // Below the view's proven bound no activation planner fits (each runs
    // every op with its inputs, outputs and workspace beside the model
    // states the view keeps): memwall's planner says so at once, and
    // Capuchin, which took a second to fail on each such configuration of
    // Llama-2-70B on 8 ranks, is not run.
    const bool below_bound = remat_lower_bound(w.work.view).bytes > result_.budget;
    std::optional<planner_detail::Failure> closest;
    for (const Activations a : kActivationPlanners) {
      if (below_bound && a != Activations::kRemat) continue;
      const bool nvme = a == Activations::kCapuchinSpill || a == Activations::kCapuchinNvme;
      if (options_.no_nvme && nvme) continue;
      if (deadline_.passed()) {
        out_of_time_ = true;
        break;
      }
      Candidate c = fit(w.work, a, hw(), result_.budget, left());
      if (c.fits && c.sim.iteration_time < best_time_) {
        best_time_ = c.sim.iteration_time;
        found_ = std::move(c);
        if (a == Activations::kKeepAll) break;
      } else if (!c.fits) {
        const double ratio = c.short_of.ratio();
        if (!closest || ratio < closest->short_of.ratio() ||
            (ratio == closest->short_of.ratio() && a == Activations::kRemat)) {
          closest = failure_of(c);
        }
      } else if (a == Activations::kKeepAll) {
        break;  // fits but no faster: nothing in this configuration is
      }
    }
    if (closest) failures_.push_back(std::move(*closest));
  }
}

void AutoSearch::search_device_chunks() {
  const Candidate* so_far = found_.fits ? &found_ : best_;
  if (!so_far || so_far->states.optimizer == Tier::kDevice || deadline_.passed()) return;
  DeviceChunkSearch search{graph_, hw(), opts_, result_.budget, deadline_, best_time_, {}};
  search.run(so_far->states);
  result_.configs_tried += search.fitted;
  if (search.best) found_ = std::move(*search.best);
}

AutoPlan AutoSearch::finish() {
  if (found_.fits) {
    result_.best = std::move(found_);
  } else if (best_) {
    result_.best = *best_;
  } else if (works_.empty()) {
    fail("no plan for {} on {}: no model-state configuration applies ({})", graph_.name, hw().name,
         result_.skipped.front().why);
  } else if (out_of_time_) {
    planner_detail::fail_no_plan(
        fmt::format("no plan found within the {} s time limit for a device budget of {} bytes on "
                    "{} ({} of {} configurations tried; a longer time limit may find one)",
                    options_.time_limit, result_.budget, hw().name, result_.configs_tried,
                    stages(options_).size() * std::size(kPlacements)),
        {}, std::move(failures_));
  } else {
    planner_detail::fail_no_plan(
        fmt::format("no plan fits a device budget of {} bytes on {}", result_.budget, hw().name),
        result_.skipped, std::move(failures_));
  }
  result_.best.technique = "auto";
  result_.solve_seconds = clock_.seconds();
  return std::move(result_);
}

}  // namespace

AutoPlan plan_auto(const Graph& graph, const Hardware& hardware, const PlannerOptions& options) {
  AutoSearch search(graph, hardware, options);
  search.plan_singles();
  search.build_configs();
  search.add_chunked_configs();
  search.search_configs();
  search.search_device_chunks();
  return search.finish();
}

}  // namespace memwall
