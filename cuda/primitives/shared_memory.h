// The block's dynamic shared memory (the LaunchConfig's shared_bytes), 16-byte aligned.
// Kernels use this instead of `extern __shared__`, which has no host equivalent.
#pragma once
#include "cuda/primitives/common.h"

namespace hg::cuda {

template <class T>
HG_DEVICE T* dynamic_shared_memory() {
#if defined(HG_CUDA_EMULATION)
  return static_cast<T*>(emu::dynamic_shared_memory());
#else
  extern __shared__ __align__(16) unsigned char hg_dynamic_smem[];
  return reinterpret_cast<T*>(hg_dynamic_smem);
#endif
}

}  // namespace hg::cuda
