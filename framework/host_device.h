// HG_HOST_DEVICE: the one qualifier for functions that CUDA kernels and host code both call
// (index maps, per-element math), so the two run one copy of the code.
#pragma once

// nvcc compiles them for both sides; the host compiler (the CPU build, and the CUDA
// emulation, which runs kernels as host code) sees plain inline functions.
#if defined(__CUDACC__)
#define HG_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define HG_HOST_DEVICE inline
#endif
