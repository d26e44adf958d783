// The launcher refuses configurations the device cannot run, with an hg::Error that names
// the kernel and the valid range, before anything is launched.
#include <catch2/catch.hpp>

#include "cuda/launch_config.h"
#include "framework/error.h"
#include "tests/cuda/test_kernels.h"
#include "tests/devices.h"

using Catch::Matchers::Contains;
using hg::cuda::check_launch;
using hg::cuda::LaunchConfig;

TEST_CASE("launch configurations are checked against the device", "[cuda][emu][launch]") {
  HG_REQUIRE_CUDA();
  auto cfg = [](dim3 grid, dim3 block, size_t smem = 0) {
    return LaunchConfig{.grid = grid, .block = block, .shared_bytes = smem, .name = "probe"};
  };
  REQUIRE_NOTHROW(check_launch(cfg(1, 1024)));
  REQUIRE_NOTHROW(check_launch(cfg({65535, 65535, 65535}, {32, 32, 1}, 48 * 1024)));
  REQUIRE_THROWS_WITH(check_launch(cfg(1, 1025)), Contains("launch of probe") && Contains("block (1025, 1, 1)") &&
                                                      Contains("at most 1024 threads"));
  REQUIRE_THROWS_WITH(check_launch(cfg(1, {64, 32, 1})), Contains("at most 1024 threads"));
  REQUIRE_THROWS_WITH(check_launch(cfg(1, {1, 1, 65})), Contains("z <= 64"));
  REQUIRE_THROWS_WITH(check_launch(cfg(1, {0, 1, 1})), Contains("each dimension >= 1"));
  REQUIRE_THROWS_WITH(check_launch(cfg({1, 65536, 1}, 32)), Contains("grid (1, 65536, 1)") && Contains("y <= 65535"));
  REQUIRE_THROWS_WITH(check_launch(cfg(0, 32)), Contains("grid (0, 1, 1)"));
  REQUIRE_THROWS_WITH(check_launch(cfg(1, 32, 1u << 30)), Contains("bytes of dynamic shared memory"));
}

TEST_CASE("launching a bad configuration raises hg::Error and launches nothing", "[cuda][emu][launch]") {
  HG_REQUIRE_CUDA();
  REQUIRE_THROWS_AS(hg::test::kernels::launch_empty(1, 1, 1, 2048, 1, 1, 0), hg::Error);
  REQUIRE_THROWS_WITH(hg::test::kernels::launch_empty(1, 1, 1, 32, 1, 1, size_t{1} << 30),
                      Contains("launch of empty_kernel"));
  REQUIRE_NOTHROW(hg::test::kernels::launch_empty(2, 2, 2, 8, 4, 2, 1024));
}
