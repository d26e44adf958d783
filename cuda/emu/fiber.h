// Fibers for the CUDA emulation: every CUDA thread of a block runs on its own stack and
// hands control back to the block's scheduler at each barrier or warp collective. Switches
// are announced to AddressSanitizer so the emulation runs clean under -fsanitize=address.
#pragma once
#include <cstddef>
#include <cstdint>

namespace hg::cuda::emu {

void fiber_main();  // the first frame of every fiber (internal)

// Bytes of stack per CUDA thread. Kernel frames are small (fragments, a few tile
// registers); under AddressSanitizer frames grow with their redzones, hence the margin.
inline constexpr size_t kFiberStackBytes = 256 * 1024;

class Fiber {
 public:
  Fiber() = default;
  ~Fiber();
  Fiber(const Fiber&) = delete;
  Fiber& operator=(const Fiber&) = delete;

  // Arms the fiber to run entry(arg) from its first resume(). A fiber that was abandoned
  // mid-run (its block failed) may be armed again: its stack is reset.
  void start(void (*entry)(void*), void* arg);
  // Called by the scheduler: runs the fiber until it yields or its entry returns.
  void resume();
  // Called on the fiber: returns to the scheduler; resume() continues after this call.
  void yield();
  bool finished() const { return finished_; }
  bool on_stack(uintptr_t a) const { return a - reinterpret_cast<uintptr_t>(stack_) < kFiberStackBytes; }

 private:
  friend void fiber_main();

  void* stack_ = nullptr;  // lowest usable address; a guard page lies below it
  void* sp_ = nullptr;     // the fiber's saved context while it is suspended
  void* scheduler_sp_ = nullptr;
  void (*entry_)(void*) = nullptr;
  void* arg_ = nullptr;
  bool started_ = false, finished_ = true;
  // AddressSanitizer's bookkeeping for the two stacks (unused without it).
  void* fake_stack_ = nullptr;
  void* scheduler_fake_stack_ = nullptr;
  const void* scheduler_bottom_ = nullptr;
  size_t scheduler_size_ = 0;
};

}  // namespace hg::cuda::emu
