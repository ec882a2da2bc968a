// Validation, checking and lower bounds of the static memory layout problem
// (types.h). All of them are O(n log n) in the number of buffers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "memwall/layout/types.h"

namespace memwall {

// Throws Error with one line naming the first offending buffer by id: lower
// not below upper, a size of 0 or above 2^62 (kMaxBytes), an id used twice,
// an alignment that is not a power of two up to 2^62, a capacity above 2^62,
// or more buffers than a 32-bit index can name.
void validate_problem(const LayoutProblem& problem);

// std::nullopt when `layout` is a valid layout of `problem`: one offset per
// buffer, each a multiple of the alignment, `arena` equal to the largest
// offset + size, the arena within the capacity (when there is one), and no
// two buffers overlapping both in time and in address. Otherwise one line
// naming the first violation (for an overlap, both buffers by id with their
// lifetimes and address ranges). Meant for a validated problem; on any other
// it still never reads out of bounds.
std::optional<std::string> check_layout(const LayoutProblem& problem, const Layout& layout);

// The largest offset + size of `offsets` (0 for none). Throws Error when an
// end exceeds 2^62.
uint64_t arena_of(const LayoutProblem& problem, const std::vector<uint64_t>& offsets);

// Largest total size of the buffers live at one time: every layout's arena
// is at least this. Throws Error when that total exceeds 2^62.
uint64_t live_lower_bound(const LayoutProblem& problem);

// A lower bound at least as strong as live_lower_bound that also counts the
// padding alignment forces between buffers live at the same time (proof in
// bounds.cc, Note [Aligned bound]). Equal to it for alignment 1.
uint64_t arena_lower_bound(const LayoutProblem& problem);

}  // namespace memwall
