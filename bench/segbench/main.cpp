// segbench, halfgrad's main job: trains the same U-Net on the same procedural data in
// each precision mode and writes a report comparing quality, speed, memory and numerics.
#include <unistd.h>

#include <Eigen/Core>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <new>
#include <string>
#include <vector>

#include "framework/serialize/atomic_write.h"
#include "bench/segbench/compare_run.h"
#include "bench/segbench/diagnosis.h"
#include "bench/segbench/distributed.h"
#include "bench/segbench/flags.h"
#include "bench/segbench/output_folder.h"
#include "bench/segbench/preflight.h"
#include "bench/segbench/report.h"
#include "bench/segbench/tensorboard_log.h"
#include "bench/segbench/train.h"
#include "framework/cpu/threads.h"

using namespace hg;
using namespace hg::segbench;

namespace {

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

// A progress bar on a terminal; a line every ~10% otherwise.
ProgressFn make_progress(const std::string& name, bool enabled) {
  const bool tty = isatty(STDOUT_FILENO);
  auto last_dice = std::make_shared<double>(NAN);
  const auto start = std::chrono::steady_clock::now();
  return [=](int64_t step, int64_t steps, double loss, double dice, double scale, double ips) {
    if (!enabled) return;
    if (std::isfinite(dice)) *last_dice = dice;
    const int64_t done = step + 1;
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double eta = elapsed * static_cast<double>(steps - done) / static_cast<double>(done);
    const bool report = tty || done == steps || done % std::max<int64_t>(1, steps / 10) == 0;
    if (!report) return;
    char line[256];
    const int width = 24, filled = static_cast<int>(width * done / steps);
    std::string bar = std::string(static_cast<size_t>(filled), '#') + std::string(static_cast<size_t>(width - filled), '.');
    std::snprintf(line, sizeof line, "%-10s [%s] %4lld/%lld loss %.4f dice %.3f scale %-7g %.1f img/s ETA %.0fs",
                  name.c_str(), bar.c_str(), static_cast<long long>(done), static_cast<long long>(steps), loss,
                  *last_dice, scale, ips, eta);
    if (tty) std::printf("\r%s%s", line, done == steps ? "\n" : "");
    else std::printf("%s\n", line);
    std::fflush(stdout);
  };
}

// Everything after the command line; any fault is an exception main turns into exit 2,
// keeping in `report` and `out` what a failure should not lose.
int run(Config& cfg, bool overwrite, Report& report, OutputFolder& out) {
  const Device device = Device::parse(cfg.device);
  if (cfg.threads > 0) {
    set_num_threads(cfg.threads);
    Eigen::setNbThreads(cfg.threads);
  }
  // Before anything trains: a refusal here costs seconds, not a finished mode's work.
  if (device.is_cpu()) check_memory(cfg, available_memory_bytes());
  if (cfg.out.empty()) cfg.out = default_out_dir();
  out.prepare(cfg.out, overwrite);  // from here on a failure goes through keep_what_was_measured
  if (!cfg.dump.empty()) prepare_output_dir(cfg.dump, "--dump", true);

  report.config = cfg;
  report.machine.cpu_model = cpu_model();
  report.machine.threads = num_threads();
  report.machine.gpu = device.is_cuda() ? device.str() : "";
  report.machine.compiler = std::string("g++ ") + __VERSION__;
#ifdef NDEBUG
  report.machine.build_type = "release";
#else
  report.machine.build_type = "debug";
#endif
  report.machine.ranks = num_ranks();
  std::printf("segbench: profile %s, %lld steps x %lld images of %lldx%lld, U-Net width %lld, on %s (%d threads)\n",
              cfg.profile.c_str(), static_cast<long long>(cfg.steps), static_cast<long long>(cfg.batch),
              static_cast<long long>(cfg.size), static_cast<long long>(cfg.size), static_cast<long long>(cfg.width),
              device.str().c_str(), report.machine.threads);
  if (device.is_cpu())
    std::printf("note: on the CPU, f16/bf16 arithmetic is emulated in software; its speed says nothing about a GPU\n");
  if (!cfg.compare.empty()) {
    const amp::Comparison c = compare_run(cfg, cfg.compare, device);
    report.compare_text = c.table();
    std::printf("\n%s\n", report.compare_text.c_str());
    const std::string json = c.json() + "\n";
    write_file_atomically(cfg.out + "/compare.txt", {{report.compare_text.data(), report.compare_text.size()}});
    write_file_atomically(cfg.out + "/compare.json", {{json.data(), json.size()}});
    if (cfg.compare_only) {
      std::printf("comparison: %s/compare.txt (also compare.json)\n", cfg.out.c_str());
      return 0;
    }
  }
  const ValidationSet val = make_validation_set(cfg);
  for (const Batch& b : val.batches) {
    for (int64_t i = 0; i < b.image.size(0) && report.sample_images.size() < 4; ++i) {
      report.sample_images.push_back(b.image.select(0, i).to_vector<float>());
      report.sample_truths.push_back(b.label.select(0, i).to_vector<int64_t>());
    }
  }
  for (const std::string& p : cfg.precisions) {
    report.runs.push_back(train_run(cfg, p, device, val, make_progress(p, cfg.progress)));
    RunResult& r = report.runs.back();
    if (cfg.monitor_every > 0) {
      write_file_atomically(cfg.out + "/numerics-" + p + ".jsonl", {{r.numerics_jsonl.data(), r.numerics_jsonl.size()}});
      r.numerics_jsonl.clear();  // written; the report does not need it
    }
    write_tensorboard(r, cfg.out + "/tb/" + p);
    std::printf("%-10s val Dice %.3f  (%.1f s, %.1f img/s%s)\n", p.c_str(), r.val_dice_mean_fg, r.total_seconds,
                r.images_per_s, r.stopped_early ? ", stopped early" : "");
  }
  diagnose(report);
  write_report(report, cfg.out);
  std::printf("\n%s\n", summary_table(report).c_str());
  for (const RunResult& r : report.runs)
    if (!r.diagnosis.empty()) std::printf("%s: %s\n", r.precision.c_str(), r.diagnosis.c_str());
  std::printf("\nreport: %s/report.html (also report.md, report.json, metrics.csv, samples.png)\n", cfg.out.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Flags flags = parse_flags(std::vector<std::string>(argv, argv + argc));
  if (!flags.run) {
    std::fprintf(flags.exit_code == 0 ? stdout : stderr, "%s%s\n", flags.exit_code == 0 ? "" : "segbench: ",
                 flags.message.c_str());
    return flags.exit_code;
  }
  Config cfg = flags.config;
  Report report;     // the modes measured so far
  OutputFolder out;  // prepared once the checks before training passed
  // Exit 2 with a message for every failure: the library throws hg::Error, and what else
  // escapes (std::filesystem_error, std::bad_alloc) must not become an abort either.
  std::string error;
  try {
    prepare_distributed(cfg);  // under mpirun: join the job, split cores, rank 0 reports
    return run(cfg, flags.overwrite, report, out);
  } catch (const Error& e) {
    error = e.what();
  } catch (const std::bad_alloc&) {
    error = "out of memory; lower --batch, --size or --width";
  } catch (const std::exception& e) {
    error = e.what();
  } catch (...) {
    error = "stopped by an unknown exception";
  }
  std::fprintf(stderr, "segbench: %s\n", error.c_str());
  if (!report.runs.empty()) {
    try {
      diagnose(report);  // the summary's steps to target
      std::printf("\nmeasured before the failure:\n\n%s\n", summary_table(report).c_str());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "segbench: the summary of the measured modes failed too: %s\n", e.what());
    }
    std::fflush(stdout);
  }
  // Other ranks write into a scratch folder of their own, removed as they end.
  const std::string kept = is_report_rank() ? keep_what_was_measured(report, error, out) : "";
  if (!kept.empty()) std::fprintf(stderr, "segbench: %s\n", kept.c_str());
  return end_rank(2);
}
