// What the cuda backend tells a person about the kernels it chose: slow paths are said
// once per reason on stderr (an unaligned or strided operand, a Hopper decline), and a
// KernelLog collects the names of the kernels launched, so a benchmark row can say which
// kernel actually ran rather than which one was asked for.
#pragma once
#include <string>
#include <vector>

namespace hg::cuda {

// Prints "halfgrad: <where>: slow path: <reason>" on stderr the first time this (where,
// reason) pair is seen in the process, and returns whether it was the first time.
bool note_slow_path(const std::string& where, const std::string& reason);
// Every pair noted so far, as "<where>: <reason>", in the order first seen.
std::vector<std::string> slow_paths_noted();

// Collects the names of the kernels this thread launches while it lives (the innermost
// log when nested). Names come from LaunchConfig::name ("kernel" when unnamed).
class KernelLog {
 public:
  KernelLog();
  ~KernelLog();
  KernelLog(const KernelLog&) = delete;
  KernelLog& operator=(const KernelLog&) = delete;
  const std::vector<std::string>& names() const { return names_; }
  // The distinct names in launch order, joined by " + " ("" when nothing was launched).
  std::string summary() const;

 private:
  friend void log_kernel_launch(const char* name);
  std::vector<std::string> names_;
  KernelLog* outer_;
};

// "<name> (<variant>)" with static storage, for a LaunchConfig::name that tells the
// variants of one kernel apart (the same pointer for the same pair).
const char* kernel_label(const char* name, const std::string& variant);

// Called by every launch once its configuration passed check_launch.
void log_kernel_launch(const char* name);

}  // namespace hg::cuda
