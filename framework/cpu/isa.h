// Which x86 vector and matrix units this CPU offers, and which kernel path runs: detected
// once from cpuid, XGETBV and (for AMX) the Linux permission request, overridable with
// HG_CPU_ISA=avx2|avx512|amx for A/B runs and with ForceIsa in tests.
#pragma once
#include <string>

namespace hg::cpu {

struct Features {
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512_bf16 = false, avx512_fp16 = false;
  bool amx_tile = false, amx_bf16 = false;
  bool amx_granted = false;  // the kernel allowed this process to use AMX tile data
  bool intel = false;        // cpuid vendor "GenuineIntel" (kernel tuning per core family)
};

// The kernel paths, each a superset of the one before: avx2 is the build's x86-64-v3
// baseline (Eigen and the portable loops); avx512 adds AVX-512 F/BW/VL/DQ kernels (using
// AVX512_FP16/BF16 instructions only where Features says so); amx adds the tile engine.
enum class Isa { avx2 = 0, avx512 = 1, amx = 2 };

const Features& features();                 // detected once, thread-safe
Isa best_isa();                             // the widest path this machine and OS allow
Isa isa();                                  // the path kernels take now
const char* isa_name(Isa isa);
Isa parse_isa(const std::string& name);     // "avx2" | "avx512" | "amx"; hg::Error otherwise
std::string describe();                     // one line: the CPU's units and the chosen path

// Forces a path while alive (tests, benchmarks). Refuses, with hg::Error, a path the machine
// lacks. Process-wide, not per thread: do not nest across threads.
class ForceIsa {
 public:
  explicit ForceIsa(Isa isa);
  ~ForceIsa();
  ForceIsa(const ForceIsa&) = delete;
  ForceIsa& operator=(const ForceIsa&) = delete;

 private:
  Isa saved_;
};

}  // namespace hg::cpu
