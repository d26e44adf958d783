// User warnings (PyTorch's UserWarning): a misuse that is not an error, said once per
// process on stderr as "halfgrad: warning: ...", or collected by a WarningCapture.
#pragma once
#include <string>
#include <vector>

namespace hg {

// Prints "halfgrad: warning: <message>" to stderr the first time this message is warned
// in the process. While a WarningCapture is alive on this thread the message goes to it
// instead, every time, and nothing is printed.
void warn(const std::string& message);

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
