// segbench's checks before training: writable, empty output folders and a memory
// estimate against MemAvailable (a run too big for the machine used to be OOM-killed
// silently, after minutes).
#include "bench/segbench/preflight.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "framework/error.h"

namespace hg::segbench {

namespace fs = std::filesystem;

void prepare_output_dir(const std::string& dir, const char* flag, bool may_hold_files) {
  HG_CHECK(!dir.empty(), flag, ": the folder name is empty");
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);
  if (fs::exists(st)) {
    HG_CHECK(fs::is_directory(st), flag, ": '", dir, "' exists and is not a folder");
    const bool empty = fs::is_empty(dir, ec);
    HG_CHECK(!ec, flag, ": cannot list '", dir, "': ", ec.message());
    HG_CHECK(empty || may_hold_files, flag, ": '", dir,
             "' already holds files; give an empty or new folder, or --overwrite to write into it");
  } else {
    fs::create_directories(dir, ec);
    HG_CHECK(!ec, flag, ": cannot create the folder '", dir, "': ", ec.message());
  }
  // Permissions alone do not tell (read-only mounts, root, ACLs): write a file and remove it.
  const std::string probe = dir + "/.segbench-probe." + std::to_string(::getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  const int err = errno;
  HG_CHECK(fd >= 0, flag, ": cannot write into '", dir, "': ", std::strerror(err));
  ::close(fd);
  ::unlink(probe.c_str());
}

std::string default_out_dir() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", std::localtime(&t));
  const std::string base = std::string("runs/") + buf;
  std::error_code ec;
  std::string dir = base;
  for (int n = 2; fs::exists(dir, ec); ++n) dir = base + "-" + std::to_string(n);
  return dir;
}

int64_t estimate_run_bytes(const Config& cfg) {
  const double pixels = static_cast<double>(cfg.size) * static_cast<double>(cfg.size);
  // Activations kept for backward, per image pixel and unit of width, measured at its
  // peak over the modes (bytes; see docs/benchmark.md, "memory check").
  constexpr double kActivationBytes = 128;
  const double activations = kActivationBytes * pixels * static_cast<double>(cfg.width) * static_cast<double>(cfg.batch);
  // An f32 image and an i64 label per pixel: the validation set, and two batches in flight.
  const double data = 12.0 * pixels * static_cast<double>(cfg.val_images + 2 * cfg.batch);
  // Weights ~ 2 * 9 * width^2 * 4^depth, with Adam's two moments, gradients and f16 copies.
  const double width = static_cast<double>(cfg.width);
  const double weights = 6 * 4.0 * 18 * width * width * 256;
  const double total = activations + data + weights + 64e6;  // + the process itself
  return total >= 9e18 ? INT64_MAX : static_cast<int64_t>(total);
}

int64_t available_memory_bytes() {
  std::ifstream f("/proc/meminfo");
  for (std::string line; std::getline(f, line);) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream in(line.substr(13));
    int64_t kib = -1;
    in >> kib;
    return kib >= 0 ? kib * 1024 : -1;
  }
  return -1;
}

void check_memory(const Config& cfg, int64_t available) {
  const int64_t need = estimate_run_bytes(cfg);
  if (available < 0 || need <= available) return;
  const auto gib = [](int64_t b) { return detail::concat(std::round(static_cast<double>(b) / 0x1p30 * 100) / 100, " GiB"); };
  throw Error(detail::concat("this run needs about ", gib(need), " of memory (", cfg.batch, " images of ", cfg.size, "x",
                             cfg.size, ", U-Net width ", cfg.width, ", ", cfg.val_images,
                             " validation images) but the machine has ", gib(available),
                             " available (MemAvailable); lower --batch, --size, --width or --val-images"));
}

}  // namespace hg::segbench
