// segbench --profile-ops: the flag's range, the summary's splits of a real profile, the
// diagnosis computed from hand-made profiles, and the report section's presence.
#include <catch2/catch.hpp>

#include "bench/segbench/flags.h"
#include "bench/segbench/profile_section.h"
#include "bench/segbench/report_parts.h"
#include "halfgrad.h"

using namespace hg;
using namespace hg::segbench;

namespace {
OpProfile made_up(double gemm, double elementwise, double reduced_elementwise, double cast, double other) {
  OpProfile p;
  p.step = 2;
  p.device = "cpu";
  p.gemm_ms = gemm, p.elementwise_ms = elementwise, p.reduced_elementwise_ms = reduced_elementwise;
  p.cast_ms = cast, p.other_kind_ms = other;
  p.op_ms = gemm + elementwise + cast + other;
  p.wall_ms = p.op_ms + 5;
  p.conv_gflop = 2.0, p.conv_ms = gemm;  // 2 GFLOP in gemm ms
  p.peak_gflops = 200;
  return p;
}
}  // namespace

TEST_CASE("segbench --profile-ops takes a step that is run", "[segbench][profile]") {
  const Flags ok = parse_flags({"segbench", "--profile", "quick", "--profile-ops", "2"});
  REQUIRE(ok.run);
  CHECK(ok.config.profile_ops_step == 2);
  CHECK(parse_flags({"segbench", "--profile", "quick"}).config.profile_ops_step == -1);
  const Flags late = parse_flags({"segbench", "--profile", "quick", "--profile-ops", "30"});
  CHECK(late.exit_code == 2);
  CHECK_THAT(late.message, Catch::Contains("--profile-ops: step 30 is not run; steps run from 0 to 29"));
  CHECK(parse_flags({"segbench", "--profile-ops", "-1"}).exit_code == 2);
}

TEST_CASE("op profile diagnosis splits amp's extra time by kind of op", "[segbench][profile]") {
  const OpProfile fp32 = made_up(60, 30, 0, 0, 10);      // 100 ms
  const OpProfile amp = made_up(50, 70, 55, 20, 10);     // 150 ms: +50
  const std::string d = op_profile_diagnosis("amp", amp, &fp32);
  INFO(d);
  // +40 elementwise = 80% of the 50 extra, +20 casts = 40%; GEMM/conv saved 10.
  CHECK_THAT(d, Catch::Contains("amp's ops took 150.0 ms against fp32's 100.0 ms (+50%), so amp is not faster"));
  CHECK_THAT(d, Catch::Contains("Of the 50.0 ms extra, 80% is elementwise ops, 40% is casts."));
  CHECK_THAT(d, Catch::Contains(" Against that, matrix products and convolutions got faster by 10.0 ms."));
  CHECK_THAT(d, Catch::Contains("Elementwise ops in f16/bf16 take 55.0 ms (37% of amp's op time)"));
  // Convolutions: 2 GFLOP in 50 ms = 40 GFLOP/s, 20% of 200; fp32's 2 GFLOP in 60 ms = 33.3.
  CHECK_THAT(d, Catch::Contains("run at 40.0 GFLOP/s against fp32's 33.3 (20% of the measured f32 FMA peak"));

  const OpProfile fast = made_up(20, 30, 10, 5, 10);     // 65 ms: 35 saved
  const std::string f = op_profile_diagnosis("bf16", fast, &fp32);
  INFO(f);
  CHECK_THAT(f, Catch::Contains("so bf16 is faster than fp32 here. Of the 35.0 ms saved, 114% is matrix products"));
  CHECK_THAT(f, Catch::Contains(" Against that, casts got slower by 5.0 ms."));
}

