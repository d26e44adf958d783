// hg::Profiler on cuda:0 (a GPU, or the CPU emulation): cuda ops are timed by CUDA event
// pairs resolved at stop() without a host wait per op, name the kernels they launched, and
// carry the caching allocator's bytes; the trace has a device track and allocator counters;
// a failing event call leaves host times and says why.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "cuda/caching_allocator.h"
#include "cuda/profiler_events.h"
#include "cuda/runtime.h"
#include "cuda/stream.h"
#include "framework/profiler.h"
#include "framework/profiler_device.h"
#include "halfgrad.h"
#include "ops/copy_kernels.h"
#include "tests/cuda/op_compare.h"
#include "tests/devices.h"
#include "tests/framework/trace_check.h"
#ifdef HG_CUDA_EMULATION
#include "cuda/emu/host_waits.h"
#endif

using namespace hg;
using Catch::Matchers::Contains;

namespace {

std::vector<const ProfileEvent*> top_level_ops(const Profiler& p) {
  std::vector<const ProfileEvent*> out;
  for (const ProfileEvent& e : p.events())
    if (e.kind == ProfileEvent::Kind::op && !e.nested) out.push_back(&e);
  return out;
}

const ProfileEvent& only_op(const Profiler& p, const std::string& name) {
  const ProfileEvent* found = nullptr;
  for (const ProfileEvent* e : top_level_ops(p))
    if (e->name == name) {
      REQUIRE(found == nullptr);
      found = e;
    }
  REQUIRE(found != nullptr);
  return *found;
}

// Host waits on the emulated devices so far (-1 natively, where they are not counted).
int64_t host_waits() {
#ifdef HG_CUDA_EMULATION
  return cuda::emu::host_waits();
#else
  return -1;
#endif
}

}  // namespace

