// The caching allocator: size classes, reuse across "steps", statistics, stream-aware
// reuse, empty_cache, out-of-memory recovery, and that memory_stats reports it.
#include <catch2/catch.hpp>

#include "cuda/caching_allocator.h"
#include "cuda/runtime.h"
#include "framework/allocator.h"
#include "framework/error.h"
#include "framework/tensor.h"
#include "tests/devices.h"
#ifdef HG_CUDA_EMULATION
#include "cuda/emu/runtime_api.h"
#endif

using Catch::Matchers::Contains;
using hg::cuda::CachingAllocator;

namespace {
constexpr size_t MiB = size_t{1} << 20;
}

TEST_CASE("request sizes round to the allocator's size classes", "[cuda][emu][allocator]") {
  REQUIRE(CachingAllocator::round_size(1) == 512);
  REQUIRE(CachingAllocator::round_size(512) == 512);
  REQUIRE(CachingAllocator::round_size(513) == 1024);
  REQUIRE(CachingAllocator::round_size(1025) == 1536);
  REQUIRE(CachingAllocator::round_size(3000) == 3072);
  REQUIRE(CachingAllocator::round_size(100000) == 114688);
  REQUIRE(CachingAllocator::round_size(MiB) == MiB);
  REQUIRE(CachingAllocator::round_size(MiB + 1) == 2 * MiB);
  REQUIRE(CachingAllocator::round_size(5 * MiB) == 6 * MiB);
}

TEST_CASE("freed blocks are reused and counted", "[cuda][emu][allocator]") {
  HG_REQUIRE_CUDA();
  CachingAllocator a(0);
  void* p = a.allocate(1000);
  auto s = a.stats();
  REQUIRE(s.malloc_calls == 1);
  REQUIRE(s.in_use == 1024);
  REQUIRE(s.requested == 1000);
  REQUIRE(s.cached == 0);
  a.deallocate(p, 1000);
  s = a.stats();
  REQUIRE(s.in_use == 0);
  REQUIRE(s.cached == 1024);
  REQUIRE(s.reserved == 1024);
  // The next step asks for a size of the same class: no cudaMalloc.
  void* q = a.allocate(900);
  REQUIRE(q == p);
  s = a.stats();
  REQUIRE(s.malloc_calls == 1);
  REQUIRE(s.reuses == 1);
  REQUIRE(s.cached == 0);
  void* r = a.allocate(2000);
  REQUIRE(r != q);
  REQUIRE(a.stats().malloc_calls == 2);
  REQUIRE(a.stats().peak == 1024 + 2048);
  a.deallocate(q, 900);
  a.deallocate(r, 2000);
  REQUIRE(a.stats().peak == 1024 + 2048);
  a.reset_peak();
  REQUIRE(a.stats().peak == 0);
  REQUIRE_THROWS_WITH(a.deallocate(r, 2000), Contains("already freed"));
}

TEST_CASE("large blocks are reused when close in size", "[cuda][emu][allocator]") {
  HG_REQUIRE_CUDA();
  CachingAllocator a(0);
  void* p = a.allocate(3 * MiB);
  REQUIRE(a.stats().in_use == static_cast<int64_t>(4 * MiB));
  a.deallocate(p, 3 * MiB);
  void* q = a.allocate(3 * MiB + MiB / 2);
  REQUIRE(q == p);
  a.deallocate(q, 3 * MiB + MiB / 2);
  void* big = a.allocate(16 * MiB);
  a.deallocate(big, 16 * MiB);
  // A 16 MiB block would waste most of itself on a 4 MiB request: a new block is made.
  void* small = a.allocate(4 * MiB);
  REQUIRE(small == p);
  void* other = a.allocate(4 * MiB);
  REQUIRE(other != big);
  REQUIRE(a.stats().malloc_calls == 3);
  a.deallocate(small, 4 * MiB);
  a.deallocate(other, 4 * MiB);
}

