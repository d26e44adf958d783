// The CUDA runtime API on the host, for the emulated devices. Every call checks what the
// real runtime checks (known device pointers, ranges inside one allocation, valid handles,
// streams and events of the current device) and answers with the same error codes, so the
// backend's error paths, multi-device ones included, run in CI too.
#include "cuda/emu/runtime_api.h"

#include "cuda/emu/host_waits.h"
#include "cuda/emu/tma_model.h"
#include "framework/error.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

namespace {

thread_local cudaError_t t_last_error = cudaSuccess;
std::atomic<int64_t> g_host_waits{0};

cudaError_t waited() {
  g_host_waits.fetch_add(1, std::memory_order_relaxed);
  return cudaSuccess;
}

cudaError_t fail(cudaError_t e) {
  t_last_error = e;
  return e;
}

size_t default_memory_limit() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(page) / 2 : size_t{8} << 30;
}

constexpr int kDevices = 2;

// Per device: 80 or 90; -1 until first asked (then HG_EMU_CC decides).
std::atomic<int> g_cc[kDevices] = {-1, -1};

int compute_capability(int device) {
  int cc = g_cc[device].load();
  if (cc > 0) return cc;
  cc = 80;
  if (const char* env = std::getenv("HG_EMU_CC"); env && *env) {
    if (std::strcmp(env, "9.0") == 0) cc = 90;
    else if (std::strcmp(env, "8.0") != 0)
      throw hg::Error(hg::detail::concat("HG_EMU_CC='", env, "' is not an emulated compute capability; valid: 8.0, 9.0"));
  }
  int expected = -1;
  g_cc[device].compare_exchange_strong(expected, cc);
  return g_cc[device].load();
}

// Per device: the SM count set by emu::set_multiprocessor_count, or 0 for the default
// (HG_EMU_SMS when set, else 2 for an sm_90 model and 1 for an sm_80 one).
std::atomic<int> g_sms[kDevices] = {0, 0};

int env_multiprocessor_count() {
  static const int n = [] {
    const char* env = std::getenv("HG_EMU_SMS");
    if (!env || !*env) return 0;
    char* end = nullptr;
    const long v = std::strtol(env, &end, 10);
    if (*end != '\0' || v < 1 || v > 1024)
      throw hg::Error(hg::detail::concat("HG_EMU_SMS='", env, "' is not an SM count; valid: an integer from 1 to 1024"));
    return static_cast<int>(v);
  }();
  return n;
}

int multiprocessor_count(int device, int cc) {
  if (const int n = g_sms[device].load(); n > 0) return n;
  if (const int n = env_multiprocessor_count(); n > 0) return n;
  return cc == 90 ? 2 : 1;
}

struct Block {
  size_t size;
  int device;
};

// Device allocations by start address, for cudaFree and for the range checks of copies;
// each device has its own limit and count.
struct DeviceMemory {
  std::mutex mu;
  std::map<uintptr_t, Block> blocks;
  size_t allocated[kDevices] = {};
  size_t limit = default_memory_limit();
  size_t launches[kDevices] = {};

  // True when [p, p+n) lies inside one allocation.
  bool contains(const void* p, size_t n) {
    std::lock_guard<std::mutex> lock(mu);
    const auto a = reinterpret_cast<uintptr_t>(p);
    auto it = blocks.upper_bound(a);
    if (it == blocks.begin()) return false;
    --it;
    return a - it->first <= it->second.size && n <= it->second.size - (a - it->first);
  }
};

DeviceMemory& memory() {
  static DeviceMemory m;
  return m;
}

// The current device is per host thread, as in CUDA.
thread_local int t_device = 0;

}  // namespace

struct CUstream_st {
  int device = 0;
};

struct CUevent_st {
  int device = 0;
  bool timing = true;
  bool recorded = false;
  std::chrono::steady_clock::time_point when;
};

cudaError_t cudaGetDeviceCount(int* count) {
  if (!count) return fail(cudaErrorInvalidValue);
  *count = kDevices;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (device < 0 || device >= kDevices) return fail(cudaErrorInvalidDevice);
  t_device = device;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  if (!device) return fail(cudaErrorInvalidValue);
  *device = t_device;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (!prop) return fail(cudaErrorInvalidValue);
  if (device < 0 || device >= kDevices) return fail(cudaErrorInvalidDevice);
  *prop = {};
  const int cc = compute_capability(device);
  std::strncpy(prop->name, cc == 90 ? "halfgrad CUDA emulation (sm_90 model)" : "halfgrad CUDA emulation (sm_80 model)",
               sizeof(prop->name) - 1);
  prop->totalGlobalMem = memory().limit;
  prop->sharedMemPerBlock = 48 * 1024;
  prop->sharedMemPerBlockOptin = cc == 90 ? 227 * 1024 : 163 * 1024;  // an H100's / an A100's opt-in limit
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  prop->maxThreadsDim[0] = 1024;
  prop->maxThreadsDim[1] = 1024;
  prop->maxThreadsDim[2] = 64;
  prop->maxGridSize[0] = 2147483647;
  prop->maxGridSize[1] = 65535;
  prop->maxGridSize[2] = 65535;
  prop->major = cc / 10;
  prop->minor = cc % 10;
  prop->multiProcessorCount = multiprocessor_count(device, cc);
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  if (!value) return fail(cudaErrorInvalidValue);
  if (device < 0 || device >= kDevices) return fail(cudaErrorInvalidDevice);
  if (attr != cudaDevAttrMultiProcessorCount) return fail(cudaErrorInvalidValue);
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, device);
  *value = prop.multiProcessorCount;
  return cudaSuccess;
}

