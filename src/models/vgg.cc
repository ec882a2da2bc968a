// torchvision VGG-16/19 without batch norm (torchvision/models/vgg.py,
// configurations "D" and "E"): 3x3 convs with bias and ReLU, 2x2 max pools,
// AdaptiveAvgPool2d(7), classifier Linear-ReLU-Dropout(0.5) x2 + Linear to
// 1000 classes. Names follow torchvision's state_dict: a module's index in
// its Sequential ("features.0.weight", "classifier.6.bias").
#include <string>
#include <vector>

#include "architectures.h"
#include "cnn_layers.h"
#include "layers.h"
#include "memwall/base/error.h"

namespace memwall::models {
namespace {

constexpr int64_t kVggClasses = 1000;
constexpr int64_t kPool = 0;  // "M" in torchvision's cfgs

const std::vector<int64_t> kCfgD = {64,    64,  kPool, 128, 128,   kPool, 256, 256, 256,
                                    kPool, 512, 512,   512, kPool, 512,   512, 512, kPool};
const std::vector<int64_t> kCfgE = {64,  64,  kPool, 128, 128,   kPool, 256, 256, 256, 256,  kPool,
                                    512, 512, 512,   512, kPool, 512,   512, 512, 512, kPool};

}  // namespace

Graph build_vgg(std::string_view variant, const ModelOptions& opts) {
  const std::vector<int64_t>* cfg = nullptr;
  if (variant == "vgg16") {
    cfg = &kCfgD;
  } else if (variant == "vgg19") {
    cfg = &kCfgE;
  } else {
    fail("model: unknown VGG variant '{}'", variant);
  }
  Builder b(std::string(variant), opts);
  const int64_t n = opts.batch;
  Tensor images = b.input("images", {n, 3, opts.image, opts.image}, b.compute_dtype());
  Tensor labels = b.input("labels", {n}, DType::kI64);

  Tensor x = images;
  int64_t index = 0;  // position in torchvision's `features` Sequential
  auto next = [&index] { return "features." + std::to_string(index++); };
  for (int64_t v : *cfg) {
    if (v == kPool) {
      x = max_pool2d(b, next(), x, 2, 2, 0);
    } else {
      x = conv2d(b, next(), x, v, 3, {.padding = 1, .bias = true});
      x = relu(b, next(), x);
    }
  }
  // Identity at 224 (the features are 7x7) but emitted, as torchvision runs it.
  x = flatten(b, adaptive_avg_pool2d(b, "avgpool", x, 7, 7));
  x = relu(b, "classifier.1", linear_layer(b, "classifier.0", x, 4096, true));
  x = dropout(b, "classifier.2", x, 0.5);
  x = relu(b, "classifier.4", linear_layer(b, "classifier.3", x, 4096, true));
  x = dropout(b, "classifier.5", x, 0.5);
  Tensor logits = linear_layer(b, "classifier.6", x, kVggClasses, true);
  return b.finish(cross_entropy(b, "loss", logits, labels));
}

}  // namespace memwall::models
