// segbench's command line and its checks before training (issue 17, items 5 and 6):
// out-of-range integers refused (not clamped), 0 meaning "only at the end", bounded
// threads, unwritable or non-empty output folders and runs too big for the memory.
#include <catch2/catch.hpp>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "bench/segbench/flags.h"
#include "bench/segbench/preflight.h"
#include "framework/error.h"
#include "tests/temp_dir.h"

using namespace hg;
using namespace hg::segbench;

namespace {
Flags parse(std::vector<std::string> args) {
  args.insert(args.begin(), "segbench");
  return parse_flags(args);
}

void refused(const std::vector<std::string>& args, const std::string& says) {
  INFO((args.size() > 1 ? args[0] + " " + args[1] : args[0]));
  const Flags f = parse(args);
  CHECK_FALSE(f.run);
  CHECK(f.exit_code == 2);
  CHECK_THAT(f.message, Catch::Contains(says));
}
}  // namespace

TEST_CASE("segbench refuses integers out of range instead of clamping them", "[segbench][flags]") {
  refused({"--seed", "-1"}, "--seed: '-1' is not an integer from 0 to 18446744073709551615");
  refused({"--seed", "18446744073709551616"}, "--seed");
  refused({"--steps", "1e20"}, "--steps: '1e20' is not an integer");
  refused({"--steps", "99999999999999999999999"}, "--steps");
  refused({"--steps", "0"}, "from 1 to");
  refused({"--steps", "0x10"}, "--steps");
  refused({"--eval-every", "-5"}, "--eval-every");
  refused({"--monitor-every", "-1"}, "--monitor-every");
  refused({"--threads", "100000"}, "--threads: '100000' is not an integer from 0 to 1024");
  refused({"--size", "40"}, "multiple of 16");
  refused({"--size", "16"}, "from 32");
  refused({"--lr", "nan"}, "--lr");
  refused({"--lr", "inf"}, "--lr");
  refused({"--device", "cuda:99999999999999999999"}, "index is over");
  refused({"--device", "tpu"}, "invalid device");
  refused({"--precision", "fp8"}, "fp8");
  refused({"--precision", ","}, "at least one");
  refused({"--compare-only"}, "--compare-only needs --compare");
  refused({"--bogus"}, "--bogus");
  refused({"--steps"}, "--steps");
}

TEST_CASE("segbench names the flag that lacks its value and refuses empty folder names", "[segbench][flags]") {
  // CLI11 alone said "The following argument was not expected: fp32".
  refused({"--steps", "--precision", "fp32"}, "--steps needs a value (INT) but is followed by the flag --precision");
  refused({"--out", "--overwrite"}, "--out needs a value");
  refused({"--precision", "--ablations"}, "--precision needs a value");
  // Values that start with '-' but are no flag of ours still reach their own checks.
  refused({"--lr", "-1"}, "--lr: the learning rate must be finite and > 0");
  refused({"--seed", "--7"}, "--seed");
  CHECK(parse({"--steps=5", "--precision", "fp32"}).run);
  CHECK(parse({"--no-progress", "--ablations", "--overwrite", "--precision", "fp32"}).run);  // flags take no value
  CHECK(parse({"--steps", "5", "--precision=fp32"}).config.steps == 5);
  // An empty --out used to become runs/<time> without a word.
  refused({"--out", ""}, "--out: the folder name is empty");
  refused({"--out="}, "--out");  // CLI11: "--out: 1 required TEXT missing"
  refused({"--dump", ""}, "--dump: the folder name is empty");
  CHECK(parse({}).config.out.empty());  // not given: main picks runs/<time>
}

TEST_CASE("segbench's unknown-mode message names the flag and does not repeat the program", "[segbench][flags]") {
  const Flags f = parse({"--precision", "fp32,fp8"});
  CHECK(f.exit_code == 2);
  CHECK_THAT(f.message, Catch::StartsWith("--precision: unknown mode 'fp8'; valid: fp32"));
  CHECK(f.message.find("segbench") == std::string::npos);  // main adds "segbench: " once
}

