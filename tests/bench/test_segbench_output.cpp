// What a failed segbench run leaves in its --out folder (issue 29, item 7): the report of
// the modes it measured and error.txt, or, when that cannot be written either (a full
// disk, simulated by a folder where report.json must go), no folder of its own making.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "bench/segbench/output_folder.h"
#include "tests/temp_dir.h"

using namespace hg::segbench;
namespace fs = std::filesystem;

namespace {

// A report of one finished fp32 run out of the two asked for.
Report half_done() {
  Report rep;
  rep.config.precisions = {"fp32", "amp"};
  rep.config.device = "cpu";
  rep.config.steps = 4;
  rep.config.batch = 2;
  rep.config.size = 32;
  rep.config.width = 4;
  RunResult r;
  r.precision = "fp32";
  r.device = "cpu";
  r.steps_done = 4;
  r.final_loss = 0.5;
  r.val_dice = {0.9, 0.5, 0.4, 0.3};
  r.val_iou = {0.8, 0.4, 0.3, 0.2};
  r.val_dice_mean_fg = 0.4;
  for (int64_t s = 0; s < 4; ++s) {
    r.curves.step.push_back(s);
    r.curves.seconds.push_back(0.1 * static_cast<double>(s + 1));
    r.curves.loss.push_back(1.0 / static_cast<double>(s + 1));
    r.curves.scale.push_back(1.0);
    r.curves.lr.push_back(1e-3);
  }
  rep.runs.push_back(r);
  return rep;
}

std::string read(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

TEST_CASE("a failed segbench run writes the report of the modes it measured, and says why", "[segbench][output]") {
  hg::test::TempDir tmp;
  OutputFolder out;
  out.prepare(tmp / "run", false);
  CHECK(out.created());
  Report rep = half_done();
  const std::string said = keep_what_was_measured(rep, "out of memory; lower --batch", out);
  CHECK_THAT(said, Catch::Contains("modes measured before the failure (fp32)") && Catch::Contains("/report.html") &&
                       Catch::Contains("not measured: amp"));
  CHECK(fs::exists(tmp / "run/report.html"));
  CHECK(fs::exists(tmp / "run/report.json"));
  const std::string error = read(tmp / "run/error.txt");
  CHECK_THAT(error, Catch::Contains("out of memory; lower --batch") && Catch::Contains("not measured: amp"));
}

TEST_CASE("a failed segbench run that cannot write removes the folder it made and says so", "[segbench][output]") {
  hg::test::TempDir tmp;
  {
    OutputFolder out;
    out.prepare(tmp / "run", false);
    fs::create_directory(tmp / "run/report.json");  // every write of report.json now fails
    Report rep = half_done();
    const std::string said = keep_what_was_measured(rep, "cannot write tb: No space left on device", out);
    CHECK_THAT(said, Catch::Contains("removed the output folder " + tmp / "run") &&
                         Catch::Contains("its report could not be written either") &&
                         Catch::Contains("the summary above is what was measured"));
    CHECK_FALSE(fs::exists(tmp / "run"));
  }
  {
    // Nothing measured (the first mode failed): nothing to keep.
    OutputFolder out;
    out.prepare(tmp / "empty", false);
    Report rep;
    CHECK_THAT(keep_what_was_measured(rep, "boom", out),
               Catch::Contains("removed the output folder") && Catch::Contains("nothing was measured"));
    CHECK_FALSE(fs::exists(tmp / "empty"));
  }
  {
    // A folder that was there before (--overwrite) is never removed.
    fs::create_directory(tmp / "old");
    std::ofstream(tmp / "old/notes.txt") << "mine";
    OutputFolder out;
    out.prepare(tmp / "old", true);
    CHECK_FALSE(out.created());
    fs::create_directory(tmp / "old/report.json");
    Report rep = half_done();
    CHECK_THAT(keep_what_was_measured(rep, "boom", out),
               Catch::Contains("was there before this run and is left as it was"));
    CHECK(read(tmp / "old/notes.txt") == "mine");
  }
  Report rep = half_done();
  CHECK(keep_what_was_measured(rep, "refused before any folder", OutputFolder()).empty());
}
