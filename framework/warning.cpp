// The process-wide warning handler and its default, stderr.
#include "framework/warning.h"

#include <cstdio>
#include <mutex>

namespace hg {
namespace {
std::mutex g_mu;
WarningHandler g_handler;
}  // namespace

void warn(const std::string& message) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_handler) g_handler(message);
  else std::fprintf(stderr, "halfgrad warning: %s\n", message.c_str());
}

WarningHandler set_warning_handler(WarningHandler handler) {
  std::lock_guard<std::mutex> lock(g_mu);
  WarningHandler previous = std::move(g_handler);
  g_handler = std::move(handler);
  return previous;
}

struct CaptureWarnings::Shared {
  mutable std::mutex mu;
  std::vector<std::string> messages;
};

CaptureWarnings::CaptureWarnings() : shared_(std::make_shared<Shared>()) {
  previous_ = set_warning_handler([s = shared_](const std::string& m) {
    std::lock_guard<std::mutex> lock(s->mu);
    s->messages.push_back(m);
  });
}

CaptureWarnings::~CaptureWarnings() { set_warning_handler(std::move(previous_)); }

std::vector<std::string> CaptureWarnings::messages() const {
  std::lock_guard<std::mutex> lock(shared_->mu);
  return shared_->messages;
}

}  // namespace hg
