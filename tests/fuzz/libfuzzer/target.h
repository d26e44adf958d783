// What every libFuzzer target shares: an input either works or raises hg::Error; any
// other exception is a finding, reported as a crash (abort) so libFuzzer keeps the input.
// At exit a line "<target>: N calls, N accepted, N hg::Error" tells what was exercised.
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>

#include "framework/error.h"

namespace hg::fuzz {

struct Tally {
  const char* target = nullptr;
  int64_t accepted = 0, refused = 0;
  ~Tally() {
    if (target)
      std::printf("%s: %lld calls, %lld accepted, %lld hg::Error\n", target, static_cast<long long>(accepted + refused),
                  static_cast<long long>(accepted), static_cast<long long>(refused));
  }
};
inline Tally g_tally;

template <class F>
void expect_clean(const char* target, F&& body) {
  g_tally.target = target;
  try {
    body();
    ++g_tally.accepted;
  } catch (const Error&) {
    ++g_tally.refused;  // the library's clean refusal: fine
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: an exception other than hg::Error escaped: %s\n", target, e.what());
    std::abort();
  }
}

// A broken invariant of an accepted input.
inline void require(bool ok, const char* target, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "%s: accepted input breaks: %s\n", target, what);
  std::abort();
}

}  // namespace hg::fuzz
