// The wgmma operand model: descriptor decoding, the canonical shared-memory layouts and the
// m64nNk16 product, as cuda/emu/wgmma_model.h states them from the PTX ISA.
#include "cuda/emu/wgmma_model.h"

#include <vector>

#include "cuda/primitives/smem_swizzle.h"
#include "framework/bfloat16.h"
#include "framework/error.h"
#include "framework/half.h"

namespace hg::cuda::emu {

namespace {

// The descriptor's fields: start 0-13, LBO 16-29, SBO 32-45, base offset 49-51, swizzle 62-63.
constexpr uint64_t kFieldBits = 0x3fffull | 0x3fffull << 16 | 0x3fffull << 32 | 0x7ull << 49 | 0x3ull << 62;

constexpr int kM = 64, kK = 16;

// Each operand's elements as doubles, [row along M or N][k], read through the layout model.
std::vector<double> read_operand(const SharedWindow& smem, WgmmaInput type, uint64_t desc, bool mn_major,
                                 int rows, const char* which) {
  const WgmmaDescriptorFields d = decode_wgmma_descriptor(desc);
  std::vector<double> out(static_cast<size_t>(rows) * kK);
  const std::string what = detail::concat("wgmma operand ", which);
  for (int i = 0; i < rows; ++i)
    for (int k = 0; k < kK; ++k) {
      const unsigned char* p = smem.at(wgmma_element_address(d, mn_major, i, k), 2, what.c_str());
      const auto bits = static_cast<uint16_t>(p[0] | p[1] << 8);  // little-endian, as the GPU
      out[static_cast<size_t>(i) * kK + k] =
          type == WgmmaInput::f16 ? half_bits_to_float(bits) : bf16_bits_to_float(bits);
    }
  return out;
}

}  // namespace

WgmmaDescriptorFields decode_wgmma_descriptor(uint64_t desc) {
  if (desc & ~kFieldBits)
    throw Error(detail::concat("wgmma descriptor 0x", std::hex, desc, ": bits 0x", desc & ~kFieldBits, std::dec,
                               " are set outside the ISA's fields (start 0-13, LBO 16-29, SBO 32-45, base offset"
                               " 49-51, swizzle 62-63)"));
  static constexpr uint32_t spans[4] = {0, 128, 64, 32};  // codes 0 none, 1 128B, 2 64B, 3 32B
  const auto field = [&](int lo) { return static_cast<uint32_t>(desc >> lo & 0x3fff) << 4; };
  return {field(0), field(16), field(32), static_cast<uint32_t>(desc >> 49 & 7), spans[desc >> 62]};
}

uint32_t wgmma_element_address(const WgmmaDescriptorFields& d, bool mn_major, int i, int k) {
  const uint32_t span = d.swizzle_span;
  HG_CHECK(span == 0 || span == 32 || span == 64 || span == 128, "wgmma descriptor: swizzle span ", span,
           " bytes is not one of 0 (none), 32, 64, 128");
  HG_CHECK(d.base_offset == 0, "wgmma descriptor: base offset ", d.base_offset,
           " is not modelled (only swizzle patterns starting at their 1024/512/256-byte boundary, base offset 0)");
  HG_CHECK(i >= 0 && i < 256 && k >= 0 && k < kK, "wgmma element (", i, ", ", k,
           ") is outside an operand slice (M/N index 0..255, K index 0..15)");
  const auto ui = static_cast<uint32_t>(i), uk = static_cast<uint32_t>(k);
  uint32_t offset;
  if (!mn_major && span == 0)  // ((8,m),(T,2k)) : ((1T,SBO),(1,LBO))
    offset = ui % 8 * 16 + ui / 8 * d.sbo + uk % 8 * 2 + uk / 8 * d.lbo;
  else if (!mn_major)  // ((8,m),(T,2k)) : ((W*T,SBO),(1,T)); LBO unused
    offset = ui % 8 * span + ui / 8 * d.sbo + uk * 2;
  else if (span == 0)  // ((T,1,m),(8,k)) : ((1,T,SBO),(1T,LBO))
    offset = ui % 8 * 2 + ui / 8 * d.sbo + uk % 8 * 16 + uk / 8 * d.lbo;
  else  // ((T,W,m),(8,k)) : ((1,T,LBO),(W*T,SBO)): span/2 elements per K-row
    offset = ui % (span / 2) * 2 + ui / (span / 2) * d.lbo + uk % 8 * span + uk / 8 * d.sbo;
  return swizzle_smem_address(d.start + offset, span);
}

void wgmma_compute(const SharedWindow& smem, WgmmaInput type, int N, uint64_t a_desc, bool a_mn_major,
                   uint64_t b_desc, bool b_mn_major, bool scale_d, float* const acc[128]) {
  HG_CHECK(N >= 8 && N <= 256 && N % 8 == 0, "wgmma.m64nNk16: N = ", N, " is not a multiple of 8 in 8..256");
  for (int t = 0; t < 128; ++t) HG_CHECK(acc[t] != nullptr, "wgmma: thread ", t, " has no accumulators");
  const std::vector<double> a = read_operand(smem, type, a_desc, a_mn_major, kM, "A");
  const std::vector<double> b = read_operand(smem, type, b_desc, b_mn_major, N, "B");
  // D as a 64 x N matrix: gathered from the fragments, then each element's products added
  // in k order (the loops run row, k, column, so a row's columns are independent sums that
  // vectorise; each element's order is still its old value, then k = 0, 1, ..., 15).
  const auto at = [N](int t, int r) {
    const int w = t / 32, l = t % 32, j = r / 4, q = r % 4;
    return static_cast<size_t>(16 * w + l / 4 + 8 * (q / 2)) * static_cast<size_t>(N) + 8 * j + 2 * (l % 4) + q % 2;
  };
  std::vector<double> d(static_cast<size_t>(kM) * static_cast<size_t>(N), 0.0), bk(static_cast<size_t>(kK) * N);
  if (scale_d)
    for (int t = 0; t < 128; ++t)
      for (int r = 0; r < N / 2; ++r) d[at(t, r)] = acc[t][r];
  for (int col = 0; col < N; ++col)
    for (int k = 0; k < kK; ++k) bk[static_cast<size_t>(k) * N + col] = b[static_cast<size_t>(col) * kK + k];
  for (int row = 0; row < kM; ++row) {
    double* dr = d.data() + static_cast<size_t>(row) * N;
    for (int k = 0; k < kK; ++k) {
      const double av = a[static_cast<size_t>(row) * kK + k];
      const double* br = bk.data() + static_cast<size_t>(k) * N;
      for (int col = 0; col < N; ++col) dr[col] += av * br[col];
    }
  }
  for (int t = 0; t < 128; ++t)
    for (int r = 0; r < N / 2; ++r) acc[t][r] = static_cast<float>(d[at(t, r)]);
}

}  // namespace hg::cuda::emu
