// User warnings: into this thread's capture, else to the installed handler, else once per
// distinct message on stderr.
#include "framework/warning.h"

#include <cstdio>
#include <mutex>
#include <set>
#include <utility>

namespace hg {

namespace {
thread_local WarningCapture* t_capture = nullptr;
std::mutex g_mu;
std::set<std::string> g_said;
WarningHandler g_handler;
}  // namespace

WarningCapture::WarningCapture() : outer_(std::exchange(t_capture, this)) {}
WarningCapture::~WarningCapture() { t_capture = outer_; }

void warn(const std::string& message) {
  if (t_capture) {
    t_capture->messages_.push_back(message);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (g_handler) {
      g_handler(message);
      return;
    }
    if (!g_said.insert(message).second) return;
  }
  std::fprintf(stderr, "halfgrad: warning: %s\n", message.c_str());
  std::fflush(stderr);
}

WarningHandler set_warning_handler(WarningHandler handler) {
  std::lock_guard<std::mutex> lock(g_mu);
  return std::exchange(g_handler, std::move(handler));
}

}  // namespace hg
