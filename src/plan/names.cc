// Names of tiers and step kinds as they appear in memwall.plan/1.
#include <array>

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

std::string_view to_string(Tier tier) { return kTierNames.at(static_cast<size_t>(tier)); }
std::string_view to_string(StepKind kind) { return kStepNames.at(static_cast<size_t>(kind)); }
std::optional<Tier> parse_tier(std::string_view name) { return find_name<Tier>(kTierNames, name); }
std::optional<StepKind> parse_step_kind(std::string_view name) {
  return find_name<StepKind>(kStepNames, name);
}

}  // namespace memwall
