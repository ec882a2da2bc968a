// memory_svg (memory_svg.h): a fixed-size plot, written as text.
//
// Layout: title on top, the plot area framed in the middle with tick labels
// left and below, axis titles outside them. Every coordinate goes through
// Frame, which clamps to the plot area, so no input (NaN, negative times,
// zero ranges) can put a non-number into the document.
#include "memwall/report/memory_svg.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "append.h"
#include "axis.h"
#include "xml_text.h"

namespace memwall {
namespace {

using report::append;
using report::Axis;

constexpr int kWidth = 960;
constexpr int kHeight = 480;
constexpr double kLeft = 88;
constexpr double kRight = 24;
constexpr double kTop = 48;
constexpr double kBottom = 56;
constexpr double kPlotWidth = kWidth - kLeft - kRight;
constexpr double kPlotHeight = kHeight - kTop - kBottom;
// Two columns per pixel; a step line takes two points per column, so it
// stays under 4000 points however long the curve.
constexpr size_t kColumns = 2 * static_cast<size_t>(kPlotWidth);
static_assert(2 * kColumns + 1 <= 4000);

constexpr std::string_view kCurveColor = "#1f77b4";
constexpr std::string_view kBudgetColor = "#d62728";

// Where `value` sits on [0, top], clamped to [0, 1]; NaN maps to 0.
double fraction(double value, double top) {
  const double f = value / top;
  return f > 0 ? std::min(f, 1.0) : 0.0;
}

struct Frame {
  Axis x;  // seconds
  Axis y;  // bytes

