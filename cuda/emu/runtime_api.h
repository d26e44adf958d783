// The subset of the CUDA runtime API that halfgrad's backend uses, implemented on the host
// for two emulated devices (so that multi-GPU device handling is tested too): device
// memory is host memory, streams and events are host objects of the device current when
// they were made, and work runs synchronously when it is issued. Names and signatures follow
// cuda_runtime_api.h so cuda/ compiles unchanged against either.
#pragma once
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

struct uint3 {
  unsigned int x, y, z;
};

struct dim3 {
  unsigned int x, y, z;
  constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
  constexpr operator uint3() const { return {x, y, z}; }
};

// The values of the real enum, so that messages and numbers match the CUDA documentation.
enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidDevicePointer = 17,
  cudaErrorInvalidMemcpyDirection = 21,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidDevice = 101,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorNotReady = 600,
  cudaErrorLaunchFailure = 719,
};
using cudaError = cudaError_t;

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};

enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };

struct CUstream_st;
using cudaStream_t = CUstream_st*;
struct CUevent_st;
using cudaEvent_t = CUevent_st*;

inline constexpr unsigned int cudaStreamNonBlocking = 0x01;
inline constexpr unsigned int cudaEventDefault = 0x00;
inline constexpr unsigned int cudaEventDisableTiming = 0x02;

// The fields the backend reads; the emulated device describes an sm_80-class GPU by default,
// or an sm_90 one (HG_EMU_CC=9.0, emu::set_compute_capability): the primitives model both
// (sm_90's wgmma, TMA and mbarrier in cuda/emu/async_units.cpp).
struct cudaDeviceProp {
  char name[256];
  size_t totalGlobalMem;
  size_t sharedMemPerBlock;
  size_t sharedMemPerBlockOptin;
  int warpSize;
  int maxThreadsPerBlock;
  int maxThreadsDim[3];
  int maxGridSize[3];
  int major;
  int minor;
  int multiProcessorCount;
};

cudaError_t cudaGetDeviceCount(int* count);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDevice(int* device);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device);
cudaError_t cudaDeviceSynchronize();
cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();
const char* cudaGetErrorString(cudaError_t error);

cudaError_t cudaMalloc(void** ptr, size_t size);
cudaError_t cudaFree(void* ptr);
cudaError_t cudaMemGetInfo(size_t* free, size_t* total);
// Page-locked host memory: ordinary host memory here (the emulated copies are synchronous).
cudaError_t cudaMallocHost(void** ptr, size_t size);
cudaError_t cudaFreeHost(void* ptr);
cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, cudaMemcpyKind kind, cudaStream_t stream = nullptr);
cudaError_t cudaMemset(void* ptr, int value, size_t count);
cudaError_t cudaMemsetAsync(void* ptr, int value, size_t count, cudaStream_t stream = nullptr);

cudaError_t cudaStreamCreate(cudaStream_t* stream);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaStreamQuery(cudaStream_t stream);
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags = 0);

cudaError_t cudaEventCreate(cudaEvent_t* event);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags);
cudaError_t cudaEventDestroy(cudaEvent_t event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream = nullptr);
cudaError_t cudaEventQuery(cudaEvent_t event);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end);

enum cudaDeviceAttr { cudaDevAttrMultiProcessorCount = 16 };
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device);

// Driver entry points: the emulation has one, cuTensorMapEncodeTiled (cuda/emu/tma_model.h).
enum cudaDriverEntryPointQueryResult {
  cudaDriverEntryPointSuccess = 0,
  cudaDriverEntryPointSymbolNotFound = 1,
  cudaDriverEntryPointVersionNotSufficent = 2,
};
inline constexpr unsigned long long cudaEnableDefault = 0;
cudaError_t cudaGetDriverEntryPointByVersion(const char* symbol, void** func, unsigned int cuda_version,
                                             unsigned long long flags, cudaDriverEntryPointQueryResult* status);

// The emulation has no 48 KiB default to opt out of: every size the launcher accepts runs.
template <class Kernel>
cudaError_t cudaFuncSetAttribute(Kernel*, cudaFuncAttribute, int) {
  return cudaSuccess;
}

namespace hg::cuda::emu {
// The compute capability emulated cuda:device reports: 8.0 (the default; HG_EMU_CC=9.0 makes
// every device an sm_90) or 9.0, which also raises the shared memory a block may opt in to
// (227 KiB) and gives the device 2 SMs, so persistent grids stride. Throws hg::Error for others.
void set_compute_capability(int device, int major, int minor);
// The SM count emulated cuda:device reports (cudaDevAttrMultiProcessorCount), so host code
// makes the choices it would make on a real GPU (132 for an H200's tile widths and split-K):
// 1 to 1024, or 0 for the default (the HG_EMU_SMS environment variable when set, else 2 for
// an sm_90 model and 1 for an sm_80 one). Only what the heuristics see changes: blocks still
// run on the emulation's host threads. Throws hg::Error for anything else.
void set_multiprocessor_count(int device, int sms);
// The value set by set_multiprocessor_count (0: none), so a scope guard can restore it.
int multiprocessor_count_override(int device);
// Caps each emulated device's memory so tests can exercise out-of-memory paths; 0 restores
// the default (half the host's physical memory).
void set_memory_limit(size_t bytes);
// Bytes currently held by cudaMalloc on emulated cuda:device.
size_t memory_allocated(int device = 0);
// Called by every emulated launch before the grid runs: as the real runtime, a kernel may
// only be launched on a stream of the current device (cudaErrorInvalidResourceHandle
// otherwise); counts the launch for that device.
cudaError_t begin_launch(cudaStream_t stream);
// Kernels launched so far on emulated cuda:device.
size_t launches(int device);
// The device whose cudaMalloc holds address p, or -1 when none does.
int device_of(const void* p);
// Records err as the thread's last error (as a failed launch does) and returns it.
cudaError_t set_last_error(cudaError_t err);
// Every live allocation as [begin, end) addresses (the racecheck's device memory).
std::vector<std::pair<uintptr_t, uintptr_t>> device_ranges();
}  // namespace hg::cuda::emu
