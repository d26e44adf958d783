// Whether a strided GEMM operand of the mma.sync engine loads with 16-byte copies or element
// by element (cuda/mma_sources.h's with_source picks the lines; this says what they cost),
// so that bmm/linear can say once that they took the slow loads. Host code, tested on the host.
#pragma once
#include <cstddef>
#include <cstdint>

namespace hg::cuda {

// For an operand with `rows` lines sr elements apart and K elements sk apart, batch entries
// batch_stride apart, at address p, of elements `elem` bytes wide: nullptr when every line
// starts 16-byte aligned along a contiguous axis, else the reason its loads are per element.
inline const char* operand_slow_path(uintptr_t p, size_t elem, int64_t batch_stride, int64_t sr, int64_t rows,
                                     int64_t sk, int64_t K) {
  if (rows == 1) sr = 1;
  if (K == 1) sk = 1;
  if (sk != 1 && sr != 1) return "an operand has neither its rows nor its K axis contiguous: element-by-element loads";
  const int64_t line_stride = sk == 1 ? sr : sk;
  const auto bytes = [&](int64_t s) { return static_cast<uint64_t>(s < 0 ? -s : s) * elem; };
  const bool one_line = (sk == 1 ? rows : K) == 1;
  if (p % 16 != 0 || (!one_line && bytes(line_stride) % 16 != 0) || bytes(batch_stride) % 16 != 0)
    return "operand rows are not 16-byte aligned: element-by-element loads";
  return nullptr;
}

}  // namespace hg::cuda
