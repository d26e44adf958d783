// hg::Error and the checks that raise it: every user-facing failure is a value that
// names the op, what it was given and what would have been valid.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace hg {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// A numerical fault found by anomaly detection or a numerics check (inf/NaN where
// none may be).
class NumericsError : public Error {
 public:
  using Error::Error;
};

namespace detail {
template <class... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
}  // namespace detail

}  // namespace hg

// HG_CHECK(cond, parts...) throws hg::Error whose message is the parts streamed together.
#define HG_CHECK(cond, ...)                                           \
  do {                                                                \
    if (!(cond)) throw ::hg::Error(::hg::detail::concat(__VA_ARGS__)); \
  } while (0)