TEST_CASE("op profile summary and report section come from a real profile", "[segbench][profile]") {
  Tensor x = randn({2, 8, 8, 3}).to(f16).set_requires_grad();
  Tensor w = randn({4, 3, 3, 3}).to(f16).set_requires_grad();
  Profiler prof;
  sum(relu(conv2d(x, w)).to(f32)).backward();
  prof.stop();
  const OpProfile p = summarize_op_profile(prof, 7, 3);
  CHECK(p.step == 7);
  CHECK(p.device == "cpu");
  CHECK(p.top.size() == 3);
  CHECK(p.op_ms == Approx(static_cast<double>(prof.op_total_ns()) / 1e6));
  CHECK(p.reduced_ms + p.f32_ms + p.cast_ms + p.other_dtype_ms == Approx(p.op_ms));
  CHECK(p.gemm_ms + p.elementwise_ms + p.cast_ms + p.other_kind_ms == Approx(p.op_ms));
  CHECK(p.cast_ms > 0);
  CHECK(p.reduced_elementwise_ms > 0);  // relu and its gradient in f16
  CHECK(p.conv_gflop == Approx(3 * 2.0 * (2 * 6 * 6 * 4) * 27 / 1e9));

  Report r;
  r.runs.resize(2);
  r.runs[0].precision = "fp32";
  r.runs[1].precision = "amp";
  CHECK(op_profile_markdown(r).empty());
  r.runs[1].op_profile = p;
  const std::string md = markdown_report(r, {});
  CHECK_THAT(md, Catch::Contains("## Op profile") && Catch::Contains("fastest of its profiled steps (step 7)") &&
                     Catch::Contains("| amp |") && Catch::Contains("conv2d_forward"));
  CHECK_THAT(html_report(r, {}), Catch::Contains("<h2>Op profile</h2>"));
}

TEST_CASE("op profile: of the profiled steps the fastest is kept, and every step's op time listed", "[segbench][profile]") {
  const Tensor small = randn({8, 8}), big = randn({192, 192});
  auto profile = [](const Tensor& m) {
    auto prof = std::make_unique<Profiler>(true);
    for (int i = 0; i < 4; ++i) (void)matmul(m, m);
    return prof;
  };
  Config cfg;  // no output folder: no trace written
  std::optional<OpProfile> kept;
  auto p2 = profile(big);
  finish_op_profile(*p2, cfg, "amp", 2, kept);
  auto p3 = profile(small);
  finish_op_profile(*p3, cfg, "amp", 3, kept);
  auto p4 = profile(big);
  finish_op_profile(*p4, cfg, "amp", 4, kept);
  REQUIRE(kept);
  CHECK(kept->step == 3);
  CHECK(kept->profiled_steps == std::vector<int64_t>{2, 3, 4});
  REQUIRE(kept->profiled_op_ms.size() == 3);
  CHECK(kept->op_ms == kept->profiled_op_ms[1]);
  CHECK(kept->profiled_op_ms[1] < kept->profiled_op_ms[0]);
  CHECK(kept->profiled_op_ms[1] < kept->profiled_op_ms[2]);

  Report r;
  r.runs.resize(1);
  r.runs[0].precision = "amp";
  r.runs[0].op_profile = kept;
  const std::string md = markdown_report(r, {});
  CHECK_THAT(md, Catch::Contains("fastest of its profiled steps (steps 2-4)") &&
                     Catch::Contains("Op ms per profiled step: step 2 ") && Catch::Contains(" (kept), step 4 "));
}

TEST_CASE("op profile diagnosis: a difference inside the profiled steps' spread is no difference", "[segbench][profile]") {
  OpProfile fp32 = made_up(60, 30, 0, 0, 10);  // 100 ms
  OpProfile amp = made_up(55, 30, 20, 0, 10);  // 95 ms: -5%
  const std::string plain = op_profile_diagnosis("amp", amp, &fp32);
  INFO(plain);  // no spread recorded: 3% is the floor, 5% is a difference
  CHECK_THAT(plain, Catch::Contains("so amp is faster than fp32 here"));
  fp32.profiled_op_ms = {100, 108, 104};  // 8% spread
  const std::string noisy = op_profile_diagnosis("amp", amp, &fp32);
  INFO(noisy);
  CHECK_THAT(noisy, Catch::Contains("so amp is as fast as fp32 here, within this measurement's noise (8%"));
}
