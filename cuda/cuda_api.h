// The CUDA runtime API for the backend's .cpp and .cu files: the real one natively, the
// host implementation in cuda/emu/ under -Dcuda-emulation=true. Include only from cuda/.
#pragma once
#ifdef HG_CUDA_EMULATION
#include "cuda/emu/runtime_api.h"
#else
#include <cuda_runtime.h>
#endif
