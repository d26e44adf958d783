// The fiber context switch (x86-64, System V) and the pool of fiber stacks.
// A switch saves the callee-saved registers and the SSE/x87 control words on the old
// stack, stores the stack pointer, and pops the same from the new stack: about a dozen
// instructions, where ucontext's swapcontext would also make a signal-mask system call.
#include "cuda/emu/fiber.h"

#include <sys/mman.h>

#include <cstdint>
#include <mutex>
#include <new>
#include <vector>

#include "framework/error.h"

#if !defined(__x86_64__)
#error "the CUDA emulation's fiber switch is written for x86-64; port hg_emu_switch to this architecture"
#endif

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define HG_EMU_ASAN 1
#endif

extern "C" void hg_emu_switch(void** save_sp, void* load_sp);
extern "C" void hg_emu_fiber_entry();

asm(R"(
  .text
  .globl hg_emu_switch
  .hidden hg_emu_switch
  .type hg_emu_switch, @function
hg_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size hg_emu_switch, .-hg_emu_switch
  .section .note.GNU-stack,"",@progbits
  .text
)");

namespace hg::cuda::emu {

namespace {

constexpr size_t kGuardBytes = 4096;

// Stacks are mapped once and reused: a launch makes one fiber per CUDA thread of a block,
// and mapping 256 KiB per fiber each time would dominate small kernels.
struct StackPool {
  std::mutex mu;
  std::vector<void*> free;

  void* take() {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!free.empty()) {
        void* s = free.back();
        free.pop_back();
        return s;
      }
    }
    void* base = mmap(nullptr, kFiberStackBytes + kGuardBytes, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) throw Error("cuda emulation: could not map a fiber stack (out of memory)");
    mprotect(base, kGuardBytes, PROT_NONE);  // an overflow faults instead of corrupting a neighbour
    return static_cast<char*>(base) + kGuardBytes;
  }
  void give(void* s) {
    std::lock_guard<std::mutex> lock(mu);
    free.push_back(s);
  }
};

StackPool& pool() {
  static StackPool* p = new StackPool;  // never destroyed: fibers may outlive static destruction order
  return *p;
}

thread_local Fiber* t_starting = nullptr;

}  // namespace

void fiber_main() {
  Fiber* f = t_starting;
#ifdef HG_EMU_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &f->scheduler_bottom_, &f->scheduler_size_);
#endif
  f->entry_(f->arg_);
  f->finished_ = true;
#ifdef HG_EMU_ASAN
  __sanitizer_start_switch_fiber(nullptr, f->scheduler_bottom_, f->scheduler_size_);  // this stack is done
#endif
  hg_emu_switch(&f->sp_, f->scheduler_sp_);
  __builtin_unreachable();
}

Fiber::~Fiber() {
  if (!stack_) return;
#ifdef HG_EMU_ASAN
  if (!finished_) __asan_unpoison_memory_region(stack_, kFiberStackBytes);
#endif
  pool().give(stack_);
}

void Fiber::start(void (*entry)(void*), void* arg) {
  if (!stack_) stack_ = pool().take();
#ifdef HG_EMU_ASAN
  // A fiber abandoned mid-kernel leaves its frames' redzones poisoned.
  if (started_ && !finished_) __asan_unpoison_memory_region(stack_, kFiberStackBytes);
#endif
  entry_ = entry;
  arg_ = arg;
  started_ = true;
  finished_ = false;
  // The first switch to this stack pops a control-word slot and six registers, then
  // returns into hg_emu_fiber_entry with the stack aligned as after a call.
  auto* top = reinterpret_cast<uint64_t*>(static_cast<char*>(stack_) + kFiberStackBytes);
  uint32_t mxcsr;
  uint16_t fcw;
  asm volatile("stmxcsr %0" : "=m"(mxcsr));
  asm volatile("fnstcw %0" : "=m"(fcw));
  uint64_t* sp = top;
  *--sp = 0;
  *--sp = reinterpret_cast<uint64_t>(&hg_emu_fiber_entry);
  for (int i = 0; i < 6; ++i) *--sp = 0;
  *--sp = uint64_t{mxcsr} | uint64_t{fcw} << 32;
  sp_ = sp;
}

void Fiber::resume() {
  t_starting = this;
#ifdef HG_EMU_ASAN
  __sanitizer_start_switch_fiber(&scheduler_fake_stack_, stack_, kFiberStackBytes);
#endif
  hg_emu_switch(&scheduler_sp_, sp_);
#ifdef HG_EMU_ASAN
  __sanitizer_finish_switch_fiber(scheduler_fake_stack_, nullptr, nullptr);
#endif
}

void Fiber::yield() {
#ifdef HG_EMU_ASAN
  __sanitizer_start_switch_fiber(&fake_stack_, scheduler_bottom_, scheduler_size_);
#endif
  hg_emu_switch(&sp_, scheduler_sp_);
#ifdef HG_EMU_ASAN
  __sanitizer_finish_switch_fiber(fake_stack_, &scheduler_bottom_, &scheduler_size_);
#endif
}

}  // namespace hg::cuda::emu

extern "C" void hg_emu_fiber_entry() { hg::cuda::emu::fiber_main(); }
