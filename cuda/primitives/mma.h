// Tensor-core matrix multiply-accumulate, D = A * B + C, one warp-wide instruction each:
//   mma_m16n8k16_f16 / _bf16: A 16x16 and B 16x8 in f16 or bf16, C and D 16x8 in f32;
//   mma_m16n8k8_tf32:         A 16x8 and B 8x8 in tf32 (f32 bits, low 13 ignored), f32 C/D.
// Every lane of the warp calls it with its fragments: a and b hold pairs of 16-bit
// elements (low half first) or tf32 values, laid out as cuda/primitives/mma_layout.h maps
// them. The emulation forms each product exactly and sums the k products and c in double,
// rounding once to f32; hardware accumulates in at least f32 in an unspecified order, so
// results agree to about an f32 ulp of the sum's magnitude and tests need a tolerance.
#pragma once
#include "cuda/primitives/common.h"

namespace hg::cuda {

HG_DEVICE void mma_m16n8k16_f16(float d[4], const uint32_t a[4], const uint32_t b[2], const float c[4]) {
#if defined(HG_CUDA_EMULATION)
  emu::mma_m16n8k16(emu::MmaInput::f16, d, a, b, c);
#else
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
#endif
}

HG_DEVICE void mma_m16n8k16_bf16(float d[4], const uint32_t a[4], const uint32_t b[2], const float c[4]) {
#if defined(HG_CUDA_EMULATION)
  emu::mma_m16n8k16(emu::MmaInput::bf16, d, a, b, c);
#else
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
#endif
}

HG_DEVICE void mma_m16n8k8_tf32(float d[4], const uint32_t a[4], const uint32_t b[2], const float c[4]) {
#if defined(HG_CUDA_EMULATION)
  emu::mma_m16n8k8_tf32(d, a, b, c);
#else
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
#endif
}

// cvt.rna.tf32.f32: f32 rounded to tf32 (10 fraction bits), ties away from zero, as the
// bits of an f32 whose low 13 bits are zero. NaN and infinities pass through.
HG_HOST_DEVICE uint32_t f32_to_tf32(float x) {
#if defined(__CUDA_ARCH__)
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
#else
  uint32_t bits;
  __builtin_memcpy(&bits, &x, 4);
  if ((bits & 0x7f800000u) == 0x7f800000u) return bits;  // inf, NaN
  return (bits + 0x1000u) & 0xffffe000u;
#endif
}

}  // namespace hg::cuda
