// halfgrad_fuzz: a seeded random driver over the library's input validation. Each case
// must match an f64 reference or raise hg::Error; anything else (a wrong value, a
// non-hg::Error exception) is reported and makes the exit code 1. Crashes, hangs and
// sanitizer reports end the process, which CI sees as a failure too.
//   halfgrad_fuzz --cases N --seed S [--only C] [--trace] [--verbose]
// --only replays one case; --trace names each case before it runs (to find a crash).
#include <cstdio>
#include <cstring>
#include <map>
#include <regex>
#include <string>

#include "tests/fuzz/fuzz.h"

namespace {
bool g_trace = false;
}  // namespace

void hg::fuzz::note(const std::string& what) {
  if (!g_trace) return;
  std::printf("  %s\n", what.c_str());
  std::fflush(stdout);
}

namespace {

using namespace hg::fuzz;

struct Tally {
  int64_t cases = 0, matched = 0, errors = 0, failures = 0;
  std::map<std::string, int64_t> messages;  // normalised hg::Error text -> count
};

// Messages differ in sizes, indices and file names; counting them as distinct would
// only count the random numbers. Numbers and quoted names are masked.
std::string normalise(const std::string& msg) {
  static const std::regex quoted("'[^']*'"), path("/tmp/hg_fuzz_[A-Za-z0-9_./]*"), number("(^|[^A-Za-z_0-9])-?[0-9]+(\\.[0-9]+)?(e[-+]?[0-9]+)?");
  std::string s = std::regex_replace(msg, path, "<file>");
  s = std::regex_replace(s, quoted, "'_'");
  return std::regex_replace(s, number, "$1#");
}

bool parse_int(const char* s, uint64_t& out) {
  char* end = nullptr;
  out = std::strtoull(s, &end, 10);
  return *s && *end == '\0' && s[0] != '-';
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t cases = 1000, seed = 1, value = 0;
  bool verbose = false, trace = false;
  int64_t only = -1;
  for (int i = 1; i < argc; ++i) {
    const bool has_value = i + 1 < argc;
    if (!std::strcmp(argv[i], "--cases") && has_value && parse_int(argv[i + 1], cases)) ++i;
    else if (!std::strcmp(argv[i], "--seed") && has_value && parse_int(argv[i + 1], seed)) ++i;
    else if (!std::strcmp(argv[i], "--only") && has_value && parse_int(argv[i + 1], value)) only = static_cast<int64_t>(value), ++i;
    else if (!std::strcmp(argv[i], "--verbose")) verbose = true;
    else if (!std::strcmp(argv[i], "--trace")) trace = g_trace = true;
    else {
      std::fprintf(stderr, "usage: halfgrad_fuzz [--cases N] [--seed S] [--only C] [--trace] [--verbose]\n");
      return 2;
    }
  }
  const std::vector<std::pair<const char*, Area>> areas = {
      {"views", fuzz_views}, {"binary", fuzz_binary}, {"matmul", fuzz_matmul},
      {"conv", fuzz_conv},   {"pool", fuzz_pool},     {"safetensors", fuzz_safetensors}};
  std::map<std::string, Tally> per_area;
  Tally all;
  for (uint64_t c = 0; c < cases; ++c) {
    if (only >= 0 && c != static_cast<uint64_t>(only)) continue;
    const auto& [name, area] = areas[c % areas.size()];
    if (trace) {
      std::printf("case %llu: %s\n", static_cast<unsigned long long>(c), name);
      std::fflush(stdout);
    }
    // Each case has its own stream: a failing case replays alone from (seed, case).
    Rng rng(seed * 0x9E3779B97F4A7C15ull + c);
    Tally& t = per_area[name];
    ++t.cases;
    try {
      area(rng);
      ++t.matched;
    } catch (const hg::Error& e) {
      ++t.errors;
      ++t.messages[normalise(e.what())];
    } catch (const Mismatch& e) {
      ++t.failures;
      std::printf("MISMATCH in %s case %llu (seed %llu): %s\n", name, static_cast<unsigned long long>(c),
                  static_cast<unsigned long long>(seed), e.what());
    } catch (const std::exception& e) {
      ++t.failures;
      std::printf("NON-hg::Error EXCEPTION in %s case %llu (seed %llu): %s\n", name,
                  static_cast<unsigned long long>(c), static_cast<unsigned long long>(seed), e.what());
    }
  }
  std::printf("%-12s %8s %8s %8s %8s %10s\n", "area", "cases", "matched", "hg::Error", "failed", "messages");
  for (const auto& [name, t] : per_area) {
    std::printf("%-12s %8lld %8lld %8lld %8lld %10zu\n", name.c_str(), static_cast<long long>(t.cases),
                static_cast<long long>(t.matched), static_cast<long long>(t.errors), static_cast<long long>(t.failures),
                t.messages.size());
    all.cases += t.cases;
    all.matched += t.matched;
    all.errors += t.errors;
    all.failures += t.failures;
    for (const auto& [m, n] : t.messages) all.messages[m] += n;
  }
  if (verbose)
    for (const auto& [m, n] : all.messages) std::printf("%6lld  %s\n", static_cast<long long>(n), m.c_str());
  std::printf("fuzz: seed %llu, %lld cases: %lld matched the reference, %lld raised hg::Error "
              "(%zu distinct messages, numbers masked), %lld failed\n",
              static_cast<unsigned long long>(seed), static_cast<long long>(all.cases),
              static_cast<long long>(all.matched), static_cast<long long>(all.errors), all.messages.size(),
              static_cast<long long>(all.failures));
  return all.failures == 0 ? 0 : 1;
}
