// Warnings: what a program should hear about but not stop for (a scheduler stepped before
// its optimizer, a loss scaler skipping every step). Written to stderr as "halfgrad
// warning: ..." unless a handler is installed; CaptureWarnings collects them for tests.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace hg {

using WarningHandler = std::function<void(const std::string& message)>;

// Thread-safe; the handler runs under a lock, so it must not warn itself.
void warn(const std::string& message);
// Installs `handler` (empty: back to stderr) and returns the previous one.
WarningHandler set_warning_handler(WarningHandler handler);

// Collects the warnings issued while it lives (from any thread), then restores the
// handler that was installed before it.
class CaptureWarnings {
 public:
  CaptureWarnings();
  ~CaptureWarnings();
  CaptureWarnings(const CaptureWarnings&) = delete;
  CaptureWarnings& operator=(const CaptureWarnings&) = delete;
  std::vector<std::string> messages() const;

 private:
  struct Shared;
  std::shared_ptr<Shared> shared_;
  WarningHandler previous_;
};

}  // namespace hg
