// libFuzzer target: segbench's command line (bench/segbench/flags.cpp) without training.
// The input is split at NUL or newline bytes into arguments. parse_flags never throws;
// a command line it refuses has a message and exit code 2 (then counted as a refusal),
// one it accepts has every value inside the ranges --help promises.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "bench/segbench/flags.h"
#include "tests/fuzz/libfuzzer/target.h"

using namespace hg::segbench;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> args = {"segbench"};
  std::string arg;
  for (size_t i = 0; i < size && args.size() < 64; ++i) {
    const char c = static_cast<char>(data[i]);
    if (c == '\0' || c == '\n') {
      args.push_back(arg);
      arg.clear();
    } else {
      arg += c;
    }
  }
  if (!arg.empty()) args.push_back(arg);
  hg::fuzz::expect_clean("fuzz_segbench_flags", [&] {
    const Flags f = parse_flags(args);
    auto require = [](bool ok, const char* what) { hg::fuzz::require(ok, "fuzz_segbench_flags", what); };
    if (!f.run) {
      require(f.exit_code == 0 || f.exit_code == 2, "exit code 0 or 2");
      require(!f.message.empty(), "a refusal without a message");
      if (f.exit_code == 2) throw hg::Error(f.message);  // counted as a clean refusal
      return;
    }
    const Config& c = f.config;
    require(c.steps >= 1 && c.batch >= 1 && c.width >= 1, "positive steps, batch and width");
    require(c.size >= 32 && c.size % 16 == 0, "size a multiple of 16, >= 32");
    require(c.threads >= 0 && c.threads <= 1024, "threads in [0, 1024]");
    require(c.eval_every >= 0 && c.monitor_every >= 0 && c.fallback_strikes >= 0, "non-negative intervals");
    require(c.growth_interval >= 1 && c.val_images >= 1, "positive growth interval and validation images");
    require(c.lr > 0 && std::isfinite(c.lr), "a finite positive lr");
    require(!c.precisions.empty(), "at least one precision");
    require(c.profile == "quick" || c.profile == "cpu" || c.profile == "gpu", "a known profile");
    require(!c.compare_only || !c.compare.empty(), "--compare-only with --compare");
  });
  return 0;
}
