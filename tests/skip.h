// Skipping a test with a visible reason: the runner reports it as skipped, never passed.
#pragma once
#include <string>

namespace hg::test {
std::string& skip_reason();
}  // namespace hg::test

#define HG_SKIP(reason)                      \
  do {                                       \
    ::hg::test::skip_reason() = (reason);    \
    WARN("skipped: " << (reason));           \
    return;                                  \
  } while (0)
