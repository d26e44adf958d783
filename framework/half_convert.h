// Bulk conversions between f32 and f16/bf16, used by kernels when they pack operands.
// They run on F16C/AVX2 when the CPU has them; every path gives the scalar conversions'
// bits exactly (NaNs included), which tests/framework/test_half.cpp and test_bfloat16.cpp check.
#pragma once
#include <cstddef>

#include "framework/bfloat16.h"
#include "framework/half.h"

namespace hg {

void convert_f16_to_f32(const half* src, float* dst, size_t n);
void convert_f32_to_f16(const float* src, half* dst, size_t n);
void convert_bf16_to_f32(const bfloat16* src, float* dst, size_t n);
void convert_f32_to_bf16(const float* src, bfloat16* dst, size_t n);

// The scalar paths the F16C ones must agree with, exposed so tests can compare the two.
void convert_f16_to_f32_portable(const half* src, float* dst, size_t n);
void convert_f32_to_f16_portable(const float* src, half* dst, size_t n);
void convert_bf16_to_f32_portable(const bfloat16* src, float* dst, size_t n);
void convert_f32_to_bf16_portable(const float* src, bfloat16* dst, size_t n);

// Whether this CPU (and OS) can run the vector paths (AVX2 and F16C); checked once.
bool cpu_has_f16c();

}  // namespace hg
