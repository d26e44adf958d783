// The Python cross-check script (tests/python/check_safetensors.py) and whether it can run:
// the tests that compare with the reference safetensors package share these.
#pragma once
#include <cstdlib>
#include <filesystem>

#include "tests/skip.h"

namespace hg::test {

// Skips the calling test, with the reason, when safetensors/numpy cannot be imported.
#define HG_REQUIRE_PYTHON_SAFETENSORS()                                                \
  do {                                                                                 \
    if (std::system("python3 -c 'import safetensors, numpy' >/dev/null 2>&1") != 0)    \
      HG_SKIP("python safetensors/numpy not installed");                               \
  } while (0)

inline std::filesystem::path safetensors_check_script() {
#ifdef HG_SOURCE_DIR
  return std::filesystem::path(HG_SOURCE_DIR) / "tests/python/check_safetensors.py";
#else
  return std::filesystem::current_path() / "tests/python/check_safetensors.py";
#endif
}

}  // namespace hg::test