  double px(double seconds) const {
    return kLeft + kPlotWidth * fraction(x.display(seconds), x.top());
  }
  double py(double bytes) const {
    return kTop + kPlotHeight * (1 - fraction(y.display(bytes), y.top()));
  }
  double end_seconds() const { return x.top() / x.scale; }
};

void append_grid(std::string& out, const Frame& frame) {
  out += "<g stroke=\"#e6e6e6\" stroke-width=\"1\">\n";
  for (int i = 0; i <= frame.x.ticks; ++i) {
    const double x = kLeft + kPlotWidth * i / frame.x.ticks;
    append(out, "<line x1=\"{:.2f}\" y1=\"{}\" x2=\"{:.2f}\" y2=\"{}\"/>\n", x, kTop, x,
           kTop + kPlotHeight);
  }
  for (int i = 0; i <= frame.y.ticks; ++i) {
    const double y = kTop + kPlotHeight * (1 - static_cast<double>(i) / frame.y.ticks);
    append(out, "<line x1=\"{}\" y1=\"{:.2f}\" x2=\"{}\" y2=\"{:.2f}\"/>\n", kLeft, y,
           kLeft + kPlotWidth, y);
  }
  out += "</g>\n<g fill=\"#333\">\n";
  for (int i = 0; i <= frame.x.ticks; ++i) {
    const double x = kLeft + kPlotWidth * i / frame.x.ticks;
    append(out, "<text x=\"{:.2f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", x,
           kTop + kPlotHeight + 18, frame.x.tick_label(i));
  }
  for (int i = 0; i <= frame.y.ticks; ++i) {
    const double y = kTop + kPlotHeight * (1 - static_cast<double>(i) / frame.y.ticks);
    append(out, "<text x=\"{}\" y=\"{:.2f}\" text-anchor=\"end\">{}</text>\n", kLeft - 8, y + 4,
           frame.y.tick_label(i));
  }
  out += "</g>\n";
}

void append_axes(std::string& out, const Frame& frame) {
  append(out,
         "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#333\"/>\n",
         kLeft, kTop, kPlotWidth, kPlotHeight);
  append(out, "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">time ({})</text>\n",
         kLeft + kPlotWidth / 2, kHeight - 12, frame.x.unit);
  const double y = kTop + kPlotHeight / 2;
  append(out,
         "<text x=\"22\" y=\"{}\" text-anchor=\"middle\" transform=\"rotate(-90 22 {})\">"
         "device memory ({})</text>\n",
         y, y, frame.y.unit);
}

void append_budget(std::string& out, const Frame& frame, uint64_t budget) {
  const double y = frame.py(static_cast<double>(budget));
  append(out,
         "<line x1=\"{}\" y1=\"{:.2f}\" x2=\"{}\" y2=\"{:.2f}\" stroke=\"{}\" stroke-width=\"1.5\" "
         "stroke-dasharray=\"6 4\"/>\n",
         kLeft, y, kLeft + kPlotWidth, y, kBudgetColor);
  append(out, "<text x=\"{}\" y=\"{:.2f}\" text-anchor=\"end\" fill=\"{}\">budget {}</text>\n",
         kLeft + kPlotWidth - 4, y - 5, kBudgetColor, report::format_bytes(budget));
}

// The step line: each point holds its value until the next one, the last
// until `end`.
void append_curve(std::string& out, const Frame& frame, const std::vector<MemoryPoint>& points,
                  double end) {
  append(out, "<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\" points=\"", kCurveColor);
  for (size_t i = 0; i < points.size(); ++i) {
    const double x = frame.px(points[i].time);
    if (i > 0) append(out, "{:.2f},{:.2f} ", x, frame.py(static_cast<double>(points[i - 1].bytes)));
    append(out, "{:.2f},{:.2f} ", x, frame.py(static_cast<double>(points[i].bytes)));
  }
  append(out, "{:.2f},{:.2f}\"/>\n", frame.px(end),
         frame.py(static_cast<double>(points.back().bytes)));
}

void append_peak(std::string& out, const Frame& frame, const MemoryPoint& peak) {
  const double x = frame.px(peak.time);
  const double y = frame.py(static_cast<double>(peak.bytes));
  append(out, "<circle cx=\"{:.2f}\" cy=\"{:.2f}\" r=\"3.5\" fill=\"{}\"/>\n", x, y, kCurveColor);
  // Label towards the middle of the plot so it stays inside.
  const bool left_half = x < kLeft + kPlotWidth * 0.6;
  std::string label = "peak " + report::format_bytes(peak.bytes);
  if (std::isfinite(peak.time)) {
    label += fmt::format(" at {:.1f} {}", frame.x.display(peak.time), frame.x.unit);
  }
  append(out, "<text x=\"{:.2f}\" y=\"{:.2f}\" text-anchor=\"{}\">{}</text>\n",
         left_half ? x + 6 : x - 6, y - 8, left_half ? "start" : "end", label);
}

// The first point with the largest value.
MemoryPoint curve_peak(const std::vector<MemoryPoint>& curve) {
  MemoryPoint peak = curve.front();
  for (const MemoryPoint& point : curve) {
    if (point.bytes > peak.bytes) peak = point;
  }
  return peak;
}

}  // namespace

std::string memory_svg(const SimResult& result, std::string_view title) {
  const std::vector<MemoryPoint>& curve = result.curves[static_cast<size_t>(Tier::kDevice)];
  // std::max keeps the first argument when the second is NaN.
  double end = std::max(0.0, result.iteration_time);
  if (!curve.empty()) end = std::max(end, curve.back().time);
  const MemoryPoint peak = curve.empty() ? MemoryPoint{} : curve_peak(curve);
  // Headroom above the highest line leaves room for the peak label.
  const double highest = static_cast<double>(std::max(peak.bytes, result.budget));
  const Frame frame{report::time_axis(end), report::bytes_axis(highest * 1.05)};

  std::string out;
  out.reserve(32 * 1024 + 32 * std::min(curve.size(), 2 * kColumns));
  out += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  append(out,
         "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"{0}\" height=\"{1}\" "
         "viewBox=\"0 0 {0} {1}\" font-family=\"sans-serif\" font-size=\"12\">\n",
         kWidth, kHeight);
  out += "<title>";
  report::append_xml_text(out, title);
  append(out, "</title>\n<rect width=\"{}\" height=\"{}\" fill=\"white\"/>\n", kWidth, kHeight);
  append(out, "<text x=\"{}\" y=\"28\" text-anchor=\"middle\" font-size=\"16\">", kWidth / 2);
  report::append_xml_text(out, title);
  out += "</text>\n";

  append_grid(out, frame);
  append_axes(out, frame);
  if (result.budget > 0) append_budget(out, frame, result.budget);
  if (curve.empty()) {
    append(out,
           "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#888\">no device memory "
           "data</text>\n",
           kLeft + kPlotWidth / 2, kTop + kPlotHeight / 2);
  } else {
    if (curve.size() <= kColumns) {
      append_curve(out, frame, curve, end);
    } else {
      append_curve(out, frame, max_envelope(curve, 0, frame.end_seconds(), kColumns), end);
    }
    append_peak(out, frame, peak);
  }
  out += "</svg>\n";
  return out;
}

}  // namespace memwall
