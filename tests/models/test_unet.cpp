// The U-Net: parameter names and a hand-derived parameter count, forward/backward on
// the CPU over widths and sizes (both up modes), and the error for a size that does
// not divide by 2^depth.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>

#include "halfgrad.h"

using namespace hg;

TEST_CASE("UNet(1, 4, 16) has the hand-counted number of parameters", "[unet]") {
  // DoubleConv(a, b): two bias-free 3x3 convs (9ab + 9b^2) and two BNs (2b each).
  auto double_conv = [](int64_t a, int64_t b) { return 9 * a * b + 9 * b * b + 4 * b; };
  int64_t want = double_conv(1, 16);                                       // inc
  for (int64_t c : {32, 64, 128, 256}) want += double_conv(c / 2, c);      // down1..4
  for (int64_t c : {256, 128, 64, 32}) want += c * 4 * (c / 2) + c / 2     // up1..4: 2x2 transposed conv + bias
                                              + double_conv(c, c / 2);
  want += 16 * 4 + 4;                                                      // outc
  CHECK(want == 1942340);
  UNet net(1, 4, 16);
  CHECK(net.parameter_count() == want);
  // Bilinear swaps each 2x2 transposed conv (4 c c/2 weights) for a 1x1 conv (c c/2).
  CHECK(UNet(1, 4, 16, 4, UpMode::bilinear).parameter_count() == want - 3 * (256 * 128 + 128 * 64 + 64 * 32 + 32 * 16));
}

TEST_CASE("UNet children and parameter names follow the diagram", "[unet]") {
  UNet net(3, 2, 8, 3);
  std::vector<std::string> children;
  for (auto& [n, c] : net.named_children()) children.push_back(n + ":" + c->type_name());
  CHECK(children == std::vector<std::string>{"inc:DoubleConv", "down1:Down", "down2:Down", "down3:Down", "up1:Up",
                                             "up2:Up", "up3:Up", "outc:Conv2d"});
  std::map<std::string, Shape> shapes;
  for (auto& [n, t] : net.named_parameters()) shapes[n] = t.shape();
  CHECK(shapes.at("inc.conv1.weight") == Shape{8, 3, 3, 3});
  CHECK(shapes.at("down2.conv1.weight") == Shape{32, 3, 3, 16});
  CHECK(shapes.at("down3.bn2.bias") == Shape{64});
  CHECK(shapes.at("up1.up.weight") == Shape{64, 2, 2, 32});  // [C_in, R, S, C_out]
  CHECK(shapes.at("up1.up.bias") == Shape{32});
  CHECK(shapes.at("up1.conv1.weight") == Shape{32, 3, 3, 64});
  CHECK(shapes.at("up3.conv2.weight") == Shape{8, 3, 3, 8});
  CHECK(shapes.at("outc.weight") == Shape{2, 1, 1, 8});
  CHECK_FALSE(shapes.count("inc.conv1.bias"));
  CHECK(net.state_dict().count("up2.bn1.running_var"));
  CHECK(net.up[0]->up->type_name() == "ConvTranspose2d");
  CHECK(UNet(3, 2, 8, 3, UpMode::bilinear).up[0]->up->type_name() == "Conv2d");
}

TEST_CASE("An Up block refuses the single-input forward it would inherit from DoubleConv", "[unet]") {
  UNet net(3, 2, 8, 2);
  Tensor x = zeros({1, 4, 4, 16});  // a valid input of up1's DoubleConv (16 channels)
  CHECK_THROWS_WITH(net.up[0]->forward(x), Catch::Contains("has no single-input forward") && Catch::Contains("up1"));
}

TEST_CASE("UNet forward gives NHWC logits and backward reaches every parameter", "[unet]") {
  struct Case {
    int64_t width, n, h, w, depth;
    UpMode mode;
  };
  for (Case c : {Case{4, 2, 32, 48, 4, UpMode::transposed}, Case{8, 1, 64, 32, 3, UpMode::bilinear},
                 Case{16, 1, 96, 96, 4, UpMode::transposed}}) {
    INFO("width " << c.width << ", input " << c.h << "x" << c.w << ", depth " << c.depth);
    manual_seed(21);
    UNet net(3, 5, c.width, c.depth, c.mode);
    Generator g(22);
    Tensor x = normal({c.n, c.h, c.w, 3}, 0, 1, {}, &g);
    Tensor logits = net(x);
    CHECK(logits.shape() == Shape{c.n, c.h, c.w, 5});
    CHECK(logits.dtype() == f32);
    Tensor target = randint(0, 5, {c.n, c.h, c.w}, {i64}, &g);
    Tensor loss = cross_entropy(logits, target);
    CHECK(std::isfinite(loss.item<double>()));
    loss.backward();
    for (auto& [name, p] : net.named_parameters()) {
      INFO(name);
      REQUIRE(p.grad().defined());
      CHECK(p.grad().shape() == p.shape());
      auto g = p.grad().to_vector<double>();
      CHECK(std::all_of(g.begin(), g.end(), [](double v) { return std::isfinite(v); }));
      CHECK(max(abs(p.grad())).item<double>() > 0);
    }
    // Training-mode BN counted the batch; eval mode gives the same shape from running stats.
    CHECK(net.inc->bn1->num_batches_tracked.item<int64_t>() == 1);
    net.eval();
    NoGrad ng;
    CHECK(net(x).shape() == logits.shape());
  }
}

TEST_CASE("UNet rejects sizes not divisible by 2^depth and names the nearest valid ones", "[unet][errors]") {
  UNet net(1, 2, 4);
  CHECK_THROWS_WITH(net(zeros({1, 100, 96, 1})), Catch::Contains("divisible by 2^depth = 16") &&
                                                       Catch::Contains("H = 100") && Catch::Contains("H 96 or 112"));
  CHECK_THROWS_WITH(net(zeros({1, 8, 32, 1})), Catch::Contains("H 16, W 32"));
  CHECK_THROWS_WITH(net(zeros({1, 32, 32, 3})), Catch::Contains("[N, H, W, 1]") && Catch::Contains("[1, 32, 32, 3]"));
  CHECK_THROWS_WITH(UNet(1, 2, 4, 0), Catch::Contains("depth must be in [1, 16]"));
  CHECK_THROWS_WITH(UNet(1, 0, 4), Catch::Contains("classes") && Catch::Contains("positive"));
}

TEST_CASE("UNet converted to bf16 runs in bf16 and its BN counters stay integers", "[unet]") {
  manual_seed(23);
  UNet net(3, 2, 4, 2);
  net.to(bf16);
  CHECK(net.down[0]->bn1->running_mean.dtype() == bf16);
  CHECK(net.down[0]->bn1->num_batches_tracked.dtype() == i64);
  Generator g(24);
  Tensor x = normal({2, 16, 16, 3}, 0, 1, {bf16}, &g);
  Tensor logits = net(x);
  CHECK(logits.dtype() == bf16);
  CHECK(logits.shape() == Shape{2, 16, 16, 2});
  sum(logits.to(f32)).backward();
  for (auto& [name, p] : net.named_parameters()) {
    INFO(name);
    REQUIRE(p.grad().defined());
    CHECK(p.grad().dtype() == bf16);
  }
}
