// Warpgroup-level tensor-core MMA of sm_90a (PTX ISA "Asynchronous Warpgroup Level Matrix
// Multiply-Accumulate Instructions: wgmma"): the four warps of a warpgroup (128 threads,
// warp index a multiple of 4) multiply A (64 x 16) by B (16 x N) from shared memory, read
// through descriptors (cuda/primitives/wgmma_desc.h), into f32 registers, asynchronously:
//   wgmma_fence(); wgmma_...(acc, a_desc, b_desc, true); ...; wgmma_commit(); wgmma_wait<0>();
// The accumulator fragment of m64nNk16 (f32): thread t of the warpgroup, warp w = t / 32,
// lane l = t % 32, holds d[4 j + i] = D[16 w + l / 4 + 8 (i / 2)][8 j + 2 (l % 4) + i % 2],
// j < N / 8, i < 4 (the mma.sync m16n8 C layout repeated along N).
// Also the register reallocation between warpgroups (setmaxnreg). sm_90a natively; the
// emulation queues each wgmma and runs it at the wait_group that retires it
// (cuda/emu/async_units.cpp), reading its operands through cuda/emu/wgmma_model.h.
#pragma once
#include "cuda/primitives/common.h"
#include "cuda/primitives/wgmma_desc.h"

namespace hg::cuda {

// wgmma.fence: orders earlier register writes (of the accumulators) and shared-memory
// writes before the wgmma that reads them; needed before the first wgmma of a sequence.
HG_DEVICE void wgmma_fence() {
#if !defined(HG_CUDA_EMULATION)  // the emulation runs a wgmma only at its wait_group
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#endif
}

// wgmma.commit_group: closes the warpgroup's open group of issued wgmma instructions.
HG_DEVICE void wgmma_commit() {
#if defined(HG_CUDA_EMULATION)
  emu::wgmma_commit();
#else
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
#endif
}

// wgmma.wait_group N: waits until at most N committed groups are pending; only then may the
// accumulators be read and the shared memory the finished groups read be overwritten.
template <int N>
HG_DEVICE void wgmma_wait() {
  static_assert(N >= 0 && N <= 7, "wgmma.wait_group takes 0..7");
#if defined(HG_CUDA_EMULATION)
  emu::wgmma_wait(N);
#else
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
#endif
}

// Keeps the compiler from moving reads or writes of an accumulator register across the
// asynchronous wgmma boundaries (no instruction is emitted).
HG_DEVICE void wgmma_fence_operand(float& r) {
#if defined(HG_CUDA_EMULATION)
  (void)r;
#else
  asm volatile("" : "+f"(r)::"memory");
#endif
}

// setmaxnreg.inc / .dec: the warpgroup's per-thread register budget grows to / shrinks to
// N (a multiple of 8 in 24..256); all warps of the warpgroup must execute it. A producer
// warpgroup that only issues TMA gives its registers to the consumers doing the math.
template <int N>
HG_DEVICE void warpgroup_reg_alloc() {
  static_assert(N % 8 == 0 && N >= 24 && N <= 256, "setmaxnreg takes a multiple of 8 in 24..256");
#if !defined(HG_CUDA_EMULATION)  // registers are not modelled
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N));
#endif
}
template <int N>
HG_DEVICE void warpgroup_reg_dealloc() {
  static_assert(N % 8 == 0 && N >= 24 && N <= 256, "setmaxnreg takes a multiple of 8 in 24..256");
#if !defined(HG_CUDA_EMULATION)
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N));
#endif
}

// D (64 x N, f32) = A (64 x 16) * B (16 x N) + (accumulate ? D : 0), N = 128 or 256, A and B
// f16 or bf16 in shared memory, each K-major (imm-trans 0) or MN-major (AMNMajor / BNMajor,
// imm-trans 1: A stored M-contiguous, B N-contiguous), unscaled (imm-scale 1). accumulate is the scale-d predicate: false starts a fresh sum. d is the
// thread's N / 2 accumulators (the fragment in the comment at the top).
enum class WgmmaAB : uint8_t { f16, bf16 };

// The accumulator operands of the inline PTX: N / 2 "+f" registers, 8 per line.
#define HG_WGMMA_ACC8(i) "+f"(d[(i) + 0]), "+f"(d[(i) + 1]), "+f"(d[(i) + 2]), "+f"(d[(i) + 3]), "+f"(d[(i) + 4]), "+f"(d[(i) + 5]), "+f"(d[(i) + 6]), "+f"(d[(i) + 7])
#define HG_WGMMA_ACC64                                                                                  \
  HG_WGMMA_ACC8(0), HG_WGMMA_ACC8(8), HG_WGMMA_ACC8(16), HG_WGMMA_ACC8(24), HG_WGMMA_ACC8(32),        \
      HG_WGMMA_ACC8(40), HG_WGMMA_ACC8(48), HG_WGMMA_ACC8(56)
