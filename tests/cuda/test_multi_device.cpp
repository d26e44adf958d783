// Two CUDA devices: work lands on the device of its tensors and streams, whatever device is
// current, and the current device is left as it was (DeviceGuard in launches, streams,
// events, allocation and transfers). Runs on the emulation's two devices, whose runtime
// refuses, as CUDA does, a launch or event record on a stream of another device; skipped
// where fewer than two devices exist.
#include <catch2/catch.hpp>

#include "cuda/caching_allocator.h"
#include "cuda/cuda_api.h"
#include "cuda/runtime.h"
#include "cuda/stream.h"
#include "framework/error.h"
#include "ops/elementwise.h"
#include "ops/matmul.h"
#include "tests/cuda/op_compare.h"
#include "tests/devices.h"

#ifdef HG_CUDA_EMULATION
using namespace hg;
using Catch::Matchers::Contains;

namespace {
int current_device() {
  int d = -1;
  HG_CUDA_CHECK(cudaGetDevice(&d));
  return d;
}

void require_two_emulated_devices() {
  HG_REQUIRE_CUDA();
  if (cuda::device_count() < 2) HG_SKIP("fewer than two CUDA devices");
  if (!cuda::is_emulated()) HG_SKIP("counts launches per device through the emulation's runtime");
}
}  // namespace

TEST_CASE("the emulated runtime refuses work on a stream of another device", "[cuda][emu][multi-device]") {
  require_two_emulated_devices();
  const cuda::Stream s1 = cuda::new_stream(1);
  REQUIRE(current_device() == 0);  // new_stream switched to cuda:1 and back
  REQUIRE(cuda::emu::begin_launch(static_cast<cudaStream_t>(s1.handle())) == cudaErrorInvalidResourceHandle);
  cudaGetLastError();
  cudaEvent_t e = nullptr;
  REQUIRE(cudaEventCreate(&e) == cudaSuccess);  // made on cuda:0
  REQUIRE(cudaEventRecord(e, static_cast<cudaStream_t>(s1.handle())) == cudaErrorInvalidResourceHandle);
  cudaGetLastError();
  cudaEventDestroy(e);
}

TEST_CASE("ops on cuda:1 launch on cuda:1, allocate there and leave cuda:0 current", "[cuda][emu][multi-device]") {
  require_two_emulated_devices();
  const Device d1 = Device::cuda(1);
  const Tensor a = test::random_cpu({2, 96, 80}, DType::f16, 1), b = test::random_cpu({2, 80, 72}, DType::f16, 2);
  const size_t before0 = cuda::emu::launches(0), before1 = cuda::emu::launches(1);
  const Tensor a1 = a.to(d1), b1 = b.to(d1);
  const Tensor prod = matmul(a1, b1), sum = a1 + a1;
  REQUIRE(current_device() == 0);
  REQUIRE(cuda::emu::launches(1) > before1);
  REQUIRE(cuda::emu::launches(0) == before0);
  for (const Tensor& t : {a1, b1, prod, sum}) REQUIRE(cuda::emu::device_of(t.data_ptr()) == 1);
  test::require_close(prod.to(Device::cpu()), matmul(a, b));
  test::require_close(sum.to(Device::cpu()), a + a);
  // The caching allocator of cuda:1 allocates on cuda:1 from any current device.
  void* p = cuda::caching_allocator(1).allocate(4096);
  REQUIRE(cuda::emu::device_of(p) == 1);
  REQUIRE(current_device() == 0);
  cuda::caching_allocator(1).deallocate(p, 4096);
}

TEST_CASE("streams and events of cuda:1 work while cuda:0 is current", "[cuda][emu][multi-device]") {
  require_two_emulated_devices();
  const Device d1 = Device::cuda(1);
  const cuda::Stream s1 = cuda::new_stream(1);
  cuda::Event e;
  {
    const cuda::StreamGuard on_s1(s1);
    const Tensor x = test::random_cpu({64, 64}, DType::f32, 3).to(d1);
    const Tensor y = x * x;  // launched on s1: the launch made cuda:1 current for it
    e.record(s1);
    cuda::record_stream(x, s1);
    REQUIRE_THROWS_WITH(cuda::record_stream(x, cuda::default_stream(0)), Contains("both must be on one cuda device"));
    REQUIRE(cuda::emu::device_of(y.data_ptr()) == 1);
  }
  REQUIRE(current_device() == 0);
  e.synchronize();
  REQUIRE(e.done());
  e.record(cuda::default_stream(0));  // the event moves to cuda:0
  cuda::Event e1;
  e1.record(s1);
  REQUIRE_THROWS_WITH(e.elapsed_ms(e1), Contains("both must be on one device"));
  e.block(s1);
  s1.synchronize();
  REQUIRE(current_device() == 0);
}

TEST_CASE("DeviceGuard switches the current device and restores it", "[cuda][emu][multi-device]") {
  require_two_emulated_devices();
  {
    const cuda::DeviceGuard g(1);
    REQUIRE(current_device() == 1);
    {
      const cuda::DeviceGuard inner(0);
      REQUIRE(current_device() == 0);
    }
    REQUIRE(current_device() == 1);
  }
  REQUIRE(current_device() == 0);
  REQUIRE_THROWS_WITH(cuda::DeviceGuard(5), Contains("cuda:5 does not exist"));
}
#endif
