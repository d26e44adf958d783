// Slow-path notices and the per-thread kernel log (cuda/kernel_log.h).
#include "cuda/kernel_log.h"

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <set>
#include <utility>

#include "framework/profiler_hook.h"

namespace hg::cuda {
namespace {
std::mutex g_mu;
std::set<std::pair<std::string, std::string>> g_seen;
std::vector<std::string> g_order;
thread_local KernelLog* t_log = nullptr;
}  // namespace

bool note_slow_path(const std::string& where, const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (!g_seen.insert({where, reason}).second) return false;
    g_order.push_back(where + ": " + reason);
  }
  std::fprintf(stderr, "halfgrad: %s: slow path: %s\n", where.c_str(), reason.c_str());
  return true;
}

std::vector<std::string> slow_paths_noted() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_order;
}

KernelLog::KernelLog() : outer_(std::exchange(t_log, this)) {}
KernelLog::~KernelLog() { t_log = outer_; }

std::string KernelLog::summary() const {
  std::vector<std::string> distinct;
  for (const std::string& n : names_)
    if (std::find(distinct.begin(), distinct.end(), n) == distinct.end()) distinct.push_back(n);
  std::string out;
  for (const std::string& n : distinct) out += (out.empty() ? "" : " + ") + n;
  return out;
}

const char* kernel_label(const char* name, const std::string& variant) {
  static std::mutex mu;
  static auto* labels = new std::set<std::string>();  // never freed: labels outlive every log
  std::lock_guard<std::mutex> lock(mu);
  return labels->insert(std::string(name ? name : "kernel") + " (" + variant + ")").first->c_str();
}

void log_kernel_launch(const char* name) {
  if (t_log) t_log->names_.emplace_back(name ? name : "kernel");
  if (profiler_hook::recording()) profiler_hook::note_kernel(name ? name : "kernel");
}

}  // namespace hg::cuda