#define HG_WGMMA_ACC128                                                                                 \
  HG_WGMMA_ACC64, HG_WGMMA_ACC8(64), HG_WGMMA_ACC8(72), HG_WGMMA_ACC8(80), HG_WGMMA_ACC8(88),         \
      HG_WGMMA_ACC8(96), HG_WGMMA_ACC8(104), HG_WGMMA_ACC8(112), HG_WGMMA_ACC8(120)
#define HG_WGMMA_REGS64 \
  "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26," \
  "%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51," \
  "%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}"
#define HG_WGMMA_REGS128 \
  "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26," \
  "%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51," \
  "%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76," \
  "%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,%96,%97,%98,%99,%100," \
  "%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111,%112,%113,%114,%115,%116,%117,%118,%119,%120," \
  "%121,%122,%123,%124,%125,%126,%127}"

// One instruction: shape "m64n<N>k16", types "f16.f16" or "bf16.bf16", the transpose
// immediates "0" or "1"; the accumulator register list and operands, then the descriptors
// and the scale-d flag as the three operands after them (their numbers given).
#define HG_WGMMA_ASM(shape, types, trans_a, trans_b, regs, first_a, first_b, first_p, ...)               \
  asm volatile("{\n"                                                                                    \
               ".reg .pred p;\n"                                                                        \
               "setp.ne.b32 p, %" first_p ", 0;\n"                                                      \
               "wgmma.mma_async.sync.aligned." shape ".f32." types " " regs ", %" first_a ", %" first_b   \
               ", p, 1, 1, " trans_a ", " trans_b ";\n"                                                 \
               "}\n"                                                                                    \
               : __VA_ARGS__                                                                            \
               : "l"(a_desc), "l"(b_desc), "r"(static_cast<int>(accumulate)))

template <int N, WgmmaAB AB, bool AMNMajor, bool BNMajor>
HG_DEVICE void wgmma_m64k16(float (&d)[N / 2], uint64_t a_desc, uint64_t b_desc, bool accumulate) {
  static_assert(N == 128 || N == 256, "the kernels use m64n128k16 and m64n256k16");
#if defined(HG_CUDA_EMULATION)
  emu::wgmma_issue(AB == WgmmaAB::f16 ? emu::WgmmaType::f16 : emu::WgmmaType::bf16, N, a_desc, AMNMajor, b_desc,
                   BNMajor, accumulate, d);
#else
// The four transpose combinations of one shape and type.
#define HG_WGMMA_TRANS(n, types, regs, a, b, p, ...)                                                           \
  if constexpr (!AMNMajor && !BNMajor) HG_WGMMA_ASM("m64n" #n "k16", types, "0", "0", regs, a, b, p, __VA_ARGS__); \
  if constexpr (!AMNMajor && BNMajor) HG_WGMMA_ASM("m64n" #n "k16", types, "0", "1", regs, a, b, p, __VA_ARGS__);  \
  if constexpr (AMNMajor && !BNMajor) HG_WGMMA_ASM("m64n" #n "k16", types, "1", "0", regs, a, b, p, __VA_ARGS__);  \
  if constexpr (AMNMajor && BNMajor) HG_WGMMA_ASM("m64n" #n "k16", types, "1", "1", regs, a, b, p, __VA_ARGS__)
  if constexpr (N == 128) {
    if constexpr (AB == WgmmaAB::f16) {
      HG_WGMMA_TRANS(128, "f16.f16", HG_WGMMA_REGS64, "64", "65", "66", HG_WGMMA_ACC64);
    } else {
      HG_WGMMA_TRANS(128, "bf16.bf16", HG_WGMMA_REGS64, "64", "65", "66", HG_WGMMA_ACC64);
    }
  } else {
    if constexpr (AB == WgmmaAB::f16) {
      HG_WGMMA_TRANS(256, "f16.f16", HG_WGMMA_REGS128, "128", "129", "130", HG_WGMMA_ACC128);
    } else {
      HG_WGMMA_TRANS(256, "bf16.bf16", HG_WGMMA_REGS128, "128", "129", "130", HG_WGMMA_ACC128);
    }
  }
#undef HG_WGMMA_TRANS
#endif
}

#undef HG_WGMMA_ASM
#undef HG_WGMMA_REGS128
#undef HG_WGMMA_REGS64
#undef HG_WGMMA_ACC128
#undef HG_WGMMA_ACC64
#undef HG_WGMMA_ACC8

}  // namespace hg::cuda
