// max_envelope (memory_svg.h): one pass over the curve and the columns.
#include <algorithm>

#include "memwall/report/memory_svg.h"

namespace memwall {

std::vector<MemoryPoint> max_envelope(const std::vector<MemoryPoint>& curve, double begin,
                                      double end, size_t columns) {
  std::vector<MemoryPoint> out;
  if (curve.empty() || columns == 0) return out;
  const double width = end > begin ? (end - begin) / static_cast<double>(columns) : 0.0;
  size_t i = 0;
  bool started = false;  // a value is in force (the curve has begun)
  uint64_t current = 0;  // the value in force at the current column's start
  for (; i < curve.size() && curve[i].time < begin; ++i) {
    current = curve[i].bytes;
    started = true;
  }
  for (size_t c = 0; c < columns; ++c) {
    // The last column takes every remaining point, so none is dropped, even
    // one past `end` or with a NaN time.
    const bool last = c + 1 == columns;
    const double column_end = begin + width * static_cast<double>(c + 1);
    double time = begin + width * static_cast<double>(c);
    uint64_t peak = current;
    bool any = started;
    for (; i < curve.size() && (last || curve[i].time < column_end); ++i) {
      if (!any) {
        time = curve[i].time;  // the curve starts inside this column
        peak = curve[i].bytes;
        any = true;
      }
      peak = std::max(peak, curve[i].bytes);
      current = curve[i].bytes;
    }
    started = any;
    if (!any || (!out.empty() && out.back().bytes == peak)) continue;
    out.push_back({time, peak});
  }
  return out;
}

}  // namespace memwall
