// Host entry points of race_kernels.cu: small kernels with and without the races, unwritten
// shared memory and early cp.async reads that the emulation's memory checks must report
// (cuda/emu/racecheck.h). Each copies its data to cuda:0, launches, and copies back.
#pragma once
#include <cstdint>
#include <vector>

namespace hg::test::kernels {

// `blocks` blocks of `threads` threads; each thread adds 1 to one shared slot, atomically
// or with a plain +=; returns each block's final count.
std::vector<uint32_t> shared_count(unsigned blocks, unsigned threads, bool atomic);
// Thread 0 of each of `blocks` blocks adds 1 to one device-memory counter.
uint32_t global_count(unsigned blocks, bool atomic);
// One block of 64 threads reads a static __shared__ array, after writing it or not.
std::vector<uint32_t> read_static_shared(bool write_first);
// One warp: each lane stores its value in shared memory, bar.warp.sync, reads lane ^ 1's.
std::vector<uint32_t> warp_exchange();
// One warp cp.asyncs 16 bytes per lane to shared memory and reads the first word back,
// before or after the cp.async.wait_group that completes the copy.
std::vector<uint32_t> cp_async_then_read(const std::vector<uint32_t>& src, bool before_wait);
// 64 threads read a shared word; then thread 32 overwrites it, after a barrier or not.
std::vector<uint32_t> read_then_overwrite(bool barrier);

}  // namespace hg::test::kernels
