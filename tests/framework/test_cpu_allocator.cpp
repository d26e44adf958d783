// The CPU allocator's cache of large blocks (framework/device.cpp): a freed block of 256 KiB
// or more is handed out again for a request of its size class without reaching the system
// allocator, live bytes and their peak count tensors only, small blocks and other size classes
// are not mixed up, and the memory a reused block holds is the new tensor's alone.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>

#include "framework/allocator.h"
#include "halfgrad.h"
#include "tests/skip.h"

using namespace hg;

TEST_CASE("cpu allocator: a freed large block is reused for its size class, counted as live once", "[memory]") {
#if defined(__SANITIZE_ADDRESS__)
  HG_SKIP("AddressSanitizer build: the CPU allocator caches nothing, so a use after free is caught");
#endif
  if (const char* e = std::getenv("HG_CPU_ALLOC_CACHE"); e && std::string(e) == "0")
    HG_SKIP("HG_CPU_ALLOC_CACHE=0 turns the CPU allocator's cache off");
  const Device cpu = Device::cpu();
  const int64_t n = 300000;  // 1.2 MB of f32
  int64_t before_alloc, in_use_before;
  {
    Tensor warm = empty({n}, {f32});  // puts one block of this class in the cache when it goes
  }
  in_use_before = memory_stats(cpu).in_use;
  before_alloc = memory_stats(cpu).allocations;
  {
    Tensor a = full({n}, 3.0, {f32});
    CHECK(memory_stats(cpu).in_use == in_use_before + n * 4);
    CHECK(memory_stats(cpu).allocations == before_alloc);  // served by the cache
    CHECK(a.to_vector<float>()[n - 1] == 3.0f);
  }
  CHECK(memory_stats(cpu).in_use == in_use_before);
  {
    Tensor b = full({n + 100}, 5.0, {f32});  // the same size class: both round up to 1,310,720 bytes
    CHECK(memory_stats(cpu).allocations == before_alloc);
    Tensor c = full({4 * n}, 7.0, {f32});  // another class: reaches the system
    CHECK(memory_stats(cpu).allocations == before_alloc + 1);
    CHECK(b.to_vector<float>()[0] == 5.0f);
    CHECK(c.to_vector<float>()[4 * n - 1] == 7.0f);
  }
  CHECK(memory_stats(cpu).in_use == in_use_before);
}
