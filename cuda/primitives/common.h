// What every primitive header needs: the qualifiers, and under the emulation its side of
// the instructions. A primitive is one small function per PTX instruction: inline PTX
// natively, the emulator (cuda/emu/collectives.h) under -Dcuda-emulation=true.
#pragma once
#include <cstdint>

// HG_HOST_DEVICE, for index arithmetic shared by kernels and host code (fragment maps,
// swizzles): callable on the device and testable by plain host unit tests.
#include "framework/host_device.h"

#if defined(HG_CUDA_EMULATION)
#include "cuda/emu/async_ops.h"
#include "cuda/emu/collectives.h"
#include "cuda/emu/emu.h"
#include "cuda/emu/executor.h"
#endif

#define HG_DEVICE __device__ __forceinline__