TEST_CASE("blocks are reused on their own stream; other streams wait for an event", "[cuda][emu][allocator]") {
  HG_REQUIRE_CUDA();
  using namespace hg::cuda;
  CachingAllocator a(0);
  const Stream s2 = new_stream();
  void* p = a.allocate(1000, s2);
  a.deallocate(p, 1000);
  void* q = a.allocate(1000, default_stream());
  REQUIRE(q != p);  // p may still be in use by work queued on s2
  void* r = a.allocate(1000, s2);
  REQUIRE(r == p);
  a.deallocate(r, 1000);
  {
    StreamGuard g(s2);
    REQUIRE(a.allocate(1000) == p);  // allocate() uses the current stream
    a.deallocate(p, 1000);
  }
  // q is used on s2 as well: freeing it records an event on s2; the block returns to its
  // stream's pool once that event has completed (here at once: s2 is idle).
  a.record_stream(q, s2);
  a.deallocate(q, 1000);
  REQUIRE(a.stats().cached == 2048);
  void* again = a.allocate(1000, default_stream());
  REQUIRE(again == q);
  a.deallocate(again, 1000);
  REQUIRE_THROWS_WITH(a.record_stream(again, s2), Contains("not an allocation in use"));
}

TEST_CASE("empty_cache returns cached blocks and keeps live ones", "[cuda][emu][allocator]") {
  HG_REQUIRE_CUDA();
  CachingAllocator a(0);
  void* live = a.allocate(5000);
  void* freed = a.allocate(70000);
  a.deallocate(freed, 70000);
  auto s = a.stats();
  REQUIRE(s.cached == static_cast<int64_t>(CachingAllocator::round_size(70000)));
  a.empty_cache();
  s = a.stats();
  REQUIRE(s.cached == 0);
  REQUIRE(s.free_calls == 1);
  REQUIRE(s.reserved == s.in_use);
  REQUIRE(s.in_use == static_cast<int64_t>(CachingAllocator::round_size(5000)));
  a.deallocate(live, 5000);
}

TEST_CASE("memory_stats of the cuda device come from the caching allocator", "[cuda][emu][allocator]") {
  HG_REQUIRE_CUDA();
  const hg::Device d = hg::Device::cuda(0);
  const hg::MemoryStats before = hg::memory_stats(d);
  {
    hg::Tensor t = hg::empty({1000}, {hg::DType::f32, d});
    const hg::MemoryStats during = hg::memory_stats(d);
    REQUIRE(during.in_use == before.in_use + 4096);
    REQUIRE(during.peak >= during.in_use);
    REQUIRE(hg::cuda::caching_allocator(0).stats().requested >= 4000);
  }
  REQUIRE(hg::memory_stats(d).in_use == before.in_use);
  // A tensor of the same size in the next "step" reuses the block.
  const int64_t mallocs = hg::memory_stats(d).allocations;
  hg::Tensor again = hg::empty({1000}, {hg::DType::f32, d});
  REQUIRE(hg::memory_stats(d).allocations == mallocs);
}

TEST_CASE("out of device memory: the cache is emptied and the allocation retried", "[cuda][emu][allocator]") {
  HG_REQUIRE_CUDA();
  if (!hg::cuda::is_emulated()) HG_SKIP("needs the emulated device's memory limit");
#ifdef HG_CUDA_EMULATION
  struct Restore {
    ~Restore() { hg::cuda::emu::set_memory_limit(0); }
  } restore;
  hg::cuda::emu::set_memory_limit(hg::cuda::emu::memory_allocated() + 64 * MiB);
  CachingAllocator a(0);
  void* p = a.allocate(40 * MiB);
  a.deallocate(p, 40 * MiB);
  void* q = a.allocate(48 * MiB);  // fits only once the cached 40 MiB are returned
  REQUIRE(a.stats().free_calls == 1);
  REQUIRE_THROWS_WITH(a.allocate(48 * MiB), Contains("out of memory") && Contains("cuda:0"));
  a.deallocate(q, 48 * MiB);
#endif
}
