// The readers of one buffer or op object of memwall.graph/1
// (json_objects.cc), for the reader of the whole document (json_io.cc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>

#include "memwall/base/json_cursor.h"
#include "memwall/base/json_fields.h"
#include "memwall/graph/types.h"

namespace memwall::graph_json {

// Ids and array indices: what an int32_t holds.
inline constexpr uint64_t kMaxId = std::numeric_limits<int32_t>::max();

// The general readers: element `index` of "buffers" or "ops", its fields in
// any order and spacing. Every problem of the object is reported at once,
// naming it, as one Error once it has been read.
void read_buffer(detail::JsonCursor& cur, size_t index, Buffer& buffer);
void read_op(detail::JsonCursor& cur, size_t index, Op& op);

// Note [Canonical fast path] (json_objects.cc): the same object in the
// writer's layout, read faster; false at the first thing the general
// reader must see, the object then part-filled and the cursor anywhere.
bool canonical_buffer(detail::JsonCursor& cur, size_t index, Buffer& buffer);
bool canonical_op(detail::JsonCursor& cur, size_t index, Op& op);

}  // namespace memwall::graph_json
