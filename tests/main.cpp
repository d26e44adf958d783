// The test runner: Catch2's main plus a listener that prints the closing line CI
// reads, "N passed, N failed, N skipped", counting test cases.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <string>

#include "tests/skip.h"

namespace {
int g_passed = 0, g_failed = 0, g_skipped = 0;

struct CountingListener : Catch::TestEventListenerBase {
  using TestEventListenerBase::TestEventListenerBase;
  void testCaseStarting(const Catch::TestCaseInfo&) override { hg::test::skip_reason().clear(); }
  void testCaseEnded(const Catch::TestCaseStats& stats) override {
    if (stats.totals.assertions.failed > 0) ++g_failed;
    else if (!hg::test::skip_reason().empty()) {
      ++g_skipped;
      std::printf("SKIPPED: %s (%s)\n", stats.testInfo.name.c_str(), hg::test::skip_reason().c_str());
    } else ++g_passed;
  }
};
}  // namespace
CATCH_REGISTER_LISTENER(CountingListener)

namespace hg::test {
std::string& skip_reason() {
  static std::string r;
  return r;
}
}  // namespace hg::test

int main(int argc, char** argv) {
  int rc = Catch::Session().run(argc, argv);
  std::printf("%d passed, %d failed, %d skipped\n", g_passed, g_failed, g_skipped);
  return rc;
}