cudaError_t cudaGetDriverEntryPointByVersion(const char* symbol, void** func, unsigned int, unsigned long long,
                                             cudaDriverEntryPointQueryResult* status) {
  if (!symbol || !func) return fail(cudaErrorInvalidValue);
  const bool known = std::strcmp(symbol, "cuTensorMapEncodeTiled") == 0;
  *func = known ? reinterpret_cast<void*>(&hg::cuda::emu::encode_tensor_map_tiled) : nullptr;
  if (status) *status = known ? cudaDriverEntryPointSuccess : cudaDriverEntryPointSymbolNotFound;
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() { return waited(); }

cudaError_t cudaGetLastError() {
  const cudaError_t e = t_last_error;
  t_last_error = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError() { return t_last_error; }

const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevicePointer: return "invalid device pointer";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
  }
  return "unrecognized error code";
}

cudaError_t cudaMalloc(void** ptr, size_t size) {
  if (!ptr) return fail(cudaErrorInvalidValue);
  *ptr = nullptr;
  if (size == 0) return cudaSuccess;
  DeviceMemory& m = memory();
  {
    std::lock_guard<std::mutex> lock(m.mu);
    if (size > m.limit - std::min(m.allocated[t_device], m.limit)) return fail(cudaErrorMemoryAllocation);
    m.allocated[t_device] += size;
  }
  // Exactly `size` bytes, so AddressSanitizer sees the true end of the allocation; 256-byte
  // alignment as cudaMalloc guarantees.
  void* p = nullptr;
  if (posix_memalign(&p, 256, size) != 0) {
    std::lock_guard<std::mutex> lock(m.mu);
    m.allocated[t_device] -= size;
    return fail(cudaErrorMemoryAllocation);
  }
  std::lock_guard<std::mutex> lock(m.mu);
  m.blocks.emplace(reinterpret_cast<uintptr_t>(p), Block{size, t_device});
  *ptr = p;
  return cudaSuccess;
}

cudaError_t cudaFree(void* ptr) {
  if (!ptr) return cudaSuccess;
  DeviceMemory& m = memory();
  {
    std::lock_guard<std::mutex> lock(m.mu);
    auto it = m.blocks.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == m.blocks.end()) return fail(cudaErrorInvalidDevicePointer);
    m.allocated[it->second.device] -= it->second.size;
    m.blocks.erase(it);
  }
  std::free(ptr);
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void** ptr, size_t size) {
  if (!ptr) return fail(cudaErrorInvalidValue);
  *ptr = nullptr;
  if (size == 0) return cudaSuccess;
  if (posix_memalign(ptr, 256, size) != 0) return fail(cudaErrorMemoryAllocation);
  return cudaSuccess;
}

cudaError_t cudaFreeHost(void* ptr) {
  std::free(ptr);
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t* free, size_t* total) {
  if (!free || !total) return fail(cudaErrorInvalidValue);
  std::lock_guard<std::mutex> lock(memory().mu);
  *total = memory().limit;
  *free = memory().limit - std::min(memory().allocated[t_device], memory().limit);
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
  if (count == 0) return cudaSuccess;
  if (!dst || !src) return fail(cudaErrorInvalidValue);
  DeviceMemory& m = memory();
  const bool dst_device = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  const bool src_device = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault) return fail(cudaErrorInvalidMemcpyDirection);
  if ((dst_device && !m.contains(dst, count)) || (src_device && !m.contains(src, count)))
    return fail(cudaErrorInvalidValue);
  std::memmove(dst, src, count);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, cudaMemcpyKind kind, cudaStream_t) {
  return cudaMemcpy(dst, src, count, kind);
}

cudaError_t cudaMemset(void* ptr, int value, size_t count) {
  if (count == 0) return cudaSuccess;
  if (!memory().contains(ptr, count)) return fail(cudaErrorInvalidValue);
  std::memset(ptr, value, count);
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* ptr, int value, size_t count, cudaStream_t) { return cudaMemset(ptr, value, count); }

