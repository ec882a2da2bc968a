// torchvision MobileNetV2, width 1.0 (torchvision/models/mobilenetv2.py):
// a 3x3 stride-2 stem, 17 inverted residual blocks (1x1 expansion, 3x3
// depthwise, 1x1 linear projection; residual when stride 1 and in == out),
// a 1x1 conv to 1280 channels, global average pool, Dropout(0.2) and a Linear
// to 1000 classes. Conv2dNormActivation = conv (no bias), BN, ReLU6. Names
// follow torchvision's state_dict ("features.2.conv.1.0.weight").
#include <string>

#include "architectures.h"
#include "cnn_layers.h"
#include "layers.h"
#include "memwall/base/error.h"

namespace memwall::models {
namespace {

constexpr int64_t kMobileNetClasses = 1000;
constexpr int64_t kStemChannels = 32;
constexpr int64_t kLastChannels = 1280;

struct Stage {
  int64_t expand;    // t
  int64_t channels;  // c
  int64_t repeats;   // n
  int64_t stride;    // s
};
constexpr Stage kStages[] = {{1, 16, 1, 1}, {6, 24, 2, 2},  {6, 32, 3, 2}, {6, 64, 4, 2},
                             {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}};

// Conv2dNormActivation: "<prefix>.0" conv, ".1" BN, ".2" ReLU6.
Tensor conv_bn_relu6(Builder& b, const std::string& prefix, const Tensor& x, int64_t out_channels,
                     int64_t kernel, int64_t stride, int64_t groups) {
  Tensor y = conv2d(b, prefix + ".0", x, out_channels, kernel,
                    {.stride = stride, .padding = (kernel - 1) / 2, .groups = groups});
  return relu6(b, prefix + ".2", batch_norm(b, prefix + ".1", y));
}

Tensor inverted_residual(Builder& b, const Tensor& x, int64_t out_channels, int64_t stride,
                         int64_t expand) {
  const int64_t in_channels = x.shape[1];
  const int64_t hidden = in_channels * expand;  // int(round(inp * expand_ratio))
  int layer = 0;                                // position in the block's `conv` Sequential
  auto next = [&layer] { return "conv." + std::to_string(layer++); };
  Tensor y = x;
  if (expand != 1) y = conv_bn_relu6(b, next(), y, hidden, 1, 1, 1);
  y = conv_bn_relu6(b, next(), y, hidden, 3, stride, /*groups=*/hidden);  // depthwise
  y = conv2d(b, next(), y, out_channels, 1, {});
  y = batch_norm(b, next(), y);
  if (stride == 1 && in_channels == out_channels) y = add(b, "add", x, y);
  return y;
}

}  // namespace

Graph build_mobilenet_v2(std::string_view variant, const ModelOptions& opts) {
  if (variant != "mobilenetv2") fail("model: unknown MobileNetV2 variant '{}'", variant);
  Builder b(std::string(variant), opts);
  const int64_t n = opts.batch;
  Tensor images = b.input("images", {n, 3, opts.image, opts.image}, b.compute_dtype());
  Tensor labels = b.input("labels", {n}, DType::kI64);

  int64_t index = 0;  // position in torchvision's `features` Sequential
  Tensor x = conv_bn_relu6(b, "features.0", images, kStemChannels, 3, 2, 1);
  for (const Stage& s : kStages) {
    for (int64_t i = 0; i < s.repeats; ++i) {
      auto scope = b.scope("features." + std::to_string(++index));
      x = inverted_residual(b, x, s.channels, i == 0 ? s.stride : 1, s.expand);
    }
  }
  x = conv_bn_relu6(b, "features." + std::to_string(++index), x, kLastChannels, 1, 1, 1);
  x = flatten(b, adaptive_avg_pool2d(b, "avgpool", x, 1, 1));
  x = dropout(b, "classifier.0", x, 0.2);
  Tensor logits = linear_layer(b, "classifier.1", x, kMobileNetClasses, true);
  return b.finish(cross_entropy(b, "loss", logits, labels));
}

}  // namespace memwall::models
