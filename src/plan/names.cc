// Names of tiers and step kinds as they appear in memwall.plan/1.
#include <algorithm>
#include <array>

#include "memwall/base/error.h"
#include "memwall/plan/plan.h"

namespace memwall {
namespace {

constexpr std::array<std::string_view, kNumTiers> kTierNames = {"device", "host", "nvme"};
constexpr std::array<std::string_view, 5> kStepNames = {"compute", "recompute", "swap_out",
                                                        "swap_in", "free"};

template <typename Enum, size_t N>
std::optional<Enum> find_name(const std::array<std::string_view, N>& names, std::string_view name) {
  for (size_t i = 0; i < N; ++i) {
    if (names[i] == name) return static_cast<Enum>(i);
  }
  return std::nullopt;
}

}  // namespace

// Note [Offsets per stay]
std::optional<uint64_t> stay_offset(const Plan& plan, BufferId b, uint32_t stay) {
  const auto first = plan.offsets.find(b);
  if (first == plan.offsets.end()) return std::nullopt;
  if (stay == 0) return first->second;
  const auto later = plan.stay_offsets.find(b);
  if (later == plan.stay_offsets.end()) return first->second;
  if (stay - 1 >= later->second.size()) return std::nullopt;
  return later->second[stay - 1];
}

std::optional<uint64_t> workspace_offset(const Plan& plan, OpId op, uint32_t run) {
  const auto it = plan.workspace_offsets.find(op);
  if (it == plan.workspace_offsets.end() || it->second.empty()) return std::nullopt;
  if (it->second.size() == 1) return it->second.front();
  if (run >= it->second.size()) return std::nullopt;
  return it->second[run];
}

uint64_t pinned_arena(const Plan& plan, const Graph& graph) {
  uint64_t arena = 0;
  const auto reach = [&](uint64_t offset, uint64_t bytes) {
    if (bytes > 0) arena = std::max(arena, offset + bytes);
  };
  for (const auto& [b, offset] : plan.offsets) reach(offset, graph.buffers[b].bytes);
  for (const auto& [b, later] : plan.stay_offsets) {
    for (const uint64_t offset : later) reach(offset, graph.buffers[b].bytes);
  }
  for (const auto& [op, runs] : plan.workspace_offsets) {
    for (const uint64_t offset : runs) reach(offset, contiguous_workspace(graph.ops[op]));
  }
  return arena;
}

std::string_view to_string(Tier tier) { return kTierNames.at(static_cast<size_t>(tier)); }
std::string_view to_string(StepKind kind) { return kStepNames.at(static_cast<size_t>(kind)); }
std::optional<Tier> parse_tier(std::string_view name) { return find_name<Tier>(kTierNames, name); }
std::optional<StepKind> parse_step_kind(std::string_view name) {
  return find_name<StepKind>(kStepNames, name);
}

uint64_t host_reserved_bytes(const Plan& plan) {
  uint64_t bytes = 0;
  for (const HostReserve& r : plan.host_reserved) bytes = checked_add(bytes, r.bytes, "host bytes");
  return bytes;
}

}  // namespace memwall