TEST_CASE("segbench flags: the largest values are kept exactly, profiles fill only what is missing", "[segbench][flags]") {
  Flags f = parse({"--seed", "18446744073709551615", "--profile", "quick", "--steps", "7", "--threads", "1024"});
  REQUIRE(f.run);
  CHECK(f.config.seed == 18446744073709551615ull);
  CHECK(f.config.steps == 7);
  CHECK(f.config.threads == 1024);
  CHECK(f.config.batch == 8);  // the quick profile's
  CHECK(f.config.eval_every == 10);
  // 0 means "only at the end" (eval) and "none" (monitor), as --help says: not the profile's value.
  f = parse({"--profile", "cpu", "--eval-every", "0", "--monitor-every", "0"});
  REQUIRE(f.run);
  CHECK(f.config.eval_every == 0);
  CHECK(f.config.monitor_every == 0);
  CHECK(f.config.steps == 500);
  CHECK(f.config.lr == 1e-2);
  CHECK_FALSE(f.overwrite);
  CHECK(parse({"--overwrite"}).overwrite);
  f = parse({"--help"});
  CHECK_FALSE(f.run);
  CHECK(f.exit_code == 0);
  CHECK_THAT(f.message, Catch::Contains("0: only at the end") && Catch::Contains("--overwrite"));
}

TEST_CASE("segbench's output folder must be creatable, writable and empty unless --overwrite", "[segbench][flags]") {
  test::TempDir tmp;
  std::ofstream(tmp / "file") << "x";
  CHECK_THROWS_WITH(prepare_output_dir(tmp / "file", "--out", false), Catch::Contains("exists and is not a folder"));
  CHECK_THROWS_WITH(prepare_output_dir(tmp / "file/sub", "--out", false), Catch::Contains("cannot create the folder"));
  CHECK_THROWS_WITH(prepare_output_dir("/proc/segbench-out", "--out", false), Catch::Contains("cannot create"));
  CHECK_THROWS_WITH(prepare_output_dir(tmp / std::string(5000, 'a'), "--dump", false), Catch::Contains("--dump"));
  CHECK_THROWS_WITH(prepare_output_dir(tmp.path, "--out", false), Catch::Contains("already holds files") &&
                                                                     Catch::Contains("--overwrite"));
  CHECK_NOTHROW(prepare_output_dir(tmp.path, "--out", true));
  CHECK_NOTHROW(prepare_output_dir(tmp / "new/deeper", "--out", false));
  CHECK(tmp.listing() == std::vector<std::string>{"file", "new"});  // the probe file is gone
  if (::geteuid() != 0) {  // root writes anywhere; the check is for everyone else
    ::mkdir((tmp / "ro").c_str(), 0500);
    CHECK_THROWS_WITH(prepare_output_dir(tmp / "ro", "--out", false), Catch::Contains("cannot write into"));
  }
}

TEST_CASE("segbench refuses a run whose memory estimate exceeds what is available", "[segbench][flags]") {
  Config big = parse({"--size", "8192", "--batch", "64"}).config;
  CHECK(estimate_run_bytes(big) > (int64_t{1} << 40));  // terabytes: no machine here has them
  CHECK_THROWS_WITH(check_memory(big, int64_t{16} << 30),
                    Catch::Contains("needs about") && Catch::Contains("16 GiB") && Catch::Contains("--batch"));
  Config quick = parse({"--profile", "quick"}).config;
  CHECK(estimate_run_bytes(quick) < (int64_t{256} << 20));
  CHECK_NOTHROW(check_memory(quick, int64_t{1} << 30));
  CHECK_NOTHROW(check_memory(big, -1));  // unknown: not refused
  CHECK(available_memory_bytes() > 0);
}
