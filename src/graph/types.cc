// Names of the Graph IR enums as they appear in memwall.graph/1 JSON.
#include "memwall/graph/types.h"

#include <array>

namespace memwall {
namespace {

// Tables indexed by enum value; parse_* search them, so a name and its parse
// can never disagree.
constexpr std::array<std::string_view, kNumBufferKinds> kKindNames = {
    "param", "grad", "optim_state", "activation", "input", "workspace", "temp"};
constexpr std::array<std::string_view, 4> kPhaseNames = {"forward", "backward", "optimizer",
                                                         "comm"};
constexpr std::array<std::string_view, 9> kDTypeNames = {"fp32",  "fp16", "bf16",  "fp64", "int64",
                                                         "int32", "int8", "uint8", "bool"};
constexpr std::array<uint64_t, 9> kDTypeSizes = {4, 2, 2, 8, 8, 4, 1, 1, 1};

template <typename Enum, size_t N>
std::optional<Enum> find_name(const std::array<std::string_view, N>& names, std::string_view name) {
  for (size_t i = 0; i < N; ++i) {
    if (names[i] == name) return static_cast<Enum>(i);
  }
  return std::nullopt;
}

// Out-of-range enum values (a corrupted in-memory Graph) get a visible name
// instead of undefined behaviour.
template <size_t N>
std::string_view name_of(const std::array<std::string_view, N>& names, size_t index) {
  return index < N ? names[index] : std::string_view("invalid");
}

}  // namespace

std::string_view to_string(BufferKind kind) {
  return name_of(kKindNames, static_cast<size_t>(kind));
}
std::string_view to_string(Phase phase) { return name_of(kPhaseNames, static_cast<size_t>(phase)); }
std::string_view to_string(DType dtype) { return name_of(kDTypeNames, static_cast<size_t>(dtype)); }

std::optional<BufferKind> parse_buffer_kind(std::string_view name) {
  return find_name<BufferKind>(kKindNames, name);
}
std::optional<Phase> parse_phase(std::string_view name) {
  return find_name<Phase>(kPhaseNames, name);
}
std::optional<DType> parse_dtype(std::string_view name) {
  return find_name<DType>(kDTypeNames, name);
}

uint64_t dtype_size(DType dtype) {
  const auto index = static_cast<size_t>(dtype);
  return index < kDTypeSizes.size() ? kDTypeSizes[index] : 0;
}

}  // namespace memwall
