// The cuda backend's side of hg::Profiler: the timer of cuda ops (CUDA event pairs around
// each op's work, resolved in bulk; runtime.cpp registers it) and the hook through which
// launches and copies say where their work goes.
#pragma once

#include "cuda/stream.h"

namespace hg::profiler_hook {
class DeviceTimer;
}

namespace hg::cuda {

profiler_hook::DeviceTimer& profiler_event_timer();

// Device work about to be issued to `stream`: a kernel launch (check_launch calls this after
// log_kernel_launch, which names the kernel) or a copy, named here ("memcpy DtoD") for the
// profiler's Kernel column. A recording profiler times the open op from its first such call.
void note_device_work(Stream stream, const char* copy = nullptr);

}  // namespace hg::cuda
