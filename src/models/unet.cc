// U-Net (Ronneberger et al. 2015) in the padded form with batch norm of
// milesial/Pytorch-UNet (unet/unet_model.py, unet_parts.py) with
// bilinear=False, as its torch.hub entry `unet_carvana` builds it:
// UNet(n_channels=3, n_classes=2, bilinear=False).
//   DoubleConv = (conv3x3 pad 1 no bias, BN, ReLU) x 2; channels 64..1024;
//   Down = MaxPool2d(2) + DoubleConv; Up = ConvTranspose2d(C, C/2, 2, stride 2)
//   + cat([skip, up], dim=1) + DoubleConv; OutConv = conv1x1 with bias.
// Loss: per-pixel cross-entropy against int64 labels [N, H, W].
// The image side is a multiple of 16 (zoo.cc), so every upsampled map matches
// its skip and Up's F.pad is a no-op that is not emitted.
#include <string>

#include "architectures.h"
#include "cnn_layers.h"
#include "layers.h"
#include "memwall/base/error.h"

namespace memwall::models {
namespace {

constexpr int64_t kInChannels = 3;
constexpr int64_t kUnetClasses = 2;

// "<prefix>.double_conv.{0..5}" as in unet_parts.DoubleConv.
Tensor double_conv(Builder& b, const std::string& prefix, const Tensor& x, int64_t channels) {
  const std::string p = prefix + ".double_conv.";
  Tensor y = conv2d(b, p + "0", x, channels, 3, {.padding = 1});
  y = relu(b, p + "2", batch_norm(b, p + "1", y));
  y = conv2d(b, p + "3", y, channels, 3, {.padding = 1});
  return relu(b, p + "5", batch_norm(b, p + "4", y));
}

Tensor down(Builder& b, const std::string& name, const Tensor& x, int64_t channels) {
  Tensor y = max_pool2d(b, name + ".maxpool_conv.0", x, 2, 2, 0);
  return double_conv(b, name + ".maxpool_conv.1", y, channels);
}

Tensor up(Builder& b, const std::string& name, const Tensor& x, const Tensor& skip,
          int64_t channels) {
  Tensor y = conv_transpose2d(b, name + ".up", x, x.shape[1] / 2, 2, 2, /*bias=*/true);
  if (y.shape != std::vector<int64_t>{skip.shape[0], y.shape[1], skip.shape[2], skip.shape[3]}) {
    fail("model: U-Net {} upsampled map does not match its skip connection", name);
  }
  y = concat_channels(b, name + ".cat", {skip, y});
  return double_conv(b, name + ".conv", y, channels);
}

}  // namespace

Graph build_unet(std::string_view variant, const ModelOptions& opts) {
  if (variant != "unet") fail("model: unknown U-Net variant '{}'", variant);
  Builder b(std::string(variant), opts);
  const int64_t n = opts.batch;
  Tensor images = b.input("images", {n, kInChannels, opts.image, opts.image}, b.compute_dtype());
  Tensor labels = b.input("labels", {n, opts.image, opts.image}, DType::kI64);

  Tensor x1 = double_conv(b, "inc", images, 64);
  Tensor x2 = down(b, "down1", x1, 128);
  Tensor x3 = down(b, "down2", x2, 256);
  Tensor x4 = down(b, "down3", x3, 512);
  Tensor x5 = down(b, "down4", x4, 1024);
  Tensor x = up(b, "up1", x5, x4, 512);
  x = up(b, "up2", x, x3, 256);
  x = up(b, "up3", x, x2, 128);
  x = up(b, "up4", x, x1, 64);
  Tensor logits = conv2d(b, "outc.conv", x, kUnetClasses, 1, {.bias = true});
  // cross_entropy works on any [N, C, ...] logits: log_softmax over C.
  return b.finish(cross_entropy(b, "loss", logits, labels));
}

}  // namespace memwall::models
