// Launch-configuration checks against the device's limits, shared by native and emulated
// launches so a bad configuration fails the same way in CI as on a GPU.
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "cuda/kernel_log.h"
#include "cuda/launch_config.h"
#include "cuda/profiler_events.h"
#include "cuda/runtime.h"
#include "framework/error.h"

namespace hg::cuda {

namespace {
// Cached: a GPU's properties do not change. The emulated devices' can (a test makes cuda:0 an
// sm_90 model for its scope, emu::set_compute_capability), so they are asked each time,
// into the calling thread's copy (valid until its next call).
const cudaDeviceProp& properties(int device) {
#if defined(HG_CUDA_EMULATION)
  thread_local cudaDeviceProp p{};
  HG_CUDA_CHECK(cudaGetDeviceProperties(&p, device));
  return p;
#else
  static std::mutex mu;
  static std::vector<cudaDeviceProp> props;
  std::lock_guard<std::mutex> lock(mu);
  if (props.empty()) {
    props.resize(static_cast<size_t>(device_count()));
    for (int i = 0; i < device_count(); ++i) HG_CUDA_CHECK(cudaGetDeviceProperties(&props[static_cast<size_t>(i)], i));
  }
  return props[static_cast<size_t>(device)];
#endif
}

std::mutex g_raised_mu;
std::map<std::pair<const void*, int>, size_t> g_raised;

std::string dims(dim3 d) { return detail::concat("(", d.x, ", ", d.y, ", ", d.z, ")"); }
}  // namespace

size_t shared_limit_raised(const void* kernel, int device) {
  std::lock_guard<std::mutex> lock(g_raised_mu);
  const auto it = g_raised.find({kernel, device});
  return it == g_raised.end() ? 0 : it->second;
}

void mark_shared_limit_raised(const void* kernel, int device, size_t bytes) {
  std::lock_guard<std::mutex> lock(g_raised_mu);
  g_raised[{kernel, device}] = bytes;
}

void check_launch(const LaunchConfig& cfg) {
  const int dev = cfg.stream.device();
  HG_CHECK(dev >= 0 && dev < device_count(), "launch: cuda:", dev, " does not exist: ", device_count(),
           " CUDA device(s) available");
  const cudaDeviceProp& p = properties(dev);
  const std::string kernel = cfg.name ? detail::concat("launch of ", cfg.name) : std::string("kernel launch");
  const dim3 b = cfg.block, g = cfg.grid;
  const unsigned long long threads = 1ull * b.x * b.y * b.z;
  HG_CHECK(b.x >= 1 && b.y >= 1 && b.z >= 1 && b.x <= static_cast<unsigned>(p.maxThreadsDim[0]) &&
               b.y <= static_cast<unsigned>(p.maxThreadsDim[1]) && b.z <= static_cast<unsigned>(p.maxThreadsDim[2]) &&
               threads <= static_cast<unsigned long long>(p.maxThreadsPerBlock),
           kernel, ": block ", dims(b), " is invalid on cuda:", dev, "; valid: each dimension >= 1, x <= ",
           p.maxThreadsDim[0], ", y <= ", p.maxThreadsDim[1], ", z <= ", p.maxThreadsDim[2], ", and at most ",
           p.maxThreadsPerBlock, " threads in all");
  HG_CHECK(g.x >= 1 && g.y >= 1 && g.z >= 1 && g.x <= static_cast<unsigned>(p.maxGridSize[0]) &&
               g.y <= static_cast<unsigned>(p.maxGridSize[1]) && g.z <= static_cast<unsigned>(p.maxGridSize[2]),
           kernel, ": grid ", dims(g), " is invalid on cuda:", dev, "; valid: each dimension >= 1, x <= ",
           p.maxGridSize[0], ", y <= ", p.maxGridSize[1], ", z <= ", p.maxGridSize[2]);
  HG_CHECK(cfg.shared_bytes <= p.sharedMemPerBlockOptin, kernel, ": ", cfg.shared_bytes,
           " bytes of dynamic shared memory per block exceed the ", p.sharedMemPerBlockOptin, " bytes cuda:", dev,
           " (", p.name, ") allows");
  log_kernel_launch(cfg.name);
  note_device_work(cfg.stream);
}

}  // namespace hg::cuda
