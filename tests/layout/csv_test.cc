// The CSV reader's errors (exact messages), round trips and files.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "memwall/base/error.h"
#include "memwall/layout/csv.h"
#include "memwall/layout/problem.h"
#include "problems.h"

namespace memwall {
namespace {

const std::string kHeader = "id,lower,upper,size\n";

std::string csv_error(const std::string& text) {
  try {
    layout_from_csv(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "accepted";
}

struct CsvCase {
  std::string label;
  std::string text;
  std::string expected;
};

TEST(Csv, RejectsWithOneLine) {
  const std::vector<CsvCase> cases = {
      // ---- Header ----
      {"empty file", "", "csv: empty file (no header \"id,lower,upper,size\")"},
      {"only blank lines", "\n\n\n",
       "csv: line 1: empty line where the header \"id,lower,upper,size\" belongs"},
      {"blank line before the header", "\r\nid,lower,upper,size\n0,0,1,8\n",
       "csv: line 1: empty line where the header \"id,lower,upper,size\" belongs"},
      {"missing column", "id,lower,upper\n0,1,2\n",
       "csv: line 1: header \"id,lower,upper\" is not \"id,lower,upper,size\" (optionally "
       "followed by \",offset\")"},
      {"no header", "0,0,1,8\n",
       "csv: line 1: header \"0,0,1,8\" is not \"id,lower,upper,size\" (optionally followed by "
       "\",offset\")"},
      {"columns reordered", "id,size,lower,upper\n",
       "csv: line 1: header \"id,size,lower,upper\" is not \"id,lower,upper,size\" (optionally "
       "followed by \",offset\")"},
      {"unprintable and long header quoted", "id,lower\x01,upper,size,offset,extra\n",
       "csv: line 1: header \"id,lower\\x01,upper,size,off...\" is not \"id,lower,upper,size\" "
       "(optionally followed by \",offset\")"},
      // ---- Shape of a row ----
      {"too few fields", kHeader + "0,0,1,8\n1,2,3\n", "csv: line 3: expected 4 fields, found 3"},
      {"too many fields", kHeader + "1,2,3,4,5\n", "csv: line 2: expected 4 fields, found 5"},
      {"offset missing", "id,lower,upper,size,offset\n1,2,3,4\n",
       "csv: line 2: expected 5 fields, found 4"},
      {"trailing comma", kHeader + "1,2,3,4,\n", "csv: line 2: expected 4 fields, found 5"},
      {"empty line", kHeader + "\n1,2,3,4\n", "csv: line 2: empty line"},
      {"blank line at the end", kHeader + "1,2,3,4\n\n", "csv: line 3: empty line"},
      // ---- Numbers ----
      {"empty field", kHeader + "1,,3,4\n", "csv: line 2: lower is empty"},
      {"letters", kHeader + "1,a,3,4\n", "csv: line 2: lower \"a\" is not an integer"},
      {"decimal", kHeader + "1,2,3,4.5\n", "csv: line 2: size \"4.5\" is not an integer"},
      {"exponent", kHeader + "1,2,3,1e6\n", "csv: line 2: size \"1e6\" is not an integer"},
      {"space", kHeader + " 1,2,3,4\n", "csv: line 2: id \" 1\" is not an integer"},
      {"plus sign", kHeader + "1,+2,3,4\n", "csv: line 2: lower \"+2\" is not an integer"},
      {"minus alone", kHeader + "1,2,3,-\n", "csv: line 2: size \"-\" is not an integer"},
      {"minus zero", kHeader + "-0,2,3,4\n", "csv: line 2: id \"-0\" is not an integer"},
      {"negative size", kHeader + "1,2,3,-4\n", "csv: line 2: size \"-4\" is negative"},
      {"negative lower", kHeader + "1,-2,3,4\n", "csv: line 2: lower \"-2\" is negative"},
      {"size over 2^62", kHeader + "1,2,3,4611686018427387905\n",
       "csv: line 2: size \"4611686018427387905\" exceeds the limit of 2^62"},
      {"size over 64 bits", kHeader + "1,2,3,99999999999999999999999\n",
       "csv: line 2: size \"99999999999999999999999\" exceeds the limit of 2^62"},
      {"upper over 2^63 - 1", kHeader + "1,2,9223372036854775808,4\n",
       "csv: line 2: upper \"9223372036854775808\" exceeds the limit of 2^63 - 1"},
      {"offset over 2^62", "id,lower,upper,size,offset\n1,2,3,4,4611686018427387905\n",
       "csv: line 2: offset \"4611686018427387905\" exceeds the limit of 2^62"},
      {"long field cut short", kHeader + "1,2,3,12345678901234567890123456789x\n",
       "csv: line 2: size \"123456789012345678901234...\" is not an integer"},
      {"tab in a field", kHeader + "1,2,3\t,4\n",
       "csv: line 2: upper \"3\\x09\" is not an integer"},
      // ---- Meaning ----
      {"empty lifetime", kHeader + "1,5,5,4\n", "csv: line 2: lower 5 is not below upper 5"},
      {"backwards lifetime", kHeader + "1,6,5,4\n", "csv: line 2: lower 6 is not below upper 5"},
      {"zero size", kHeader + "1,2,3,0\n", "csv: line 2: size is 0"},
      {"duplicate id", kHeader + "1,0,1,8\n2,0,1,8\n1,4,5,8\n",
       "csv: line 4: duplicate id 1 (first on line 2)"},
  };
  for (const CsvCase& c : cases) {
    SCOPED_TRACE(c.label);
    EXPECT_EQ(csv_error(c.text), c.expected);
  }
}

TEST(Csv, ReadsProblemsAndOffsets) {
  // CRLF line ends and a last line without one are fine.
  const LayoutCsv plain = layout_from_csv("id,lower,upper,size\r\n7,0,4,16\r\n3,2,6,8");
  ASSERT_EQ(plain.problem.buffers.size(), 2u);
  EXPECT_EQ(plain.problem.buffers[0].id, 7);
  EXPECT_EQ(plain.problem.buffers[1].lower, 2);
  EXPECT_EQ(plain.problem.buffers[1].upper, 6);
  EXPECT_EQ(plain.problem.buffers[1].size, 8u);
  EXPECT_EQ(plain.problem.alignment, 1u);
  EXPECT_EQ(plain.problem.capacity, 0u);
  EXPECT_FALSE(plain.layout.has_value());

  const LayoutCsv solved = layout_from_csv("id,lower,upper,size,offset\n7,0,4,16,0\n3,2,6,8,16\n");
  ASSERT_TRUE(solved.layout.has_value());
  EXPECT_EQ(solved.layout->offsets, (std::vector<uint64_t>{0, 16}));
  EXPECT_EQ(solved.layout->arena, 24u);

  const LayoutCsv header_only = layout_from_csv(kHeader);
  EXPECT_TRUE(header_only.problem.buffers.empty());
  EXPECT_TRUE(layout_from_csv("id,lower,upper,size").problem.buffers.empty());
  const LayoutCsv limits =
      layout_from_csv(kHeader + "9223372036854775807,0,9223372036854775807,4611686018427387904\n");
  EXPECT_EQ(limits.problem.buffers[0].upper, INT64_MAX);
  EXPECT_EQ(limits.problem.buffers[0].size, uint64_t{1} << 62);
}

TEST(Csv, RoundTrips) {
  const LayoutProblem p = testing::tflite_complex();
  EXPECT_EQ(layout_to_csv(testing::staircase()),
            "id,lower,upper,size\n0,0,1,10\n1,0,2,9\n2,1,2,8\n3,1,2,7\n");
  const LayoutCsv back = layout_from_csv(layout_to_csv(p));
  ASSERT_EQ(back.problem.buffers.size(), p.buffers.size());
  for (size_t i = 0; i < p.buffers.size(); ++i) {
    EXPECT_EQ(back.problem.buffers[i].id, p.buffers[i].id);
    EXPECT_EQ(back.problem.buffers[i].lower, p.buffers[i].lower);
    EXPECT_EQ(back.problem.buffers[i].upper, p.buffers[i].upper);
    EXPECT_EQ(back.problem.buffers[i].size, p.buffers[i].size);
  }
  const Layout layout{{0, 32, 80, 64, 88, 0, 64, 72, 0}, 96};
  const LayoutCsv solved = layout_from_csv(layout_to_csv(p, layout));
  ASSERT_TRUE(solved.layout.has_value());
  EXPECT_EQ(solved.layout->offsets, layout.offsets);
  EXPECT_EQ(solved.layout->arena, layout.arena);
  EXPECT_THROW(layout_to_csv(p, Layout{{0}, 32}), Error);
}

TEST(Csv, FilesNameTheirPath) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("memwall_csv_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string good = (dir / "good.csv").string();
  const LayoutProblem p = testing::staircase();
  write_layout_csv(good, p, Layout{{9, 0, 9, 17}, 24});
  const LayoutCsv read = read_layout_csv(good);
  EXPECT_EQ(read.problem.buffers.size(), 4u);
  EXPECT_EQ(read.layout->offsets, (std::vector<uint64_t>{9, 0, 9, 17}));

  const std::string bad = (dir / "bad.csv").string();
  std::ofstream(bad) << "id,lower,upper,size\n1,2,3,x\n";
  try {
    read_layout_csv(bad);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), bad + ": csv: line 2: size \"x\" is not an integer");
  }
  try {
    read_layout_csv((dir / "missing.csv").string());
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind((dir / "missing.csv").string() + ": cannot open", 0), 0u);
  }
  std::filesystem::remove_all(dir);
}

TEST(Csv, ReadsTwentyThousandLinesQuickly) {
  std::string text = kHeader;
  for (int i = 0; i < 20000; ++i) {
    text += std::to_string(i) + "," + std::to_string(i) + "," + std::to_string(i + 50) + "," +
            std::to_string(1000 + i) + "\n";
  }
  const LayoutCsv csv = layout_from_csv(text);
  EXPECT_EQ(csv.problem.buffers.size(), 20000u);
  EXPECT_EQ(csv.problem.buffers.back().size, 20999u);
}

}  // namespace
}  // namespace memwall
