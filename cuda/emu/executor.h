// The CUDA execution model on the CPU. A grid's blocks run on a few host threads, one
// block per host thread at a time; a block's CUDA threads are fibers that run, between two
// synchronisation points, in an order drawn from a seeded generator, so a kernel that
// forgets a __syncthreads gives different answers under different seeds. Barriers and warp
// collectives are rendezvous: a fiber that arrives waits (yields) until all it waits for
// have arrived. A deadlock, a misused collective or any emulation check raises hg::Error
// naming the block and the seed (HG_EMU_SEED) that replays the schedule.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "cuda/emu/runtime_api.h"
#include "cuda/emu/shared_window.h"

// The built-in variables, per CUDA thread: the scheduler sets them for each fiber it runs.
extern thread_local uint3 threadIdx;
extern thread_local uint3 blockIdx;
extern thread_local dim3 blockDim;
extern thread_local dim3 gridDim;

namespace hg::cuda::emu {

// What each CUDA thread runs: invoke(ctx), typically the kernel with its arguments.
struct KernelBody {
  void (*invoke)(const void* ctx);
  const void* ctx;
  const void* kernel = nullptr;  // the kernel function and its name (may be null), for the
  const char* name = nullptr;    // check reports
};

// Runs every block of the grid and returns when all are done (launches are synchronous).
// Throws hg::Error on an emulation failure; the launcher has checked the configuration.
void run_grid(dim3 grid, dim3 block, size_t dynamic_smem_bytes, KernelBody body);

// The schedule seed: HG_EMU_SEED when set, otherwise drawn once per process and printed
// at the first launch. A block's schedule depends only on the seed and the block's index,
// so a failure replays with the same seed whatever ran before it.
uint64_t seed();
void set_seed(uint64_t s);
// Host threads that run blocks in parallel: HG_EMU_THREADS, default min(4, cores).
int host_threads();
void set_host_threads(int n);

// --- Called from inside a kernel (on a fiber) ---------------------------------------
bool in_kernel();
void block_barrier();          // __syncthreads
void* dynamic_shared_memory(); // the block's `extern __shared__` buffer (nullptr if none)
unsigned lane_id();
// Throws hg::Error: what went wrong, with the CUDA thread and block that did it.
[[noreturn]] void fail(const std::string& what);

// A warp collective: every lane named in `mask` that exists in the warp calls this with
// the same `op` (a static string naming the instruction) and `combine`; the last lane to
// arrive runs combine(lanes, members) once for all of them, where lanes[i] holds lane
// i's `in` and `out` pointers (valid for lanes in members); then each lane returns.
struct LaneSlot {
  const void* in;
  void* out;
};
using Combine = void (*)(const LaneSlot* lanes, uint32_t members);
void warp_collective(uint32_t mask, const char* op, Combine combine, const void* in, void* out);

// cp.async: the copy is queued on the calling thread and done at the cp_async_wait that
// retires its group (or when the thread exits), never earlier, so a kernel that reads the
// destination before waiting reads stale data under emulation too.
void cp_async(void* dst, const void* src, unsigned cp_bytes, unsigned src_bytes);
void cp_async_commit();
void cp_async_wait(unsigned groups_left_pending);

// A wait on a condition that other threads or asynchronous work make true (mbarrier phases,
// warpgroup rendezvous, named barriers): the calling thread yields until ready(ctx) holds,
// re-evaluated between scheduling rounds; when no thread can run, no barrier can open and no
// asynchronous work is left to land, the block deadlocks and the report names `what`.
void wait_until(bool (*ready)(const void* ctx), const void* ctx, const char* what);
// The calling thread has acquired (passed an mbarrier phase or named barrier): the racecheck
// treats shared-memory accesses of other threads before this point as ordered before its later ones.
void acquire();
// Asynchronous work (a TMA copy): done at a later scheduling round drawn from the schedule's
// generator, and at the latest when nothing else can make progress or the block ends; never
// while the issuing thread still runs. The job must not touch a fiber's stack.
void post_async(std::function<void()> job);
// The block's dynamic shared memory as shared-window addresses (cuda/emu/shared_window.h).
// They start at a base that is 16-byte aligned and not 128-byte aligned (as if the block had
// static shared memory in front), so kernels that align their tiles must do so by address.
SharedWindow shared_window();
uint32_t shared_window_address(const void* p);
// The calling thread's index in its block (x fastest) and the block's thread count.
unsigned thread_linear();
unsigned block_threads();
// State of the asynchronous units (cuda/emu/async_units.cpp) for the running block: created
// on first use, destroyed with the block.
struct AsyncUnits;
AsyncUnits& async_units();

// Every load, store and atomic of kernel code (cuda/emu/memory_hooks.cpp), `pc` the
// instruction after it: the racecheck/initcheck of cuda/emu/racecheck.h and the seeded
// preemption at stores, when enabled; otherwise (or outside a kernel) nothing.
enum class Access : uint8_t;
void memory_access(const void* addr, size_t n, Access kind, const void* pc);

}  // namespace hg::cuda::emu
