// CPU feature detection and the one run-time choice of kernel path (see isa.h). AMX needs
// two things beyond cpuid: XCR0 must enable the tile state, and Linux hands tile data to a
// process only after arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA).
#include "framework/cpu/isa.h"

#include <atomic>
#include <cstdlib>
#include <mutex>

#include "framework/error.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace hg::cpu {
namespace {

#if defined(__x86_64__)
bool bit(unsigned reg, int b) { return (reg >> b) & 1u; }

unsigned long long xgetbv0() {
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<unsigned long long>(hi) << 32) | lo;
}

bool request_amx_permission() {
  constexpr long kArchReqXcompPerm = 0x1023;  // asm/prctl.h
  constexpr long kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}

Features detect() {
  Features f;
  unsigned a, b, c, d;
  // The vendor string "GenuineIntel" in ebx, edx, ecx.
  if (__get_cpuid(0, &a, &b, &c, &d)) f.intel = b == 0x756e6547u && d == 0x49656e69u && c == 0x6c65746eu;
  if (!__get_cpuid_count(1, 0, &a, &b, &c, &d)) return f;
  const bool osxsave = bit(c, 27);
  f.fma = bit(c, 12);
  f.f16c = bit(c, 29);
  if (!osxsave) return f;
  const unsigned long long xcr0 = xgetbv0();
  const bool ymm_state = (xcr0 & 0x6) == 0x6;            // SSE + AVX
  const bool zmm_state = ymm_state && (xcr0 & 0xE0) == 0xE0;  // opmask, ZMM_Hi256, Hi16_ZMM
  const bool tile_state = (xcr0 & 0x60000) == 0x60000;   // XTILECFG + XTILEDATA
  if (!ymm_state) { f.fma = f.f16c = false; return f; }
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return f;
  f.avx2 = bit(b, 5);
  if (zmm_state) {
    f.avx512f = bit(b, 16);
    f.avx512dq = bit(b, 17);
    f.avx512bw = bit(b, 30);
    f.avx512vl = bit(b, 31);
    f.avx512_fp16 = bit(d, 23);
    unsigned a1, b1, c1, d1;
    if (__get_cpuid_count(7, 1, &a1, &b1, &c1, &d1)) f.avx512_bf16 = bit(a1, 5);
  }
  if (tile_state) {
    f.amx_bf16 = bit(d, 22);
    f.amx_tile = bit(d, 24);
    if (f.amx_tile && f.amx_bf16) f.amx_granted = request_amx_permission();
  }
  return f;
}
#else
Features detect() { return {}; }
#endif

Isa widest(const Features& f) {
  const bool avx512 = f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq;
  if (avx512 && f.amx_tile && f.amx_bf16 && f.amx_granted) return Isa::amx;
  if (avx512) return Isa::avx512;
  return Isa::avx2;
}

void check_available(Isa want, const char* source) {
  HG_CHECK(static_cast<int>(want) <= static_cast<int>(best_isa()), source, " asks for the ", isa_name(want),
           " kernel path, but this CPU (or the OS) only allows up to ", isa_name(best_isa()), ": ", describe());
}

// -1 until first use; then the chosen Isa. ForceIsa stores into it too.
std::atomic<int> g_isa{-1};
std::once_flag g_isa_once;

void choose_once() {
  std::call_once(g_isa_once, [] {
    Isa chosen = best_isa();
    if (const char* env = std::getenv("HG_CPU_ISA"); env && *env) {
      chosen = parse_isa(env);
      check_available(chosen, "HG_CPU_ISA");
    }
    int expected = -1;
    g_isa.compare_exchange_strong(expected, static_cast<int>(chosen));
  });
}

}  // namespace

const Features& features() {
  static const Features f = detect();
  return f;
}

Isa best_isa() { return widest(features()); }

Isa isa() {
  int v = g_isa.load(std::memory_order_relaxed);
  if (v >= 0) return static_cast<Isa>(v);
  choose_once();
  return static_cast<Isa>(g_isa.load());
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::avx2: return "avx2";
    case Isa::avx512: return "avx512";
    case Isa::amx: return "amx";
  }
  return "?";
}

Isa parse_isa(const std::string& name) {
  if (name == "avx2") return Isa::avx2;
  if (name == "avx512") return Isa::avx512;
  if (name == "amx") return Isa::amx;
  throw Error(detail::concat("unknown CPU kernel path '", name, "'; valid: avx2, avx512, amx"));
}

std::string describe() {
  const Features& f = features();
  std::string s = "cpu units:";
  auto add = [&](bool on, const char* name) { if (on) { s += ' '; s += name; } };
  add(f.avx2, "avx2");
  add(f.fma, "fma");
  add(f.f16c, "f16c");
  add(f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq, "avx512(f,bw,vl,dq)");
  add(f.avx512_bf16, "avx512_bf16");
  add(f.avx512_fp16, "avx512_fp16");
  add(f.amx_tile && f.amx_bf16, f.amx_granted ? "amx_bf16" : "amx_bf16(not granted by the OS)");
  return s + "; widest path " + isa_name(best_isa());
}

ForceIsa::ForceIsa(Isa want) : saved_(isa()) {
  check_available(want, "ForceIsa");
  g_isa.store(static_cast<int>(want));
}

ForceIsa::~ForceIsa() { g_isa.store(static_cast<int>(saved_)); }

}  // namespace hg::cpu
