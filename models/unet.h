// The classic U-Net (Ronneberger et al. 2015) with padded 3x3 convolutions and batch
// norm, on NHWC images: [N, H, W, in_channels] -> logits [N, H, W, classes].
// Widths c_i = width * 2^i, i = 0..depth. Parameter names (depth 4):
//   inc.{conv1,conv2}.weight, inc.{bn1,bn2}.{weight,bias}    DoubleConv(in, c_0)
//   down1..down4: the same names, e.g. down2.conv1.weight     max-pool 2, DoubleConv(c_{i-1}, c_i)
//   up1..up4 (up1 deepest): up1.up.{weight,bias}             ConvTranspose2d(c_i, c_{i-1}, k 2, s 2)
//       (bilinear: upsample x2, then up1.up is a 1x1 Conv2d), then cat [skip, up] and
//       up1.conv1.weight, up1.bn1.weight, ...                  DoubleConv(2 c_{i-1}, c_{i-1})
//   outc.{weight,bias}                                         1x1 Conv2d(c_0, classes)
// BatchNorm buffers: *.bn{1,2}.{running_mean,running_var,num_batches_tracked}.
#pragma once
#include <memory>
#include <vector>

#include "nn/layers.h"

namespace hg {

enum class UpMode : uint8_t { transposed, bilinear };

namespace unet {

// conv3x3 -> BN -> ReLU, twice (each BN and its ReLU one batch_norm_relu op); the
// convolutions have no bias (BN supplies it).
class DoubleConv : public nn::Module {
 public:
  DoubleConv(int64_t in, int64_t out) : in_channels(in), out_channels(out) {}
 protected:
  Tensor forward_impl(const Tensor& x) override;

 public:
  std::string type_name() const override { return "DoubleConv"; }

  const int64_t in_channels, out_channels;
  HG_CHILD(nn::Conv2d, conv1, in_channels, out_channels, 3, Conv2dOptions{.padding = {1, 1}}, false);
  HG_CHILD(nn::BatchNorm2d, bn1, out_channels, 1e-5, 0.1, /*with_relu=*/true);
  HG_CHILD(nn::Conv2d, conv2, out_channels, out_channels, 3, Conv2dOptions{.padding = {1, 1}}, false);
  HG_CHILD(nn::BatchNorm2d, bn2, out_channels, 1e-5, 0.1, /*with_relu=*/true);
};

// Halves H and W with a 2x2 max-pool, then a DoubleConv.
class Down : public DoubleConv {
 public:
  using DoubleConv::DoubleConv;
 protected:
  Tensor forward_impl(const Tensor& x) override;

 public:
  std::string type_name() const override { return "Down"; }
};

// Doubles H and W of x, halving its channels, joins it to the skip connection and runs
// the DoubleConv on the pair. Called as up(skip, x).
class Up : public DoubleConv {
 public:
  Up(int64_t in, UpMode mode);
  Tensor operator()(const Tensor& skip, const Tensor& x);
  std::string type_name() const override { return "Up"; }

 protected:
  // Up takes two inputs; the single-input forward it would inherit from DoubleConv is
  // refused (Module's message names the call to use) instead of running half the block.
  Tensor forward_impl(const Tensor& x) override { return nn::Module::forward_impl(x); }

 public:

  const UpMode mode;
  std::shared_ptr<nn::Module> up;  // ConvTranspose2d, or the 1x1 Conv2d after bilinear upsampling
};

}  // namespace unet

class UNet : public nn::Module {
 public:
  // H and W of the input must be divisible by 2^depth.
  UNet(int64_t in_channels, int64_t classes, int64_t width, int64_t depth = 4, UpMode up = UpMode::transposed);
 protected:
  Tensor forward_impl(const Tensor& x) override;

 public:
  std::string type_name() const override { return "UNet"; }

  const int64_t in_channels, classes, width, depth;
  const UpMode up_mode;
  HG_CHILD(unet::DoubleConv, inc, in_channels, width);
  std::vector<std::shared_ptr<unet::Down>> down = make_down();  // down1..down{depth}
  std::vector<std::shared_ptr<unet::Up>> up = make_up();        // up1 (deepest)..up{depth}
  HG_CHILD(nn::Conv2d, outc, width, classes, 1);

 private:
  std::vector<std::shared_ptr<unet::Down>> make_down();
  std::vector<std::shared_ptr<unet::Up>> make_up();
};

}  // namespace hg
