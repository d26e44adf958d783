// In a build without a CUDA backend the CUDA tests are reported as skipped, with the reason.
#include <catch2/catch.hpp>

#include "tests/devices.h"

TEST_CASE("CUDA backend tests", "[cuda][emu]") { HG_REQUIRE_CUDA(); }
