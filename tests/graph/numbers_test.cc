// The reader's number fast paths (eight digits at a time, Clinger's exact
// decimals) agree with plain conversion for numbers of every length.
#include <gtest/gtest.h>

#include <cstdlib>
#include <random>

#include "memwall/graph/graph.h"

namespace memwall {
namespace {

std::string numbers_doc(const std::string& shape, const std::string& ops) {
  return R"({"format":"memwall.graph/1","name":"n","meta":{},"buffers":[)"
         R"({"id":0,"name":"b","bytes":1,"kind":"input","shape":[)" +
         shape + "]}],\"ops\":[" + ops + "]}";
}

TEST(Numbers, IntegersOfEveryLength) {
  std::mt19937_64 rng(5);
  std::vector<int64_t> expected;
  std::string shape;
  const char* separators[] = {",", " ,", "\n,", ",\t"};
  for (int digits = 1; digits <= 19; ++digits) {
    for (int k = 0; k < 50; ++k) {
      std::string text(1, static_cast<char>('1' + rng() % 9));
      for (int d = 1; d < digits; ++d) text += static_cast<char>('0' + rng() % 10);
      if (digits == 19 && text > "9223372036854775807") text[0] = '1';
      if (!shape.empty()) shape += separators[rng() % 4];
      shape += text;
      expected.push_back(std::stoll(text));
    }
  }
  shape += ",0";
  expected.push_back(0);
  const Graph graph = graph_from_json_text(numbers_doc(shape, ""));
  EXPECT_EQ(graph.buffers[0].shape, expected);
}

TEST(Numbers, IntegersAtTheEndOfTheText) {
  // Fewer than 16 bytes left: the byte-at-a-time path.
  for (const std::string tail : {"7]}]}", "1234567890123]}]}"}) {
    const std::string text = R"({"format":"memwall.graph/1","name":"n","meta":{},"ops":[],)"
                             R"("buffers":[{"id":0,"name":"b","kind":"input","bytes":)" +
                             tail.substr(0, tail.find(']')) + "}]}";
    const Graph graph = graph_from_json_text(text);
    EXPECT_EQ(std::to_string(graph.buffers[0].bytes), tail.substr(0, tail.find(']')));
  }
}

TEST(Numbers, DecimalsMatchStrtod) {
  std::mt19937_64 rng(11);
  std::vector<std::string> texts = {"0",
                                    "0.0",
                                    "1.5e+09",
                                    "1.5e9",
                                    "1E-3",
                                    "0.1",
                                    "0.3",
                                    "123456789012345678",
                                    "9007199254740993",
                                    "1e22",
                                    "1e23",
                                    "4.35e-22",
                                    "2.2250738585072014e-308",
                                    "1.7976931348623157e308",
                                    "0.000000000000000000000000000001",
                                    "12345678901234567890.5"};
  for (int k = 0; k < 3000; ++k) {
    std::string text = std::to_string(rng() % 100000);
    if (rng() % 2) text += fmt::format(".{}", rng() % 1000000000);
    if (rng() % 2) {
      text += (rng() % 2 ? "e" : "E");
      const int exponent = static_cast<int>(rng() % 60) - 30;
      text += fmt::format("{}{}", exponent >= 0 && rng() % 2 ? "+" : "", exponent);
    }
    texts.push_back(text);
  }
  std::string ops;
  for (size_t i = 0; i < texts.size(); ++i) {
    if (i) ops += ",";
    ops += fmt::format(
        R"({{"id":{},"name":"o","type":"t","phase":"comm","in":[],"out":[],"flops":{}}})", i,
        texts[i]);
  }
  const Graph graph = graph_from_json_text(numbers_doc("", ops));
  for (size_t i = 0; i < texts.size(); ++i) {
    EXPECT_EQ(graph.ops[i].flops, std::strtod(texts[i].c_str(), nullptr)) << texts[i];
  }
}

}  // namespace
}  // namespace memwall
