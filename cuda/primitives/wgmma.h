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

// D (64 x 128, f32) = A (64 x 16) * B (16 x 128) + (accumulate ? D : 0), A and B f16 or
// bf16 in shared memory, A K-major (imm-trans-a 0), B K-major (the plain names, imm-trans-b
// 0) or MN-major (the _bmn names, imm-trans-b 1: B stored N-contiguous), unscaled
// (imm-scale 1). accumulate is the scale-d predicate: false starts a fresh sum.
// One definition for every variant (the instruction differs only in its type suffix and
// the transpose immediate).
#if defined(HG_CUDA_EMULATION)
#define HG_WGMMA_M64N128K16(name, ab_types, type, trans_b)                                            \
  HG_DEVICE void name(float d[64], uint64_t a_desc, uint64_t b_desc, bool accumulate) {             \
    emu::wgmma_issue(emu::WgmmaType::type, 128, a_desc, false, b_desc, trans_b[0] == '1', accumulate, d); \
  }
#else
#define HG_WGMMA_M64N128K16(name, ab_types, type, trans_b)                                               \
  HG_DEVICE void name(float d[64], uint64_t a_desc, uint64_t b_desc, bool accumulate) {                 \
    asm volatile(                                                                                         \
        "{\n"                                                                                             \
        ".reg .pred p;\n"                                                                                 \
        "setp.ne.b32 p, %66, 0;\n"                                                                        \
        "wgmma.mma_async.sync.aligned.m64n128k16.f32." ab_types " "                                       \
        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26," \
        "%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,"   \
        "%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, "                                           \
        "%64, %65, p, 1, 1, 0, " trans_b ";\n"                                                          \
        "}\n"                                                                                             \
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),   \
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),         \
          "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),       \
          "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),       \
          "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),       \
          "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]),       \
          "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]),       \
          "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),       \
          "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])        \
        : "l"(a_desc), "l"(b_desc), "r"(static_cast<int>(accumulate)));                                   \
  }
#endif

HG_WGMMA_M64N128K16(wgmma_m64n128k16_f16, "f16.f16", f16, "0")
HG_WGMMA_M64N128K16(wgmma_m64n128k16_bf16, "bf16.bf16", bf16, "0")
HG_WGMMA_M64N128K16(wgmma_m64n128k16_f16_bmn, "f16.f16", f16, "1")
HG_WGMMA_M64N128K16(wgmma_m64n128k16_bf16_bmn, "bf16.bf16", bf16, "1")
#undef HG_WGMMA_M64N128K16

}  // namespace hg::cuda
