// memory_svg and max_envelope on hand-built curves. Every document is read
// back with the strict little reader in xml_lite.h.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <sstream>
#include <string>

#include "memwall/report/memory_svg.h"
#include "test_util.h"
#include "xml_lite.h"

namespace memwall {
namespace {

using testing::XmlElement;
using testing::XmlReader;

// 37.2 GiB, rounded down to whole bytes.
constexpr uint64_t kPeak = static_cast<uint64_t>(37.2 * static_cast<double>(kGiB));

SimResult result_with(std::vector<MemoryPoint> device, double iteration_time, uint64_t budget) {
  SimResult result;
  result.curves[static_cast<size_t>(Tier::kDevice)] = std::move(device);
  result.iteration_time = iteration_time;
  result.budget = budget;
  return result;
}

SimResult typical() {
  return result_with({{0.0, 10 * kGiB}, {0.1, 30 * kGiB}, {0.4125, kPeak}, {0.45, 20 * kGiB}}, 0.5,
                     40 * kGiB);
}

std::vector<const XmlElement*> all(const std::vector<XmlElement>& doc, std::string_view name) {
  std::vector<const XmlElement*> out;
  for (const XmlElement& e : doc) {
    if (e.name == name) out.push_back(&e);
  }
  return out;
}

std::vector<std::string> texts(const std::vector<XmlElement>& doc) {
  std::vector<std::string> out;
  for (const XmlElement* e : all(doc, "text")) out.push_back(e->text);
  return out;
}

bool has_text(const std::vector<XmlElement>& doc, std::string_view text) {
  const std::vector<std::string> all_texts = texts(doc);
  return std::find(all_texts.begin(), all_texts.end(), text) != all_texts.end();
}

std::vector<std::pair<double, double>> polyline_points(const std::vector<XmlElement>& doc) {
  const auto lines = all(doc, "polyline");
  EXPECT_EQ(lines.size(), 1u);
  std::vector<std::pair<double, double>> out;
  if (lines.empty()) return out;
  std::istringstream in(lines[0]->attributes.at("points"));
  std::string pair;
  while (in >> pair) {
    const size_t comma = pair.find(',');
    EXPECT_NE(comma, std::string::npos) << pair;
    out.emplace_back(std::stod(pair.substr(0, comma)), std::stod(pair.substr(comma + 1)));
  }
  return out;
}

// Checks what every document must satisfy and returns its elements.
std::vector<XmlElement> parse_svg(const std::string& svg) {
  std::vector<XmlElement> doc;
  EXPECT_NO_THROW(doc = XmlReader::parse(svg)) << svg.substr(0, 2000);
  if (doc.empty()) return doc;
  const XmlElement& root = doc[0];
  EXPECT_EQ(root.name, "svg");
  EXPECT_EQ(root.attributes.at("xmlns"), "http://www.w3.org/2000/svg");
  EXPECT_EQ(root.attributes.at("version"), "1.1");
  EXPECT_EQ(root.attributes.at("viewBox"),
            "0 0 " + root.attributes.at("width") + " " + root.attributes.at("height"));
  EXPECT_TRUE(all(doc, "script").empty());
  for (const std::string_view bad : {"nan", "inf", "<script", "href"}) {
    EXPECT_EQ(svg.find(bad), std::string::npos) << bad;
  }
  return doc;
}

bool has_budget_line(const std::vector<XmlElement>& doc) {
  for (const XmlElement* line : all(doc, "line")) {
    if (line->attributes.contains("stroke-dasharray")) return true;
  }
  return false;
}

TEST(MemorySvg, TypicalPlot) {
  const std::vector<XmlElement> doc = parse_svg(memory_svg(typical(), "llama (toy)"));
  EXPECT_EQ(all(doc, "title").at(0)->text, "llama (toy)");
  EXPECT_TRUE(has_text(doc, "llama (toy)"));
  EXPECT_TRUE(has_text(doc, "peak 37.2 GiB at 412.5 ms"));
  EXPECT_TRUE(has_text(doc, "time (ms)"));
  EXPECT_TRUE(has_text(doc, "device memory (GiB)"));
  // 0.5 s -> 0..500 ms in steps of 100; 40 GiB + 5% -> 0..50 GiB in steps of 10.
  for (const char* tick : {"0", "100", "200", "300", "400", "500", "10", "50"}) {
    EXPECT_TRUE(has_text(doc, tick)) << tick;
  }
  EXPECT_FALSE(has_text(doc, "600"));
  EXPECT_FALSE(has_text(doc, "60"));
}

TEST(MemorySvg, StepShapedLine) {
  const std::vector<XmlElement> doc = parse_svg(memory_svg(typical(), "t"));
  const auto points = polyline_points(doc);
  ASSERT_EQ(points.size(), 8u);  // two per curve point
  for (size_t i = 1; i < points.size(); ++i) {
    // Alternately horizontal (same y) and vertical (same x) segments.
    if (i % 2 == 1) {
      EXPECT_EQ(points[i].second, points[i - 1].second) << i;
    } else {
      EXPECT_EQ(points[i].first, points[i - 1].first) << i;
    }
    EXPECT_GT(points[i].first, points[0].first);
  }
  // The highest point of the line (smallest y) is the peak marker.
  const auto circle = all(doc, "circle");
  ASSERT_EQ(circle.size(), 1u);
  const double top = std::min_element(points.begin(), points.end(), [](auto a, auto b) {
                       return a.second < b.second;
                     })->second;
  EXPECT_EQ(top, std::stod(circle[0]->attributes.at("cy")));
}

TEST(MemorySvg, BudgetLineOnlyWithBudget) {
  const std::vector<XmlElement> with = parse_svg(memory_svg(typical(), "t"));
  EXPECT_TRUE(has_budget_line(with));
  EXPECT_TRUE(has_text(with, "budget 40.0 GiB"));

  SimResult no_budget = typical();
  no_budget.budget = 0;
  const std::vector<XmlElement> without = parse_svg(memory_svg(no_budget, "t"));
  EXPECT_FALSE(has_budget_line(without));
  for (const std::string& text : texts(without)) {
    EXPECT_EQ(text.find("budget"), std::string::npos) << text;
  }
}

TEST(MemorySvg, BudgetAbovePeakFitsOnTheAxis) {
  // 100 MiB budget over a 1 MiB curve: the axis reaches the budget.
  const SimResult result = result_with({{0, 1 << 20}}, 2e-6, 100 << 20);
  const std::vector<XmlElement> doc = parse_svg(memory_svg(result, "t"));
  EXPECT_TRUE(has_text(doc, "device memory (MiB)"));
  EXPECT_TRUE(has_text(doc, "budget 100 MiB"));
  EXPECT_TRUE(has_text(doc, "time (µs)"));
  EXPECT_TRUE(has_text(doc, "peak 1.00 MiB at 0.0 µs"));
}

TEST(MemorySvg, PeakJustOverBudgetReadsLarger) {
  // 6.83 GiB against 6.75 GiB: one decimal would print 6.8 for both.
  const SimResult result = result_with({{0, kGiB}, {0.0126, 7'336'384'000}}, 0.0129, 7'249'578'754);
  const std::vector<XmlElement> doc = parse_svg(memory_svg(result, "t"));
  EXPECT_TRUE(has_text(doc, "peak 6.83 GiB at 12.6 ms"));
  EXPECT_TRUE(has_text(doc, "budget 6.75 GiB"));
}

TEST(MemorySvg, EscapesTitle) {
  const std::string title = "<b>\"R&D\" 'plan'</b>";
  const std::string svg = memory_svg(typical(), title);
  EXPECT_NE(svg.find("&lt;b&gt;&quot;R&amp;D&quot; &apos;plan&apos;&lt;/b&gt;"), std::string::npos);
  const std::vector<XmlElement> doc = parse_svg(svg);
  EXPECT_EQ(all(doc, "title").at(0)->text, title);
  EXPECT_TRUE(has_text(doc, title));
}

TEST(MemorySvg, TitleWithCharactersXmlForbids) {
  const std::string svg = memory_svg(typical(), "a\x01z \xff caf\xc3\xa9 \xe2\x82");
  const std::vector<XmlElement> doc = parse_svg(svg);
  EXPECT_EQ(all(doc, "title").at(0)->text, "a\uFFFDz \uFFFD caf\u00e9 \uFFFD\uFFFD");
}

TEST(MemorySvg, DegenerateInputs) {
  const std::vector<SimResult> cases = {
      result_with({}, 0, 0),                     // nothing at all
      result_with({}, 0.5, 40 * kGiB),           // budget, no curve
      result_with({{0, 123}}, 0, 0),             // one point, zero time
      result_with({{0.25, 5 * kGiB}}, 0.25, 0),  // one point at the end
      result_with({{0, 0}, {1, 0}}, 2, 0),       // all zero
      result_with({{-1, 10}, {std::nan(""), 20}}, std::nan(""), 1),
      result_with({{0, 10}, {1e300, 20}}, std::numeric_limits<double>::infinity(), ~uint64_t{0}),
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(i);
    const std::vector<XmlElement> doc = parse_svg(memory_svg(cases[i], ""));
    const bool empty = cases[i].curves[0].empty();
    EXPECT_EQ(has_text(doc, "no device memory data"), empty);
    EXPECT_EQ(all(doc, "polyline").size(), empty ? 0u : 1u);
    EXPECT_EQ(has_budget_line(doc), cases[i].budget > 0);
  }
  const std::vector<XmlElement> one = parse_svg(memory_svg(cases[2], ""));
  EXPECT_TRUE(has_text(one, "peak 123 B at 0.0 ms"));
}

TEST(MemorySvg, MillionPointCurveIsDownsampledKeepingThePeak) {
  std::mt19937_64 rng(42);
  std::vector<MemoryPoint> curve(1'000'000);
  for (size_t i = 0; i < curve.size(); ++i) {
    curve[i] = {static_cast<double>(i) * 1e-6, 20 * kGiB + rng() % kGiB};
  }
  curve[777'777].bytes = kPeak;  // one sample, far narrower than a pixel
  const SimResult result = result_with(curve, 0, 0);
  const std::vector<XmlElement> doc = parse_svg(memory_svg(result, "1M"));
  const auto points = polyline_points(doc);
  EXPECT_LE(points.size(), 4000u);
  EXPECT_GT(points.size(), 100u);
  const double top = std::min_element(points.begin(), points.end(), [](auto a, auto b) {
                       return a.second < b.second;
                     })->second;
  EXPECT_EQ(top, std::stod(all(doc, "circle").at(0)->attributes.at("cy")));
  EXPECT_TRUE(has_text(doc, "peak 37.2 GiB at 777.8 ms"));
}

// ---- max_envelope -----------------------------------------------------------

TEST(MaxEnvelope, ColumnMaxima) {
  const std::vector<MemoryPoint> curve = {{0, 1}, {0.25, 5}, {0.3, 2}, {0.9, 3}};
  const auto env = max_envelope(curve, 0, 1, 4);
  ASSERT_EQ(env.size(), 4u);
  // [0,.25): 1; [.25,.5): 5 then 2; [.5,.75): 2 carried; [.75,1): 2 then 3.
  const std::vector<std::pair<double, uint64_t>> expected = {
      {0, 1}, {0.25, 5}, {0.5, 2}, {0.75, 3}};
  for (size_t i = 0; i < env.size(); ++i) {
    EXPECT_DOUBLE_EQ(env[i].time, expected[i].first) << i;
    EXPECT_EQ(env[i].bytes, expected[i].second) << i;
  }
}

TEST(MaxEnvelope, MergesEqualColumnsAndStartsWithTheCurve) {
  const auto env = max_envelope({{0.55, 7}, {0.6, 7}}, 0, 1, 10);
  ASSERT_EQ(env.size(), 1u);
  EXPECT_EQ(env[0].time, 0.55);  // not the column start: nothing is drawn before the curve
  EXPECT_EQ(env[0].bytes, 7u);
}

TEST(MaxEnvelope, PointsOutsideTheRange) {
  // Before begin: carried in. After end and NaN: folded into the last column.
  const auto env = max_envelope({{-5, 4}, {0.5, 1}, {2, 9}, {std::nan(""), 3}}, 0, 1, 2);
  ASSERT_EQ(env.size(), 2u);
  EXPECT_EQ(env[0].time, 0.0);
  EXPECT_EQ(env[0].bytes, 4u);
  EXPECT_EQ(env[1].bytes, 9u);
}

TEST(MaxEnvelope, Degenerate) {
  EXPECT_TRUE(max_envelope({}, 0, 1, 10).empty());
  EXPECT_TRUE(max_envelope({{0, 1}}, 0, 1, 0).empty());
  const auto zero_width = max_envelope({{0, 1}, {0, 8}, {0, 2}}, 0, 0, 5);
  ASSERT_EQ(zero_width.size(), 1u);
  EXPECT_EQ(zero_width[0].bytes, 8u);
}

TEST(MaxEnvelope, MatchesBruteForce) {
  std::mt19937_64 rng(7);
  std::vector<MemoryPoint> curve;
  double t = 0;
  for (int i = 0; i < 5000; ++i) {
    t += static_cast<double>(rng() % 1000) * 1e-6;
    curve.push_back({t, rng() % 1000});
  }
  const size_t columns = 97;
  const double end = t * 1.01;
  const auto env = max_envelope(curve, 0, end, columns);
  ASSERT_LE(env.size(), columns);
  // The envelope's value at each column start is the curve's max over it.
  const auto value_at = [](const std::vector<MemoryPoint>& c, double time) {
    uint64_t v = 0;
    for (const MemoryPoint& p : c) {
      if (p.time <= time) v = p.bytes;
    }
    return v;
  };
  const double width = end / columns;
  for (size_t c = 0; c < columns; ++c) {
    const double lo = width * static_cast<double>(c);
    const double hi = width * static_cast<double>(c + 1);
    uint64_t expected = value_at(curve, lo);
    for (const MemoryPoint& p : curve) {
      if (p.time >= lo && p.time < hi) expected = std::max(expected, p.bytes);
    }
    EXPECT_EQ(value_at(env, lo + width / 2), expected) << c;
  }
}

}  // namespace
}  // namespace memwall
