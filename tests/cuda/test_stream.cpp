// Streams and events: the current stream and its guard, events that order and time work,
// and the emulated device's identity.
#include <catch2/catch.hpp>

#include "cuda/runtime.h"
#include "cuda/stream.h"
#include "framework/error.h"
#include "tests/devices.h"

using Catch::Matchers::Contains;
using namespace hg::cuda;

TEST_CASE("the current stream follows StreamGuard", "[cuda][emu][stream]") {
  HG_REQUIRE_CUDA();
  REQUIRE(current_stream().is_default());
  const Stream s = new_stream();
  REQUIRE_FALSE(s.is_default());
  REQUIRE(s != new_stream());
  {
    StreamGuard g(s);
    REQUIRE(current_stream() == s);
    {
      StreamGuard inner(default_stream());
      REQUIRE(current_stream().is_default());
    }
    REQUIRE(current_stream() == s);
  }
  REQUIRE(current_stream().is_default());
  REQUIRE_THROWS_WITH(default_stream(7), Contains("cuda:7 does not exist"));
}

TEST_CASE("events record, order and time stream work", "[cuda][emu][stream]") {
  HG_REQUIRE_CUDA();
  const Stream s = new_stream();
  Event start, end;
  REQUIRE_THROWS_WITH(start.elapsed_ms(end), Contains("must be recorded"));
  start.record(s);
  end.record(s);
  end.synchronize();
  REQUIRE(end.done());
  REQUIRE(start.elapsed_ms(end) >= 0.0f);
  end.block(default_stream());
  Event untimed(false);
  untimed.record(s);
  REQUIRE_THROWS_WITH(start.elapsed_ms(untimed), Contains("timing = true"));
  Event moved = std::move(start);
  REQUIRE(moved.recorded());
  REQUIRE(moved.elapsed_ms(end) >= 0.0f);
}

TEST_CASE("the cuda device says whether it is emulated", "[cuda][emu][stream]") {
  HG_REQUIRE_CUDA();
  const std::string name = device_name(0);
  REQUIRE_FALSE(name.empty());
  REQUIRE((name.find("(emulated on the CPU)") != std::string::npos) == is_emulated());
  REQUIRE_THROWS_WITH(device_name(device_count()), Contains("does not exist"));
  // The emulation is for tests: "auto" still means a GPU when there is one, else the CPU.
  if (is_emulated()) REQUIRE(hg::Device::automatic() == hg::Device::cpu());
}
