// Plan IR (format memwall.plan/1, DESIGN.md "Plan"): an explicit program of
// steps that the simulator judges and the runtime executes, in order.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "memwall/graph/types.h"

namespace memwall {

inline constexpr std::string_view kPlanFormat = "memwall.plan/1";

// Memory tiers, nearest first.
enum class Tier : uint8_t { kDevice, kHost, kNvme };
inline constexpr int kNumTiers = 3;

enum class StepKind : uint8_t { kCompute, kRecompute, kSwapOut, kSwapIn, kFree };
inline constexpr int kNumStepKinds = 5;

// One step. `op` for compute/recompute, `buf` for swap_out/swap_in/free
// (the other is -1). `to` is the destination of a swap_out (host or nvme)
// or of a swap_in (device, the default, or host: NVMe -> host); `on` is
// where a compute/recompute runs (device or host). Fields that do not
// belong to the step's kind are ignored (and not written).
struct Step {
  StepKind kind = StepKind::kCompute;
  OpId op = -1;
  BufferId buf = -1;
  Tier to = Tier::kHost;
  Tier on = Tier::kDevice;

  static Step compute(OpId op, Tier on = Tier::kDevice) {
    return {StepKind::kCompute, op, -1, Tier::kHost, on};
  }
  static Step recompute(OpId op, Tier on = Tier::kDevice) {
    return {StepKind::kRecompute, op, -1, Tier::kHost, on};
  }
  static Step swap_out(BufferId buf, Tier to = Tier::kHost) {
    return {StepKind::kSwapOut, -1, buf, to, Tier::kDevice};
  }
  static Step swap_in(BufferId buf, Tier to = Tier::kDevice) {
    return {StepKind::kSwapIn, -1, buf, to, Tier::kDevice};
  }
  static Step free(BufferId buf) { return {StepKind::kFree, -1, buf, Tier::kHost, Tier::kDevice}; }

  friend bool operator==(const Step&, const Step&) = default;
};

// Host memory a plan's runtime holds for the whole iteration beside its
// buffers: the pinned buffers and CPU-side gradients of the systems the
// single techniques reproduce (Note [Host buffers of the published
// systems] in swap/deepspeed_buffers.cc). `what` names it in breakdowns.
struct HostReserve {
  std::string what;
  uint64_t bytes = 0;

  friend bool operator==(const HostReserve&, const HostReserve&) = default;
};

struct Plan {
  std::string graph;  // the graph's name
  // graph_fingerprint() of the graph the plan runs; empty in plans written
  // before fingerprints existed, which are matched by name alone.
  std::string graph_fingerprint;
  std::string hardware;  // the profile's name
  uint64_t budget = 0;   // device bytes
  // Starting tier of buffers that exist before the first op (absent:
  // device; an explicit "device" entry is allowed and kept).
  std::map<BufferId, Tier> placement;
  std::vector<Step> steps;
  // Device arena offsets; empty: the plan pins no addresses. `offsets` is
  // each buffer's first device stay, and every later one too unless
  // `stay_offsets` names them (Note [Offsets per stay]).
  std::map<BufferId, uint64_t> offsets;
  std::map<BufferId, std::vector<uint64_t>> stay_offsets;  // stays 1, 2, ... of a buffer
  // The offset of each op's workspace (Op::workspace) in that arena: one
  // for every device run of the op, or one per run, in plan order (Note
  // [Offsets per stay]). Only with `offsets`; empty: the plan does not
  // place workspace (kernels' scratch goes wherever it fits).
  std::map<OpId, std::vector<uint64_t>> workspace_offsets;
  // Held on the host from the start of the iteration to its end, per rank;
  // the simulator counts them in the host's peak, the executor allocates
  // them from its host pool.
  std::vector<HostReserve> host_reserved;

  friend bool operator==(const Plan&, const Plan&) = default;
};

// Note [Offsets per stay]
// ~~~~~~~~~~~~~~~~~~~~~~~
// A buffer that leaves the device (swapped out, freed to be recomputed)
// and comes back need not come back to the same address: its k-th device
// stay (k = 0, 1, ..., counting every allocation on the device in plan
// order, a recompute's, a swap_in's and an in-place version's included)
// sits at stay_offsets[b][k - 1] for k >= 1 when the plan names it, else
// at offsets[b]. In JSON a buffer's offset is a number (one address for
// every stay) or an array, one per stay ("offsets": {"7": [0, 4096]}).
// Persistent state that starts on the device ends its iteration at the
// offset it started at, where the next one starts (the simulator checks). Without per-stay
// addresses, a layout holds a dropped activation's range until it comes back, and remat and swap
// plans need far more than their budget (docs/exec.md). The offset of b's stay `stay` (0-based), or
// nullopt when the plan pins none for it.
std::optional<uint64_t> stay_offset(const Plan& plan, BufferId b, uint32_t stay);
// The offset of the workspace of op's device run `run` (0-based), or nullopt.
std::optional<uint64_t> workspace_offset(const Plan& plan, OpId op, uint32_t run);
// The arena a plan with offsets pins: the largest offset + size of any stay
// or workspace run (its span: Note [Workspace span]); 0 without offsets.
// For a validated plan of `graph` (every end is within the budget).
uint64_t pinned_arena(const Plan& plan, const Graph& graph);
// The bytes of plan.host_reserved together; throws Error on overflow.
uint64_t host_reserved_bytes(const Plan& plan);

std::string_view to_string(Tier tier);
std::string_view to_string(StepKind kind);
std::optional<Tier> parse_tier(std::string_view name);
std::optional<StepKind> parse_step_kind(std::string_view name);

// ---- JSON (memwall.plan/1) ----------------------------------------------------
// Strict, like the graph reader: unknown or duplicate fields, wrong types,
// negative or non-integer ids and sizes, unknown names are errors, reported
// as one line naming the step ("plan: step 12 (swap_out): ...").
// Required: format, graph, hardware, budget, steps; graph_fingerprint,
// placement, offsets and workspace_offsets (keyed by op id) are optional. Per step: "do", then "op"
// (compute, recompute; "on" optional, device or host) or "buf" (swap_out with "to", required: host
// or nvme; swap_in with "to" optional: device, the default, or host; free).
Plan plan_from_json_text(std::string_view text);
Plan read_plan_file(const std::string& path);
std::string plan_to_json_text(const Plan& plan);
nlohmann::json plan_to_json(const Plan& plan);
// Atomic (temporary file, then rename): never half-written.
void write_plan_file(const Plan& plan, const std::string& path);

// Checks the plan against its graph: ids in range, placement only for
// buffers that exist before the first op, offsets only for existing
// buffers and within the budget, workspace offsets only with offsets, for
// ops with a workspace and within the budget, swap_out only to host or nvme, swap_in
// only to the device or the host, compute only on the device or the host. Throws
// Error naming the step. What depends on execution (residency, budget,
// overlap) is the simulator's to judge.
void validate_plan(const Plan& plan, const Graph& graph);

// Checks that the plan was made for this graph: by fingerprint when the
// plan has one (Note [Graph fingerprint]), else by name. Throws Error
// saying which graph the plan is for.
void check_plan_graph(const Plan& plan, const Graph& graph);

// The plan as memwall.plan/1 text, stamped with the fingerprint of `graph`,
// the graph it runs (Note [Graph fingerprint]): what `memwall plan --out`
// and `memwall layout --out` write.
std::string plan_text_for(Plan plan, const Graph& graph);

}  // namespace memwall
