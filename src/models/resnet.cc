// torchvision ResNet-50/101/152 (torchvision/models/resnet.py): Bottleneck
// blocks with the stride on the 3x3 conv ("ResNet v1.5"), 1x1 conv + BN
// downsample on the first block of each stage, global average pool, fc to
// 1000 classes, cross-entropy against int64 labels. Names follow torchvision's
// state_dict ("layer1.0.conv1.weight").
#include <array>
#include <string>

#include "architectures.h"
#include "cnn_layers.h"
#include "layers.h"
#include "memwall/base/error.h"

namespace memwall::models {
namespace {

constexpr int64_t kResNetClasses = 1000;
constexpr int64_t kExpansion = 4;  // Bottleneck.expansion

Tensor conv_bn(Builder& b, const std::string& conv, const std::string& bn, const Tensor& x,
               int64_t out_channels, int64_t kernel, int64_t stride) {
  Tensor y = conv2d(b, conv, x, out_channels, kernel,
                    {.stride = stride, .padding = (kernel - 1) / 2, .bias = false});
  return batch_norm(b, bn, y);
}

Tensor bottleneck(Builder& b, const Tensor& x, int64_t planes, int64_t stride) {
  const int64_t in_channels = x.shape[1];
  const int64_t out_channels = planes * kExpansion;
  Tensor y = relu(b, "relu1", conv_bn(b, "conv1", "bn1", x, planes, 1, 1));
  y = relu(b, "relu2", conv_bn(b, "conv2", "bn2", y, planes, 3, stride));
  y = conv_bn(b, "conv3", "bn3", y, out_channels, 1, 1);
  Tensor identity = x;
  if (stride != 1 || in_channels != out_channels) {
    identity = conv_bn(b, "downsample.0", "downsample.1", x, out_channels, 1, stride);
  }
  // torchvision adds in place (out += identity) then applies an in-place
  // ReLU; out of place here, the saved bytes are the same (relu saves its
  // output, the sum dies at the ReLU).
  return relu(b, "relu3", add(b, "add", y, identity));
}

}  // namespace

Graph build_resnet(std::string_view variant, const ModelOptions& opts) {
  std::array<int64_t, 4> blocks{};
  if (variant == "resnet50") {
    blocks = {3, 4, 6, 3};
  } else if (variant == "resnet101") {
    blocks = {3, 4, 23, 3};
  } else if (variant == "resnet152") {
    blocks = {3, 8, 36, 3};
  } else {
    fail("model: unknown ResNet variant '{}'", variant);
  }
  Builder b(std::string(variant), opts);
  const int64_t n = opts.batch;
  Tensor images = b.input("images", {n, 3, opts.image, opts.image}, b.compute_dtype());
  Tensor labels = b.input("labels", {n}, DType::kI64);

  Tensor x = conv2d(b, "conv1", images, 64, 7, {.stride = 2, .padding = 3});
  x = relu(b, "relu", batch_norm(b, "bn1", x));
  x = max_pool2d(b, "maxpool", x, 3, 2, 1);
  for (size_t stage = 0; stage < blocks.size(); ++stage) {
    const int64_t planes = int64_t{64} << stage;
    for (int64_t i = 0; i < blocks[stage]; ++i) {
      auto scope = b.scope("layer" + std::to_string(stage + 1) + "." + std::to_string(i));
      x = bottleneck(b, x, planes, stage > 0 && i == 0 ? 2 : 1);
    }
  }
  x = flatten(b, adaptive_avg_pool2d(b, "avgpool", x, 1, 1));
  Tensor logits = linear_layer(b, "fc", x, kResNetClasses, /*with_bias=*/true);
  return b.finish(cross_entropy(b, "loss", logits, labels));
}

}  // namespace memwall::models
