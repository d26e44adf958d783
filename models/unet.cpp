// The U-Net: blocks, then the model, which reads like its diagram: encoder, bottleneck,
// decoder with skip connections, 1x1 classifier.
#include "models/unet.h"

#include "ops/activation.h"
#include "ops/concat.h"
#include "ops/pool2d.h"
#include "ops/upsample.h"

namespace hg {

namespace unet {

Tensor DoubleConv::forward_impl(const Tensor& x) {
  return (*bn2)((*conv2)((*bn1)((*conv1)(x))));  // each BatchNorm2d with its ReLU (batch_norm_relu)
}

Tensor Down::forward_impl(const Tensor& x) { return DoubleConv::forward_impl(max_pool2d(x)); }

Up::Up(int64_t in, UpMode m) : DoubleConv(in, in / 2), mode(m) {
  if (mode == UpMode::transposed)
    up = register_module("up", std::make_shared<nn::ConvTranspose2d>(in, in / 2, 2, ConvTranspose2dOptions{.stride = {2, 2}}));
  else
    up = register_module("up", std::make_shared<nn::Conv2d>(in, in / 2, 1));
}

Tensor Up::operator()(const Tensor& skip, const Tensor& x) {
  return scoped([&] {
    Tensor u = (*up)(mode == UpMode::transposed ? x : upsample(x, 2, UpsampleMode::bilinear));
    return DoubleConv::forward_impl(cat({skip, u}, 3));
  });
}

}  // namespace unet

namespace {

// Runs before any child is built, so bad arguments are reported as the model's.
int64_t checked_in_channels(int64_t in, int64_t classes, int64_t width, int64_t depth) {
  HG_CHECK(in > 0 && classes > 0 && width > 0, "UNet: in_channels, classes and width must be positive, got ", in,
           ", ", classes, ", ", width);
  HG_CHECK(depth >= 1 && depth <= 16, "UNet: depth must be in [1, 16], got ", depth);
  return in;
}

}  // namespace

UNet::UNet(int64_t in, int64_t classes_, int64_t width_, int64_t depth_, UpMode mode)
    : in_channels(checked_in_channels(in, classes_, width_, depth_)),
      classes(classes_),
      width(width_),
      depth(depth_),
      up_mode(mode) {}

std::vector<std::shared_ptr<unet::Down>> UNet::make_down() {
  std::vector<std::shared_ptr<unet::Down>> blocks;
  for (int64_t i = 1; i <= depth; ++i)
    blocks.push_back(register_module("down" + std::to_string(i),
                                     std::make_shared<unet::Down>(width << (i - 1), width << i)));
  return blocks;
}

std::vector<std::shared_ptr<unet::Up>> UNet::make_up() {
  std::vector<std::shared_ptr<unet::Up>> blocks;
  for (int64_t i = 1; i <= depth; ++i)
    blocks.push_back(register_module("up" + std::to_string(i),
                                     std::make_shared<unet::Up>(width << (depth - i + 1), up_mode)));
  return blocks;
}

Tensor UNet::forward_impl(const Tensor& x) {
  const int64_t m = int64_t{1} << depth;
  HG_CHECK(x.defined() && x.dim() == 4 && x.size(3) == in_channels, "UNet: expected NHWC input [N, H, W, ",
           in_channels, "], got ", x.defined() ? shape_str(x.shape()) : "undefined");
  auto nearest = [m](int64_t s) {
    const int64_t lo = s / m * m;
    if (lo == s) return std::to_string(s);
    return lo == 0 ? std::to_string(m) : std::to_string(lo) + " or " + std::to_string(lo + m);
  };
  HG_CHECK(x.size(1) % m == 0 && x.size(2) % m == 0, "UNet: H and W must be divisible by 2^depth = ", m,
           " (depth ", depth, "), got H = ", x.size(1), ", W = ", x.size(2), "; nearest valid sizes: H ",
           nearest(x.size(1)), ", W ", nearest(x.size(2)));
  std::vector<Tensor> skips{(*inc)(x)};
  for (auto& d : down) skips.push_back((*d)(skips.back()));
  Tensor h = skips.back();
  for (size_t i = 0; i < up.size(); ++i) h = (*up[i])(skips[skips.size() - 2 - i], h);
  return (*outc)(h);
}

}  // namespace hg