cudaError_t cudaStreamCreate(cudaStream_t* stream) { return cudaStreamCreateWithFlags(stream, 0); }

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int) {
  if (!stream) return fail(cudaErrorInvalidValue);
  *stream = new CUstream_st{t_device};
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (!stream) return fail(cudaErrorInvalidResourceHandle);
  delete stream;
  return cudaSuccess;
}

// Work is done when it is issued, so a stream is always idle.
cudaError_t cudaStreamSynchronize(cudaStream_t) { return waited(); }
cudaError_t cudaStreamQuery(cudaStream_t) { return cudaSuccess; }

cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t event, unsigned int) {
  return event ? cudaSuccess : fail(cudaErrorInvalidResourceHandle);
}

cudaError_t cudaEventCreate(cudaEvent_t* event) { return cudaEventCreateWithFlags(event, cudaEventDefault); }

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  if (!event) return fail(cudaErrorInvalidValue);
  *event = new CUevent_st{t_device, (flags & cudaEventDisableTiming) == 0, false, {}};
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  if (!event) return fail(cudaErrorInvalidResourceHandle);
  delete event;
  return cudaSuccess;
}

// An event records on streams of the device it was made on; the default stream (nullptr)
// is the current device's.
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (!event) return fail(cudaErrorInvalidResourceHandle);
  if (event->device != (stream ? stream->device : t_device)) return fail(cudaErrorInvalidResourceHandle);
  event->recorded = true;
  event->when = std::chrono::steady_clock::now();
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t event) { return event ? cudaSuccess : fail(cudaErrorInvalidResourceHandle); }

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  return event ? waited() : fail(cudaErrorInvalidResourceHandle);
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (!ms) return fail(cudaErrorInvalidValue);
  if (!start || !end || !start->timing || !end->timing) return fail(cudaErrorInvalidResourceHandle);
  if (!start->recorded || !end->recorded) return fail(cudaErrorInvalidResourceHandle);
  *ms = std::chrono::duration<float, std::milli>(end->when - start->when).count();
  return cudaSuccess;
}

namespace hg::cuda::emu {

void set_compute_capability(int device, int major, int minor) {
  HG_CHECK(device >= 0 && device < kDevices, "cuda emulation: device ", device, " does not exist; valid: 0 to ", kDevices - 1);
  HG_CHECK((major == 8 || major == 9) && minor == 0, "cuda emulation: compute capability ", major, ".", minor,
           " is not emulated; valid: 8.0, 9.0");
  g_cc[device].store(major * 10 + minor);
}

void set_multiprocessor_count(int device, int sms) {
  HG_CHECK(device >= 0 && device < kDevices, "cuda emulation: device ", device, " does not exist; valid: 0 to ", kDevices - 1);
  HG_CHECK(sms >= 0 && sms <= 1024, "cuda emulation: ", sms, " is not an SM count; valid: 1 to 1024, or 0 for the default");
  g_sms[device].store(sms);
}

int multiprocessor_count_override(int device) {
  HG_CHECK(device >= 0 && device < kDevices, "cuda emulation: device ", device, " does not exist; valid: 0 to ", kDevices - 1);
  return g_sms[device].load();
}


std::vector<std::pair<uintptr_t, uintptr_t>> device_ranges() {
  DeviceMemory& m = memory();
  std::lock_guard<std::mutex> lock(m.mu);
  std::vector<std::pair<uintptr_t, uintptr_t>> out;
  out.reserve(m.blocks.size());
  for (const auto& [begin, b] : m.blocks) out.emplace_back(begin, begin + b.size);
  return out;
}

cudaError_t begin_launch(cudaStream_t stream) {
  if (stream && stream->device != t_device) return fail(cudaErrorInvalidResourceHandle);
  std::lock_guard<std::mutex> lock(memory().mu);
  ++memory().launches[t_device];
  return cudaSuccess;
}

size_t launches(int device) {
  std::lock_guard<std::mutex> lock(memory().mu);
  return device >= 0 && device < kDevices ? memory().launches[device] : 0;
}

int device_of(const void* p) {
  DeviceMemory& m = memory();
  std::lock_guard<std::mutex> lock(m.mu);
  const auto a = reinterpret_cast<uintptr_t>(p);
  auto it = m.blocks.upper_bound(a);
  if (it == m.blocks.begin()) return -1;
  --it;
  return a - it->first < it->second.size ? it->second.device : -1;
}

void set_memory_limit(size_t bytes) {
  std::lock_guard<std::mutex> lock(memory().mu);
  memory().limit = bytes ? bytes : default_memory_limit();
}

size_t memory_allocated(int device) {
  std::lock_guard<std::mutex> lock(memory().mu);
  return device >= 0 && device < kDevices ? memory().allocated[device] : 0;
}

cudaError_t set_last_error(cudaError_t err) { return fail(err); }

int64_t host_waits() { return g_host_waits.load(std::memory_order_relaxed); }

}  // namespace hg::cuda::emu
