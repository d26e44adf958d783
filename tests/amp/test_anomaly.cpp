// Anomaly detection names the first bad op, in forward and in backward, and says why.
#include <catch2/catch.hpp>

#include "halfgrad.h"
#include "tests/amp/debug_models.h"

using namespace hg;

TEST_CASE("DetectAnomaly names the first op whose f16 output overflows in forward", "[amp][anomaly]") {
  manual_seed(21);
  test::OverflowNet model(1e4);
  Tensor x = randn({8, 4}, {f32});
  amp::DetectAnomaly guard;
  amp::Autocast ac(f16);
  try {
    model(x);
    FAIL("no NumericsError");
  } catch (const NumericsError& e) {
    const std::string msg = e.what();
    CHECK_THAT(msg, Catch::StartsWith("forward of ") && Catch::Contains(" in big produced ") &&
                        Catch::Contains(" inf") && Catch::Contains("in f16") &&
                        Catch::Contains("the inputs are finite, so the result exceeds the f16 max 65504"));
  }
}

TEST_CASE("DetectAnomaly names the backward op whose f16 gradient overflows", "[amp][anomaly]") {
  nn::Linear lin(16, 16, false);
  fill_(lin.weight, 30.0);
  lin.to(f16);
  Tensor a = ones({4, 16}, {f16}).set_requires_grad(true);
  amp::DetectAnomaly guard;
  Tensor y = lin(a);  // 480 per element: fine in f16
  // d loss / d y = 1000; d loss / d a = 1000 * 30 * 16 = 480000 > 65504.
  Tensor loss = mul(sum(y.to(f32)), 1000.0);
  try {
    loss.backward();
    FAIL("no NumericsError");
  } catch (const NumericsError& e) {
    const std::string msg = e.what();
    CHECK_THAT(msg, Catch::StartsWith("backward of ") && Catch::Contains("produced 64 inf in f16") &&
                        Catch::Contains("the gradient for input 0") && Catch::Contains("incoming gradient f16") &&
                        Catch::Contains("forward inputs amax"));
  }
}

TEST_CASE("DetectAnomaly keeps the forward statistics beside the graph, only while it is on", "[amp][anomaly]") {
  nn::Linear lin(16, 16, false);
  fill_(lin.weight, 30.0);
  lin.to(f16);
  Tensor a = ones({4, 16}, {f16}).set_requires_grad(true);
  auto overflow_message = [&](const Tensor& y) {
    try {
      mul(sum(y.to(f32)), 1000.0).backward();
    } catch (const NumericsError& e) {
      return std::string(e.what());
    }
    return std::string("no NumericsError");
  };
  Tensor outside = lin(a);  // recorded with detection off: nothing kept for it
  amp::DetectAnomaly guard;
  for (int i = 0; i < 3000; ++i) sum(lin(a));  // graphs freed at once: their entries are dropped, addresses reused
  CHECK_THAT(overflow_message(lin(a)), Catch::Contains("produced 64 inf in f16") && Catch::Contains("forward inputs amax 1 30"));
  const std::string msg = overflow_message(outside);
  CHECK_THAT(msg, Catch::Contains("produced 64 inf in f16"));
  CHECK_THAT(msg, !Catch::Contains("forward inputs amax"));
}

TEST_CASE("DetectAnomaly blames upstream data, checks the f16 range on request, and is quiet on healthy runs",
          "[amp][anomaly]") {
  manual_seed(3);
  test::OverflowNet healthy(1.0);
  Tensor x = randn({8, 4}, {f32});
  {
    amp::DetectAnomaly guard;
    CHECK_NOTHROW(sum(healthy(x)).backward());
  }
  CHECK_FALSE(amp::DetectAnomaly::active());

  Tensor bad = x.clone();
  fill_(bad.narrow(0, 2, 1), std::nan(""));
  {
    amp::DetectAnomaly guard;
    CHECK_THROWS_WITH(healthy(bad), Catch::Contains("NaN") && Catch::Contains("an input was already non-finite"));
  }

  test::OverflowNet big(1e4);
  {
    amp::DetectAnomaly guard;
    CHECK_NOTHROW(big(mul(x, 3.0)));  // f32 holds ~1e5 without trouble
  }
  {
    amp::DetectAnomaly guard({.check_f16_range = true});
    CHECK_THROWS_WITH(big(mul(x, 3.0)),
                      Catch::Contains(" in big produced ") && Catch::Contains("values that overflow f16 (|x| >= 65520 rounds to inf)"));
  }
}
