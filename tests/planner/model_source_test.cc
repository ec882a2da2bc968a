// A step's graph as a person names it (model_source.h): the zoo's defaults
// for the GPU, and the options refused where they do not apply.
#include "memwall/planner/model_source.h"

#include <gtest/gtest.h>

#include "memwall/base/error.h"
#include "memwall/graph/counts.h"
#include "memwall/graph/graph.h"

namespace memwall {
namespace {

TEST(ModelSource, BuildsTheZooModelWithTheOptionsAsTyped) {
  ModelSource s;
  s.model = "gpt2-small";
  s.batch = "2";
  s.seq = "128";
  std::vector<std::string> notes;
  const Graph g = load_model_graph(s, find_gpu("a100-80g"), notes);
  ModelOptions o;
  o.batch = 2;
  o.seq = 128;
  EXPECT_EQ(graph_fingerprint(g), graph_fingerprint(build_model("gpt2-small", o)));
  EXPECT_TRUE(notes.empty());
}

TEST(ModelSource, TheDefaultDtypeFallsBackToFp16WithANote) {
  ModelSource s;
  s.model = "gpt2-small";
  std::vector<std::string> notes;
  // The V100 has no bf16 arithmetic (NVIDIA V100 datasheet; hw/profiles.cc).
  const ModelOptions o = zoo_model_options(s, find_gpu("v100-16g"), notes);
  EXPECT_EQ(o.precision, Precision::kFp16);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("no bf16 arithmetic"), std::string::npos);
  s.dtype_given = true;  // bf16 asked for by name: refused, not replaced
  EXPECT_THROW(zoo_model_options(s, find_gpu("v100-16g"), notes), Error);
}

TEST(ModelSource, QloraDefaultsAreThePapers) {
  ModelSource s;
  s.model = "llama2-7b";
  s.qlora = true;
  std::vector<std::string> notes;
  const ModelOptions o = zoo_model_options(s, find_gpu("a100-80g"), notes);
  // As the QLoRA paper trains (Dettmers et al. 2023, arXiv:2305.14314): r 64,
  // alpha 16, every linear layer.
  EXPECT_EQ(o.lora.rank, 64);
  EXPECT_EQ(o.lora.alpha, 16);
  EXPECT_EQ(o.lora.targets, lora_target_names());
  EXPECT_EQ(o.base_weights, WeightFormat::kNf4);
}

TEST(ModelSource, RefusesWhatDoesNotApply) {
  std::vector<std::string> notes;
  ModelSource file;
  file.graph_file = "/nonexistent.json";
  file.batch = "4";
  EXPECT_THROW(load_model_graph(file, find_gpu("a100-80g"), notes), Error);
  ModelSource alpha_alone;
  alpha_alone.model = "gpt2-small";
  alpha_alone.lora_alpha = "8";
  EXPECT_THROW(zoo_model_options(alpha_alone, find_gpu("a100-80g"), notes), Error);
  ModelSource zero;
  zero.model = "gpt2-small";
  zero.batch = "0";
  EXPECT_THROW(zoo_model_options(zero, find_gpu("a100-80g"), notes), Error);
  EXPECT_THROW(parse_lora_alpha("inf"), Error);
}

}  // namespace
}  // namespace memwall