TEST_CASE("profiler: cuda ops get device time from CUDA events, with no host wait per op", "[cuda][emu][profiler]") {
  HG_REQUIRE_CUDA();
  const Device d = test::kCuda;
  // Inputs are copied before recording: a host-to-device copy waits for the device by design.
  const Tensor a = test::random_cpu({64, 64}, DType::f16, 1).to(d), b = test::random_cpu({64, 64}, DType::f16, 2).to(d);
  const Tensor x = test::random_cpu({1, 8, 8, 16}, DType::f16, 3).to(d), w = test::random_cpu({16, 3, 3, 16}, DType::f16, 4).to(d);
  constexpr int kRelus = 12;
  const int64_t waits_before = host_waits();
  Profiler prof;
  Tensor c = matmul(a, b);
  Tensor y = conv2d(x, w, Tensor(), {.padding = {1, 1}});
  for (int i = 0; i < kRelus; ++i) c = relu(c);
  const int64_t waits_recording = host_waits() - waits_before;
  prof.stop();
  const int64_t waits_at_stop = host_waits() - waits_before - waits_recording;

  const auto ops = top_level_ops(prof);
  REQUIRE(ops.size() == 2 + kRelus);
  const DeviceTimingStats stats = prof.device_timing();
  INFO(prof.table());
  CHECK(stats.error.empty());
  CHECK(stats.pairs == static_cast<int64_t>(ops.size()));  // each op issued device work
  CHECK(stats.anchor_syncs == 1);                          // one device
  CHECK(stats.pool_flushes == 0);
  CHECK(stats.stop_syncs == 1);  // one stream
  if (waits_before >= 0) {
    // While recording, the one wait is the clock alignment at the first op; none per op.
    CHECK(waits_recording == 1);
    CHECK(waits_at_stop == 1);
  }
  int64_t device_sum = 0;
  for (const ProfileEvent* e : ops) {
    INFO(e->name << " host [" << e->start_ns << ", +" << e->dur_ns << "] device [" << e->device_start_ns << ", +"
                 << e->device_dur_ns << "]");
    REQUIRE(e->device_timed());
    CHECK(e->device == d);
    CHECK(e->stream == 0);
    CHECK(e->device_start_ns >= 0);
    CHECK(e->device_dur_ns >= 0);
    CHECK(e->device_start_ns + e->device_dur_ns <= prof.wall_ns());
    CHECK(e->time_ns() == e->device_dur_ns);
    if (cuda::is_emulated()) {
      // The emulated device runs each kernel inside its launch: the device span lies in the
      // op's host span, up to the clock alignment (the anchor event's record, well under 20 us).
      CHECK(e->device_start_ns >= e->start_ns - 20'000);
      CHECK(e->device_start_ns + e->device_dur_ns <= e->start_ns + e->dur_ns + 20'000);
    }
    device_sum += e->device_dur_ns;
  }
  // The ops run one after another on one stream: their device times fit in the profiled
  // wall time. Emulated kernels are most of the work there, so they fill at least a third of
  // it (on a GPU these microsecond kernels fill little of a wall time spent on the host).
  CHECK(device_sum <= prof.wall_ns());
  if (cuda::is_emulated()) CHECK(static_cast<double>(device_sum) >= static_cast<double>(prof.wall_ns()) / 3);
  CHECK(prof.op_total_ns() == device_sum);

  // The kernel_log hook: each event names the kernels its op launched (the emulation runs
  // the sm_80 tensor-core kernels; a GPU may choose others).
  const ProfileEvent& mm = only_op(prof, "bmm");
  const ProfileEvent& conv = only_op(prof, "conv2d_forward");
  CHECK(mm.flops == 2.0 * 64 * 64 * 64);
  if (cuda::is_emulated()) {
    CHECK_THAT(mm.kernel, Contains("bmm_tc (mma.sync"));
    CHECK_THAT(conv.kernel, Contains("conv2d_forward_tc (mma.sync"));
  } else {
    CHECK_FALSE(mm.kernel.empty());
    CHECK_FALSE(conv.kernel.empty());
  }
  // key_averages counts device time; the host time (issuing the work) is beside it.
  for (const OpStats& s : prof.key_averages())
    if (s.name == "bmm") {
      CHECK(s.total_ns == mm.device_dur_ns);
      CHECK(s.host_ns == mm.dur_ns);
    }
  CHECK_THAT(prof.table(), Contains("cuda ops in device time") && Contains("Host ms") && Contains("Rsv MB"));
}

TEST_CASE("profiler: a full CUDA event pool is resolved early, with one wait each time", "[cuda][emu][profiler]") {
  HG_REQUIRE_CUDA();
  CHECK_THROWS_WITH(Profiler(ProfilerOptions{.device_event_pairs = 0}), Contains("device_event_pairs is 0"));
  const Tensor x = test::random_cpu({256}, DType::f32, 5).to(test::kCuda);
  const int64_t waits_before = host_waits();
  Profiler prof(ProfilerOptions{.device_event_pairs = 3});
  Tensor y = x;
  for (int i = 0; i < 10; ++i) y = relu(y);
  const int64_t waits_recording = host_waits() - waits_before;
  prof.stop();
  // Pairs 1-3 fill the pool; the 4th, 7th and 10th op's start waits for the 3 before it.
  const DeviceTimingStats stats = prof.device_timing();
  CHECK(stats.pairs == 10);
  CHECK(stats.pool_flushes == 3);
  if (waits_before >= 0) CHECK(waits_recording == 1 + 3);  // the alignment, one per flush
  for (const ProfileEvent* e : top_level_ops(prof)) {
    CHECK(e->device_timed());
    CHECK(e->device_dur_ns >= 0);
  }
  CHECK_THAT(prof.table(), Contains("3 time(s) because the event pool was full"));
}

TEST_CASE("profiler: the caching allocator's reserved bytes per op, and as counters in the trace",
          "[cuda][emu][profiler]") {
  HG_REQUIRE_CUDA();
  cuda::CachingAllocator& alloc = cuda::caching_allocator(0);
  const Tensor big = test::random_cpu({786432}, DType::f32, 6).to(test::kCuda);  // 3 MiB
  const Tensor small = test::random_cpu({16}, DType::f32, 7).to(test::kCuda);
  alloc.empty_cache();
  constexpr int64_t kMiB = 1 << 20;
  Profiler prof;
  Tensor out = big + big;  // a new 3 MiB block: a large-pool block of 4 MiB from the driver
  out = Tensor();          // back to the cache
  Tensor again = big + big;  // served from the cache
  again = Tensor();
  const int64_t cached = alloc.stats().cached;
  alloc.empty_cache();        // outside any op: counted towards the next one
  Tensor r = relu(small);     // 64 bytes: a 512-byte block from the driver
  prof.stop();
  const cuda::CachingAllocatorStats after = alloc.stats();

  std::vector<const ProfileEvent*> adds;
  for (const ProfileEvent* e : top_level_ops(prof))
    if (e->name == "add") adds.push_back(e);
  REQUIRE(adds.size() == 2);
  CHECK(adds[0]->reserved_delta == 4 * kMiB);
  CHECK(adds[1]->reserved_delta == 0);
  CHECK(cached >= 4 * kMiB);
  const ProfileEvent& relu_ev = only_op(prof, "relu");
  CHECK(relu_ev.reserved_delta == 512 - cached);
  CHECK(relu_ev.allocator_reserved == after.reserved);
  CHECK(relu_ev.allocator_in_use == after.in_use);
  CHECK(adds[0]->allocator_reserved - adds[0]->allocator_in_use == cached - 4 * kMiB);  // the cache besides the block

  const test::TraceSummary trace = test::check_trace(prof.chrome_trace());
  REQUIRE(trace.process_names.count(2) == 1);
  CHECK(trace.process_names.at(2) == "cuda:0 (device time)");
  CHECK(trace.track_names.at({2, 1}) == "stream 0 (default)");
  int device_spans = 0;
  for (const auto& ev : trace.spans)
    if (ev.at("cat") == "device") {
      CHECK(ev.at("pid") == 2);
      CHECK(ev.at("args").at("host_ts").is_number());
      ++device_spans;
    }
  CHECK(device_spans == 3);
  CHECK(trace.flows.size() == 3);  // an arrow from each op's host span to its device span
  int allocator_counters = 0;
  for (const auto& c : trace.counters)
    if (c.at("name") == "allocator") {
      CHECK(c.at("pid") == 2);
      ++allocator_counters;
    }
  CHECK(allocator_counters == 3);
  const auto& last = trace.counters.back();  // the relu's: in use + cached = reserved
  REQUIRE(last.at("name") == "allocator");
  CHECK(last.at("args").at("in use").get<int64_t>() == after.in_use);
  CHECK(last.at("args").at("in use").get<int64_t>() + last["args"].at("cached").get<int64_t>() == after.reserved);
}

TEST_CASE("profiler: each device and stream has its own clock alignment and trace track", "[cuda][emu][profiler]") {
  HG_REQUIRE_CUDA();
  if (cuda::device_count() < 2) HG_SKIP("one cuda device: the second device's track is not tested");
  const Tensor x0 = test::random_cpu({256}, DType::f32, 8).to(Device::cuda(0));
  const Tensor x1 = test::random_cpu({256}, DType::f32, 9).to(Device::cuda(1));
  const cuda::Stream side = cuda::new_stream(0);
  Profiler prof;
  Tensor a = relu(x0);
  Tensor b = relu(x1);
  {
    const cuda::StreamGuard on_side(side);
    Tensor c = exp(x0);
  }
  prof.stop();
  const DeviceTimingStats stats = prof.device_timing();
  CHECK(stats.anchor_syncs == 2);  // one per device
  CHECK(stats.stop_syncs == 3);    // cuda:0's default and side streams, cuda:1's default stream
  std::vector<std::pair<Device, int>> where;  // each op's device and stream, in order
  for (const ProfileEvent* e : top_level_ops(prof)) {
    REQUIRE(e->device_timed());
    where.emplace_back(e->device, e->stream);
  }
  CHECK(where == std::vector<std::pair<Device, int>>{{Device::cuda(0), 0}, {Device::cuda(1), 0}, {Device::cuda(0), 1}});
  const test::TraceSummary trace = test::check_trace(prof.chrome_trace());
  CHECK(trace.process_names.at(2) == "cuda:0 (device time)");
  CHECK(trace.process_names.at(3) == "cuda:1 (device time)");
  CHECK(trace.track_names.at({2, 2}) == "stream 1");
  CHECK(trace.track_names.at({3, 1}) == "stream 0 (default)");
}

namespace {
// A timer whose every event record fails, as a CUDA error would make it.
struct FailingTimer final : profiler_hook::DeviceTimer {
  void begin(std::chrono::steady_clock::time_point, size_t) override {}
  int64_t start(int, void*) override { throw Error("cudaEventRecord: an injected failure"); }
  void end(int64_t, int, void*) override {}
  void synchronize() override {}
  std::vector<profiler_hook::DeviceSpan> finish(DeviceTimingStats&) override { return {}; }
};
}  // namespace

TEST_CASE("profiler: when a CUDA event call fails, cuda ops fall back to host time and say why", "[cuda][emu][profiler]") {
  HG_REQUIRE_CUDA();
  const Tensor x = test::random_cpu({256}, DType::f32, 10).to(test::kCuda);
  FailingTimer failing;
  profiler_hook::register_device_timer(&failing);
  struct Restore {
    ~Restore() { profiler_hook::register_device_timer(&cuda::profiler_event_timer()); }
  } restore;
  Profiler prof;
  const Tensor y = relu(x);  // runs: the failure ends timing, not the op
  prof.stop();
  test::require_close(y.to(Device::cpu()), relu(x.to(Device::cpu())));
  CHECK(prof.device_timing().error == "cudaEventRecord: an injected failure");
  const ProfileEvent& e = only_op(prof, "relu");
  CHECK_FALSE(e.device_timed());
  CHECK(e.time_ns() == e.dur_ns);
  CHECK_THAT(prof.table(), Contains("device timing failed: cudaEventRecord: an injected failure"));
}

TEST_CASE("profiler: an op dispatched inside a cuda op gets its own pair inside the outer one's", "[cuda][emu][profiler]") {
  HG_REQUIRE_CUDA();
  const Device d = test::kCuda;
  const Tensor host = test::random_cpu({8, 16}, DType::f32, 11);
  const Tensor dev = empty({16, 8}, {DType::f32, d});
  Profiler prof;
  // Into a transposed view: the transfer copies to a contiguous staging tensor (a memcpy),
  // then dispatches the device copy kernel into the view, inside itself.
  transfer_stub(d, dev.transpose(0, 1), host);
  prof.stop();
  test::require_close(dev.transpose(0, 1).to(Device::cpu()), host);
  const ProfileEvent *outer = nullptr, *inner = nullptr;
  for (const ProfileEvent& e : prof.events())
    if (e.kind == ProfileEvent::Kind::op) (e.nested ? inner : outer) = &e;
  REQUIRE(outer != nullptr);
  REQUIRE(inner != nullptr);
  CHECK(outer->name == "transfer");
  CHECK(inner->name == "copy");
  CHECK_THAT(outer->kernel, Contains("memcpy HtoD"));
  CHECK_FALSE(inner->kernel.empty());
  REQUIRE(outer->device_timed());
  REQUIRE(inner->device_timed());
  CHECK(prof.device_timing().pairs == 2);
  CHECK(outer->device_start_ns <= inner->device_start_ns);
  CHECK(inner->device_start_ns + inner->device_dur_ns <= outer->device_start_ns + outer->device_dur_ns);
  CHECK(prof.op_total_ns() == outer->device_dur_ns);  // the nested op is not counted twice
  test::check_trace(prof.chrome_trace());  // the two device spans nest on the stream's track
}
