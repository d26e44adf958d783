// The shadow state behind the emulation's racecheck and initcheck (racecheck.h): the
// hazard rule, the shared- and device-memory shadows, the options, and the line tables
// that name an access's source line in a report.
#include "cuda/emu/racecheck.h"

#include <dlfcn.h>
#include <link.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "cuda/emu/runtime_api.h"
#include "framework/error.h"

namespace hg::cuda::emu {

namespace {

bool flag(const char* name, const char* v) {
  if (!v || !*v || std::strcmp(v, "0") == 0) return false;
  if (std::strcmp(v, "1") == 0) return true;
  throw Error(detail::concat(name, "='", v, "' is invalid; valid: 0 or 1"));
}

CheckOptions& options_storage() {
  static CheckOptions o = parse_check_options(std::getenv("HG_EMU_RACECHECK"), std::getenv("HG_EMU_INITCHECK"),
                                              std::getenv("HG_EMU_SCHEDULE"), std::getenv("HG_EMU_PREEMPT"));
  return o;
}

bool is_write(Access k) { return k == Access::write || k == Access::atomic || k == Access::async_write; }

bool hazard_between(const Stamp& a, const Stamp& b) {
  return a.valid() && (a.mask & b.mask) && concurrent(a, b) && !(a.atomic && b.atomic);
}

}  // namespace

const CheckOptions& check_options() { return options_storage(); }

CheckOptions parse_check_options(const char* race, const char* init, const char* schedule, const char* preempt) {
  CheckOptions o;
  o.race = flag("HG_EMU_RACECHECK", race);
  o.init = flag("HG_EMU_INITCHECK", init);
  if (schedule && *schedule) {
    if (std::strcmp(schedule, "adversarial") == 0)
      o.adversarial = true;
    else if (std::strcmp(schedule, "random") != 0)
      throw Error(detail::concat("HG_EMU_SCHEDULE='", schedule,
                                 "' is invalid; valid: random (the default) or adversarial"));
  }
  if (preempt && *preempt) {
    char* end = nullptr;
    const long v = std::strtol(preempt, &end, 10);
    if (*end != '\0' || v < 0 || v > 1000)
      throw Error(detail::concat("HG_EMU_PREEMPT='", preempt, "' is invalid; valid: stores per mille, 0 to 1000"));
    o.preempt_per_mille = static_cast<unsigned>(v);
  }
  return o;
}
void set_check_options(const CheckOptions& o) { options_storage() = o; }

bool concurrent(const Stamp& a, const Stamp& b) {
  if (a.thread == b.thread) return false;
  if (a.thread >> 32 != b.thread >> 32) return true;  // blocks never synchronise with each other
  if (a.epoch != b.epoch) return false;               // a __syncthreads lies between them
  // b's thread passed an mbarrier wait or named barrier after a happened: taken as the
  // hand-over that orders them (whether that barrier's release came from a's thread is not
  // tracked, so a race across an unrelated barrier goes unseen; no false reports).
  if (b.acquired > a.time) return false;
  const bool same_warp = (a.thread & 0xffffffffu) / 32 == (b.thread & 0xffffffffu) / 32;
  return !(same_warp && a.wepoch != b.wepoch);        // a warp collective orders its lanes
}

Hazard record(Cell& c, const Stamp& who, Access kind) {
  Hazard h;
  if (!is_write(kind)) {
    if (hazard_between(c.w, who)) h = {"read-after-write", c.w, who};
    // Keep two readers that could race with a later writer: any writer differs from one.
    Stamp* slot = &c.r[0];
    if (c.r[0].valid() && c.r[0].thread != who.thread && concurrent(c.r[0], who))
      slot = c.r[1].valid() && c.r[1].thread != who.thread && concurrent(c.r[1], who) ? nullptr : &c.r[1];
    if (slot) *slot = who;
    return h;
  }
  if (hazard_between(c.w, who)) h = {"write-after-write", c.w, who};
  for (const Stamp& r : c.r)
    if (!h.kind && hazard_between(r, who)) h = {"write-after-read", r, who};
  c.w = who;
  c.r[0] = c.r[1] = Stamp{};
  c.init |= who.mask;
  if (kind == Access::async_write) c.pending |= who.mask;
  return h;
}

SharedShadow::Range::~Range() {
  if (cells) munmap(cells, bytes);
}

void SharedShadow::Range::cover(uintptr_t b, uintptr_t e) {
  if (cells) munmap(cells, bytes);
  begin = b;
  end = e;
  bytes = ((e - b) / 4 + 2) * sizeof(Cell);
  // Cells are an aggregate of plain values, so zero bytes are cells (generation 0: stale
  // in every block).
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    cells = nullptr;
    throw Error("cuda emulation: out of host memory for the racecheck's shadow of shared memory");
  }
  cells = static_cast<Cell*>(p);
}

