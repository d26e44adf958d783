// The device half of hg::Profiler's recording, for profiler.cpp only: one session of the
// backend's DeviceTimer per profiler, the pair each committed event carries, the allocator
// bytes of cuda ops, and the resolution of the pairs at stop().
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "framework/profiler.h"

namespace hg::profiler_hook::timing {

// A profiler starts: a session of the registered timer, if there is one.
void begin(std::chrono::steady_clock::time_point t0, size_t capacity);
// Pairs are recorded (a session runs and no CUDA call failed).
bool on();
// The start of an op's pair at its first device work; -1 when not timing. A CUDA failure
// ends timing for the session (the op keeps running).
int64_t start(Device device, void* stream);
void end(int64_t pair, Device device, void* stream) noexcept;
// The caching allocator of a cuda op's device, as the op ends.
void allocator_bytes(ProfileEvent& ev) noexcept;
// The event at `index` of the profiler's list carries `pair` (called as it is committed).
void committed(size_t index, int64_t pair);
// stop(), before it takes the wall time: waits for the device work of the pairs.
void synchronize() noexcept;
// stop(), after: the spans into the events (none at all if timing failed); ends the session.
DeviceTimingStats finish(std::vector<ProfileEvent>& events);

}  // namespace hg::profiler_hook::timing
