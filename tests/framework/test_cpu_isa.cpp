// CPU feature detection against the kernel's own view (/proc/cpuinfo flags), and the rules
// of the kernel-path choice: never wider than the machine allows, ForceIsa restores.
#include <catch2/catch.hpp>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "framework/cpu/isa.h"
#include "framework/error.h"

using namespace hg;

namespace {
// The flags line of /proc/cpuinfo (empty set where there is none, e.g. not Linux/x86).
std::set<std::string> proc_cpu_flags() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) == 0) {
      std::istringstream words(line.substr(line.find(':') + 1));
      std::set<std::string> flags;
      for (std::string w; words >> w;) flags.insert(w);
      return flags;
    }
  }
  return {};
}
}  // namespace

TEST_CASE("cpu features agree with /proc/cpuinfo", "[cpu_isa]") {
  const auto flags = proc_cpu_flags();
  if (flags.empty()) {
    WARN("SKIPPED: no flags line in /proc/cpuinfo to compare with");
    return;
  }
  const cpu::Features& f = cpu::features();
  // Linux lists a unit only when the OS enabled its register state, as detection requires.
  CHECK(f.avx2 == flags.count("avx2"));
  CHECK(f.fma == flags.count("fma"));
  CHECK(f.f16c == flags.count("f16c"));
  CHECK(f.avx512f == flags.count("avx512f"));
  CHECK(f.avx512bw == flags.count("avx512bw"));
  CHECK(f.avx512_fp16 == flags.count("avx512_fp16"));
  CHECK(f.avx512_bf16 == flags.count("avx512_bf16"));
  CHECK(f.amx_bf16 == flags.count("amx_bf16"));
  CHECK(f.amx_tile == flags.count("amx_tile"));
  INFO(cpu::describe());
  SUCCEED();
}

TEST_CASE("kernel path: parse, bounds, ForceIsa", "[cpu_isa]") {
  CHECK(cpu::parse_isa("avx2") == cpu::Isa::avx2);
  CHECK(cpu::parse_isa("amx") == cpu::Isa::amx);
  CHECK_THROWS_WITH(cpu::parse_isa("sse2"), Catch::Contains("valid: avx2, avx512, amx"));
  CHECK(static_cast<int>(cpu::isa()) <= static_cast<int>(cpu::best_isa()));

  const cpu::Isa before = cpu::isa();
  {
    cpu::ForceIsa force(cpu::Isa::avx2);  // every x86-64-v3 machine has the baseline
    CHECK(cpu::isa() == cpu::Isa::avx2);
  }
  CHECK(cpu::isa() == before);
  if (cpu::best_isa() != cpu::Isa::amx) {
    CHECK_THROWS_WITH(cpu::ForceIsa(cpu::Isa::amx), Catch::Contains("only allows up to"));
    CHECK(cpu::isa() == before);
  }
}
