// segbench with a poisoned batch (one NaN pixel, through Config::poison_step): fp32 has
// no scaler to skip the step, so the run stops with the step in its stop reason, the NaN
// update is not applied and the report is still written; amp skips the step and goes on.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "bench/segbench/diagnosis.h"
#include "bench/segbench/report.h"
#include "bench/segbench/train.h"
#include "tests/temp_dir.h"

using namespace hg;
using namespace hg::segbench;
using hg::test::TempDir;

namespace {

constexpr int64_t kPoison = 3;

// Quick-profile sized and smaller; the periodic evaluation after step 2 (3 steps done)
// uses every validation image, as the final one does, so the two can be compared.
Config small_config() {
  Config c;
  c.profile = "quick";
  c.steps = 6;
  c.batch = 4;
  c.size = 32;
  c.width = 4;
  c.growth_interval = 10;
  c.val_images = 8;
  c.eval_every = kPoison;
  c.eval_subset = c.val_images;
  c.progress = false;
  c.lr = 1e-2;
  c.poison_step = kPoison;
  return c;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

TEST_CASE("segbench fp32: a NaN in a batch stops the run at that step, unapplied, with its report written",
          "[segbench][bad_data]") {
  const Config cfg = small_config();
  const ValidationSet val = make_validation_set(cfg);
  const RunResult r = train_run(cfg, "fp32", Device::cpu(), val, {});

  CHECK(r.stopped_early);
  CHECK(r.steps_done == kPoison + 1);
  INFO("stop reason: " << r.stop_reason);
  CHECK(r.stop_reason.find("at step " + std::to_string(kPoison)) != std::string::npos);
  REQUIRE(r.first_nonfinite_step.has_value());
  CHECK(*r.first_nonfinite_step == kPoison);
  REQUIRE(r.curves.loss.size() == static_cast<size_t>(kPoison + 1));
  for (int64_t s = 0; s < kPoison; ++s) CHECK(std::isfinite(r.curves.loss[static_cast<size_t>(s)]));
  CHECK(std::isnan(r.curves.loss.back()));
  CHECK(std::isfinite(r.final_loss));
  // The final evaluation sees the weights of the periodic one after step kPoison - 1:
  // the poisoned step changed nothing (NaN weights would predict something else).
  REQUIRE(r.curves.eval_dice.size() == 2);
  CHECK(r.curves.eval_step == std::vector<int64_t>{kPoison, kPoison + 1});
  CHECK(r.curves.eval_dice[0] > 0.0);
  CHECK(r.curves.eval_dice[1] == r.curves.eval_dice[0]);
  CHECK(r.val_dice_mean_fg == r.curves.eval_dice[0]);

  Report report;
  report.config = cfg;
  for (const Batch& b : val.batches)  // as segbench's main does, for samples.png
    for (int64_t i = 0; i < b.image.size(0) && report.sample_images.size() < 2; ++i) {
      report.sample_images.push_back(b.image.select(0, i).to_vector<float>());
      report.sample_truths.push_back(b.label.select(0, i).to_vector<int64_t>());
    }
  report.runs.push_back(r);
  diagnose(report);
  TempDir dir;
  write_report(report, dir.path);
  for (const char* name : {"report.json", "report.md", "report.html", "metrics.csv", "samples.png"}) {
    INFO(name);
    CHECK(std::filesystem::file_size(dir / name) > 0);
  }
  std::string json = read_file(dir / "report.json");
  std::erase(json, ' ');
  CHECK(json.find("\"stopped_early\":true") != std::string::npos);
  CHECK(json.find("atstep" + std::to_string(kPoison)) != std::string::npos);
  // Strict parsing where Python is at hand (CI installs it): NaN losses must not leak
  // into the JSON as bare NaN tokens.
  if (std::system("python3 -c 'import json' >/dev/null 2>&1") == 0) {
    const std::string cmd = "python3 -c \"import json,sys; json.load(open(sys.argv[1]), parse_constant=lambda c: "
                            "sys.exit('bare ' + c))\" '" + (dir / "report.json") + "'";
    CHECK(std::system(cmd.c_str()) == 0);
  }
}

TEST_CASE("segbench amp: a NaN in a batch is a skipped step that names parameters, and training goes on",
          "[segbench][bad_data]") {
  const Config cfg = small_config();
  const ValidationSet val = make_validation_set(cfg);
  const RunResult r = train_run(cfg, "amp", Device::cpu(), val, {});

  CHECK_FALSE(r.stopped_early);
  CHECK(r.steps_done == cfg.steps);
  CHECK(std::find(r.skipped_steps.begin(), r.skipped_steps.end(), kPoison) != r.skipped_steps.end());
  const auto at = std::find_if(r.nonfinite_params.begin(), r.nonfinite_params.end(),
                               [](const auto& e) { return e.first == kPoison; });
  REQUIRE(at != r.nonfinite_params.end());
  CHECK_FALSE(at->second.empty());
  for (size_t s = kPoison + 1; s < r.curves.loss.size(); ++s) CHECK(std::isfinite(r.curves.loss[s]));
  CHECK(std::isfinite(r.val_dice_mean_fg));
}