void SharedShadow::attach(const void* smem, size_t smem_bytes) {
  dynamic_.cover(reinterpret_cast<uintptr_t>(smem), reinterpret_cast<uintptr_t>(smem) + (smem ? smem_bytes : 0));
  // Every module's thread-local block for this host thread: `static thread_local` (the
  // emulation's __shared__) of kernels compiled into it lives there. Only kernel code is
  // instrumented, and it reaches thread-locals only through __shared__ and the built-in
  // variables (excluded by the runner).
  std::vector<std::pair<uintptr_t, uintptr_t>> blocks;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* arg) {
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          if (ph.p_type != PT_TLS || !info->dlpi_tls_data || ph.p_memsz == 0) continue;
          const auto begin = reinterpret_cast<uintptr_t>(info->dlpi_tls_data);
          static_cast<std::vector<std::pair<uintptr_t, uintptr_t>>*>(arg)->push_back({begin, begin + ph.p_memsz});
        }
        return 0;
      },
      &blocks);
  static_.clear();
  static_.resize(blocks.size());
  for (size_t i = 0; i < blocks.size(); ++i) static_[i].cover(blocks[i].first, blocks[i].second);
  excluded_.clear();
  gen_ = 0;
}

void SharedShadow::exclude(const void* p, size_t n) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  excluded_.push_back({a, a + n});
}

Cell* SharedShadow::cell(uintptr_t a, bool* is_static) {
  Range* r = nullptr;
  if (a >= dynamic_.begin && a < dynamic_.end) {
    r = &dynamic_;
    *is_static = false;
  } else {
    for (Range& s : static_)
      if (a >= s.begin && a < s.end) r = &s;
    if (!r) return nullptr;
    for (const auto& [b, e] : excluded_)
      if (a >= b && a < e) return nullptr;
    *is_static = true;
  }
  // Granules are aligned to 4 bytes of the address space, so index from the aligned start.
  Cell& c = r->cells[((a & ~uintptr_t{3}) - (r->begin & ~uintptr_t{3})) / 4];
  if (c.gen != gen_) c = Cell{gen_, 0, 0, {}, {}};
  return &c;
}

GlobalShadow::GlobalShadow() : ranges_(device_ranges()), shards_(std::make_unique<Shard[]>(64)) {
  std::sort(ranges_.begin(), ranges_.end());
}

bool GlobalShadow::covers(uintptr_t a) const {
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), std::pair<uintptr_t, uintptr_t>{a, ~uintptr_t{0}});
  return it != ranges_.begin() && a < std::prev(it)->second;
}

bool GlobalShadow::access(uintptr_t granule, const Stamp& who, Access kind, Hazard* out) {
  Shard& s = shards_[(granule >> 2) * 0x9e3779b97f4a7c15ull >> 58];
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.cells.find(granule);
  if (it == s.cells.end()) {
    if (count_.fetch_add(1) >= kMaxCells) return false;
    it = s.cells.emplace(granule, Cell{}).first;
  }
  *out = record(it->second, who, kind);
  return true;
}

void GlobalShadow::complete_async(uintptr_t granule, uint8_t mask) {
  Shard& s = shards_[(granule >> 2) * 0x9e3779b97f4a7c15ull >> 58];
  std::lock_guard<std::mutex> lock(s.mu);
  if (auto it = s.cells.find(granule); it != s.cells.end()) it->second.pending &= static_cast<uint8_t>(~mask);
}

CodeLocation locate_code(const void* pc) {
  Dl_info info{};
  if (!pc || !dladdr(pc, &info) || !info.dli_fname) return {"?", detail::concat("code address ", pc)};
  const auto offset = reinterpret_cast<uintptr_t>(pc) - reinterpret_cast<uintptr_t>(info.dli_fbase);
  char cmd[4200];
  std::snprintf(cmd, sizeof cmd, "addr2line -C -f -i -e '%s' 0x%zx 2>/dev/null", info.dli_fname, offset);
  std::string function, where, caller;
  if (FILE* p = popen(cmd, "r")) {
    char line[4096];
    // Pairs of lines, innermost inlined frame first: function, then file:line. The first
    // frame outside cuda/primitives/ is the kernel line that used the primitive.
    for (int i = 0; std::fgets(line, sizeof line, p); ++i) {
      if (i == 0) function = line;
      if (i == 1) where = line;
      if (i % 2 == 1 && i > 1 && caller.empty() && where.find("cuda/primitives/") != std::string::npos &&
          std::string(line).find("cuda/primitives/") == std::string::npos)
        caller = line;
    }
    pclose(p);
  }
  auto trim = [](std::string s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    // Build-relative paths (build/../cuda/x.cu) from the source root.
    if (auto up = s.rfind("/../"); up != std::string::npos) s.erase(0, up + 4);
    while (s.rfind("../", 0) == 0) s.erase(0, 3);
    if (auto d = s.find(" (discriminator"); d != std::string::npos) s.erase(d);
    return s;
  };
  CodeLocation loc{trim(function), trim(where)};
  if (!caller.empty()) loc.where += " (called from " + trim(caller) + ")";
  if (loc.function.empty() || loc.function[0] == '?') loc.function = "?";
  if (loc.where.empty() || loc.where[0] == '?')
    loc.where = detail::concat(info.dli_fname, "+", reinterpret_cast<const void*>(offset));
  return loc;
}

}  // namespace hg::cuda::emu
