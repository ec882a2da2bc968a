// `memwall inspect`'s figures as a record (inspection.h), and the table and
// JSON agreeing with it.
#include "memwall/report/inspection.h"

#include <gtest/gtest.h>

#include "memwall/graph/graph.h"
#include "memwall/models/zoo.h"

namespace memwall {
namespace {

TEST(Inspection, GptTwoSmallOnAnA100) {
  const Graph g = build_model("gpt2-small", {});
  const Hardware& hw = find_gpu("a100-80g");
  const Inspection in = inspect_graph(g, hw, /*by_layer=*/false);
  // GPT-2 small: 124,439,808 parameters with the tied head (Radford et al.
  // 2019; Hugging Face's gpt2 checkpoint).
  EXPECT_EQ(in.params, 124439808u);
  EXPECT_EQ(in.trainable, in.params);
  EXPECT_EQ(in.profile.peak_bytes, memory_profile(g).peak_bytes);
  EXPECT_FALSE(in.eager.has_value());  // a zoo graph has no eager lifetimes
  EXPECT_EQ(in.fits, in.profile.peak_bytes <= hw.device_memory_bytes);
  EXPECT_EQ(in.iteration_time, iteration_time(hw, g));
  const nlohmann::json j = inspection_json(in);
  EXPECT_EQ(j.at("param_count"), 124439808u);
  EXPECT_EQ(j.at("peak_bytes"), in.profile.peak_bytes);
  EXPECT_FALSE(j.contains("saved_by_layer"));
  EXPECT_EQ(inspection_text(in).rfind("gpt2-small", 0), 0u);
}

TEST(Inspection, AShortfallIsThePeakBeyondTheDevice) {
  const Graph g = build_model("llama2-7b", {});
  const Hardware& hw = find_gpu("rtx4090");
  const Inspection in = inspect_graph(g, hw, /*by_layer=*/true);
  ASSERT_FALSE(in.fits);
  EXPECT_EQ(in.shortfall, in.profile.peak_bytes - hw.device_memory_bytes);
  EXPECT_FALSE(in.saved_by_layer.empty());
  EXPECT_EQ(inspection_json(in).at("saved_by_layer").size(), in.saved_by_layer.size());
  EXPECT_NE(inspection_text(in).find("no, short by"), std::string::npos);
}

}  // namespace
}  // namespace memwall
