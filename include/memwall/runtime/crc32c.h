// CRC32C (Castagnoli, polynomial 0x1EDC6F41 reflected: 0x82F63B78), the
// checksum the NVMe engine stores with every block it writes and checks on
// every read. SSE4.2's crc32 instruction computes it 8 bytes per cycle-ish;
// machines without it use a table (chosen once, at first use).
#pragma once

#include <cstddef>
#include <cstdint>

namespace memwall::runtime {

// CRC32C of `size` bytes, continuing from `crc` (0 to start). Cost: about
// 0.1 ns per byte with SSE4.2, 1-2 ns per byte with the table.
uint32_t crc32c(const void* data, size_t size, uint32_t crc = 0);

// Which implementation crc32c() uses: "sse4.2" or "table".
const char* crc32c_implementation();

// The table implementation, always available (tests compare the two).
uint32_t crc32c_portable(const void* data, size_t size, uint32_t crc = 0);

}  // namespace memwall::runtime
