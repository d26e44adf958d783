// User warnings: once per distinct message on stderr, or into this thread's capture.
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
    if (!g_said.insert(message).second) return;
  }
  std::fprintf(stderr, "halfgrad: warning: %s\n", message.c_str());
  std::fflush(stderr);
}

}  // namespace hg
