// Constructors of the policies behind make_allocator (internal to src/alloc).
#pragma once

#include <memory>

#include "memwall/alloc/allocator.h"

namespace memwall::alloc {

// In policy_names() order.
enum class BlockPolicy : uint8_t { caching, expandable, stitching };

// caching, expandable and stitching share one block engine (block_allocator.cc).
std::unique_ptr<Allocator> make_block_allocator(BlockPolicy policy, Device& device,
                                                const Options& options);
std::unique_ptr<Allocator> make_plan_allocator(Device& device, const Options& options);

}  // namespace memwall::alloc
