// The GEMM engine's micro-kernel descriptors: register tile (MR x NR), the function, and
// the kernel's own operand layout if it has one (AMX's bf16 VNNI tiles), chosen once per
// operand format from hg::cpu::isa() and self-checked against the AVX2 kernel on first use.
#pragma once
#include <cstdint>
#include <vector>

namespace hg::cpu::gemm {

// The largest register tile dimension of any kernel (bounds the packers' stack buffers).
constexpr int64_t kMaxR = 48;

// What the operands' values are exactly: a kernel may rely on it (AMX needs bf16 values,
// or f16 values to split into two bf16).
enum class Operands { f32, bf16, f16 };

// c[mr x nr] (row stride ldc) = (first ? 0 : c) + a · b over kc values of k. a and b are the
// engine's f32 panels (A: mr rows of kc, row-major; B: kc groups of nr, k-major), or the
// kernel's own layout when `repack` is set. With `half`, only c's first nr/2 columns are
// computed (the B panel's other columns are padding) and the rest of the tile is untouched.
template <class Acc>
struct Kernel {
  const char* name;
  int64_t mr, nr;
  void (*fn)(int64_t kc, const void* a, const void* b, Acc* c, int64_t ldc, bool first, bool half);
  // A kernel with its own layout: bytes of one converted panel of r rows by kc, and the
  // conversion of an f32 panel (A side: row-major, B side: k-major). The conversion
  // returns false when a value is outside what the kernel computes exactly (not of the
  // format, non-finite, or so small that the unit would flush it); the engine then runs
  // that tile with `exact_tile`, the portable chain of fused multiply-adds.
  int64_t (*panel_bytes)(int64_t kc, int64_t r) = nullptr;
  bool (*repack_a)(const Acc* panel, int64_t kc, void* dst) = nullptr;
  bool (*repack_b)(const Acc* panel, int64_t kc, void* dst) = nullptr;
  // The summation bound relative to the plain f32 chain: terms per product (4 for the f16
  // split), used by the first-use self-check.
  int terms = 1;
  // A kernel on a unit with its own state (AMX: the tile configuration) claims it before a
  // run of calls on one thread and gives it back after (the engine does so per task), so
  // whatever else uses the unit on that thread between two products cannot break either.
  void (*begin)() = nullptr;
  void (*end)() = nullptr;
  // K per packed block for this kernel (<= KC, engine.h): its B panel of kc x nr f32 and a few
  // A panels share L1 (0: the engine's KC).
  int64_t kc = 0;
  // A kernel that computes any number of its 16-column vectors: `fn` with c's first `cols`
  // (1..nr) columns live, ceil(cols / 16) vectors computed (the engine calls it instead of
  // fn's half tiles; the B panel past `cols` is padding).
  void (*fn_cols)(int64_t kc, const void* a, const void* b, Acc* c, int64_t ldc, bool first, int64_t cols) = nullptr;
};

// The portable tile: the same chain of fused multiply-adds as the AVX2 kernel, for any
// mr x nr (a kernel's fallback for a tile its unit cannot compute exactly).
template <class Acc>
void exact_tile(int64_t mr, int64_t nr, int64_t kc, const Acc* a, const Acc* b, Acc* c, int64_t ldc, bool first,
                bool half);

// The kernels this build has (each may be unrunnable on this CPU).
const Kernel<float>& avx2_kernel();
const Kernel<float>& avx512_kernel();
// 8x48 in K blocks of 128 (a 24 KiB B panel): on Intel cores the faster f32 tile where a
// product has enough columns (wide_tile_pays).
const Kernel<float>& avx512_wide_kernel();
// Whether the 8x48 tile replaces the 14x32 one for a product of n columns on this CPU: an
// Intel core (measured on Ice Lake, 2026-12-07: 8-15% faster from 128 columns, slower at 64,
// where a quarter of the work falls on a one-vector remainder) and n >= 96.
bool wide_tile_pays(int64_t n);
const Kernel<float>& avx512_bf16_kernel();  // vdpbf16ps on bf16 pairs (AVX512_BF16)
// Multiply-adds per second of vdpbf16ps over those of the AVX-512 f32 FMA on this core,
// measured on the first call (about 5 ms) and remembered for the process (call only where
// the CPU has AVX512_BF16). About 2 where the
// instruction issues as often as an FMA; 1 on cores that issue it on one port of two.
double avx512_bf16_dot_vs_fma();
// Whether bf16 products pay on vdpbf16ps here: AVX512_BF16 and the probe above at >= 1.3x
// (the pair kernel, and the convolution tiles on it, are chosen by this).
bool bf16_pairs_pay();
// The AVX512_BF16 kernel's panel conversions (an A panel of 14 rows x kc, or a B panel of kc
// x 32, into pair dwords; false when a value is not one it multiplies exactly): `vector`, the
// AVX-512 ones the kernel uses (AVX-512 CPUs only), else the scalar reference (tests).
bool avx512_bf16_pairs(bool a_panel, bool vector, const float* panel, int64_t kc, void* dst);
const Kernel<float>& amx_bf16_kernel();
const Kernel<float>& amx_f16_kernel();
const Kernel<double>& f64_kernel();

// The kernel for these operands on the current path (isa()) and a product of n columns (0:
// not known); a kernel that failed its self-check falls back to the AVX2 kernel, with one
// warning on stderr per process.
const Kernel<float>& kernel_for(Operands ops, int64_t n = 0);
inline const Kernel<double>& kernel_for_f64() { return f64_kernel(); }

// Runs a kernel on a small product (odd M, N, K; f16 overflow to inf; subnormals) and
// compares with the AVX2 kernel within the f32-accumulation bound; true when it agrees.
bool self_check(const Kernel<float>& k, Operands ops);

// How many kernels failed their self-check in this process (tests, reports).
int self_check_failures();

// The outer-product micro-kernels of the long-reduction driver (outer.h): both panels are
// k-major (A: kc groups of mr, broadcast; B: kc groups of nr, vector loads), so a weight
// gradient packs its pixels' values as they lie in memory and transposes nothing. c[mr x
// nr] (row stride ldc) = (first ? 0 : c) + a · b, each element the same chain of fused
// multiply-adds in k order as every other kernel (bitwise the portable chain's result).
// Row tiles of 4 (AVX2) or 8 (AVX-512) fit the 8-64 filters of a U-Net layer exactly.
template <class Acc>
struct OuterKernel {
  const char* name;
  int64_t mr, nr;
  void (*fn)(int64_t kc, const Acc* a, const Acc* b, Acc* c, int64_t ldc, bool first);
};

// The portable chain for any tile up to kMaxR x kMaxR (the reference, and f64's kernel).
template <class Acc>
void outer_tile(int64_t mr, int64_t nr, int64_t kc, const Acc* a, const Acc* b, Acc* c, int64_t ldc, bool first);

// The outer kernels this build has, widest tile last per ISA (each may be unrunnable here).
const std::vector<const OuterKernel<float>*>& avx2_outer_kernels();
const std::vector<const OuterKernel<float>*>& avx512_outer_kernels();
const OuterKernel<double>& f64_outer_kernel();

// The outer kernel for an M x N product on the current path: the tile that pads M and N
// least (the wider on a tie). An AVX-512 kernel is compared bitwise with the portable
// chain on first use and, if it differs, replaced by the AVX2 kernels with one warning.
const OuterKernel<float>& outer_kernel_for(int64_t M, int64_t N);
bool outer_self_check(const OuterKernel<float>& k);

// Tests only: while alive, kernel_for(ops) considers `k` the current path's kernel (its
// self-check runs afresh on first use), whatever the CPU.
class OverrideKernel {
 public:
  OverrideKernel(Operands ops, const Kernel<float>& k);
  ~OverrideKernel();
  OverrideKernel(const OverrideKernel&) = delete;
  OverrideKernel& operator=(const OverrideKernel&) = delete;

 private:
  Operands ops_;
};

}  // namespace hg::cpu::gemm
