// User warnings (PyTorch's UserWarning): a misuse or a run going wrong that is not an error
// (a scheduler stepped before its optimizer, a loss scaler skipping every step). Said once
// per distinct message on stderr as "halfgrad: warning: ...", or handed to a handler the
// program installs, or collected by a WarningCapture.
#pragma once
#include <functional>
#include <string>
#include <vector>

namespace hg {

// While a WarningCapture is alive on this thread the message goes to it, every time;
// else to the handler set_warning_handler installed, every time; else to stderr, the
// first time this message is warned in the process.
void warn(const std::string& message);

using WarningHandler = std::function<void(const std::string& message)>;
// Installs `handler` for every thread (empty: back to stderr) and returns the previous
// one. It runs under a lock, so it must not warn itself.
WarningHandler set_warning_handler(WarningHandler handler);

// Collects this thread's warnings while it lives (nested captures: the innermost one),
// as PyTorch's warnings.catch_warnings(record=True) does: for tests, and for code that
// wants to show warnings its own way.
class WarningCapture {
 public:
  WarningCapture();
  ~WarningCapture();
  WarningCapture(const WarningCapture&) = delete;
  WarningCapture& operator=(const WarningCapture&) = delete;

  const std::vector<std::string>& messages() const { return messages_; }

 private:
  friend void warn(const std::string& message);
  std::vector<std::string> messages_;
  WarningCapture* outer_;
};

}  // namespace hg
