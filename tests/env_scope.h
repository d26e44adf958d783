// Sets an environment variable for a scope and restores what was there (value or absence),
// for tests of code that reads its settings from the environment.
#pragma once
#include <cstdlib>
#include <optional>
#include <string>

namespace hg::test {

class EnvScope {
 public:
  EnvScope(const char* name, const char* value) : name_(name) {
    if (const char* v = std::getenv(name)) old_ = v;
    setenv(name, value, 1);
  }
  ~EnvScope() { old_ ? setenv(name_.c_str(), old_->c_str(), 1) : unsetenv(name_.c_str()); }
  EnvScope(const EnvScope&) = delete;
  EnvScope& operator=(const EnvScope&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

}  // namespace hg::test
