// What hg::Profiler makes of its events: FLOP counts, the per-op and per-module tables and
// the Chrome trace (trace event format, written by hand: the framework has no JSON library).
// Times are ProfileEvent::time_ns(): device time for cuda ops, host wall time otherwise.
#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "framework/error.h"
#include "framework/profiler.h"
#include "framework/serialize/atomic_write.h"

namespace hg {

double op_flops(const std::string& stub, const std::vector<Shape>& shapes) {
  auto numel = [](const Shape& s) { return static_cast<double>(numel_of(s)); };
  auto conv = [&](const Shape& y, const Shape& w) {  // w [K, R, S, C/groups]: y's K channels
    return w.empty() || w[0] == 0 ? 0.0 : 2.0 * numel(y) * numel(w) / static_cast<double>(w[0]);
  };
  if (shapes.size() < 3) return 0;
  if (stub == "linear" || stub == "bmm")  // x [.., K] · w -> out: 2 * |out| * K
    return shapes.front().empty() ? 0.0 : 2.0 * numel(shapes.back()) * static_cast<double>(shapes.front().back());
  if (stub == "conv2d_forward") return conv(shapes.back(), shapes[1]);  // (x, w, [bias,] y)
  if (stub == "conv2d_dgrad") return conv(shapes[0], shapes[1]);         // (gy, w, gx)
  if (stub == "conv2d_wgrad") return conv(shapes[0], shapes[2]);         // (gy, x, gw)
  return 0;
}

int64_t Profiler::op_total_ns() const {
  int64_t total = 0;
  for (const ProfileEvent& e : stopped("op_total_ns"))
    if (e.kind == ProfileEvent::Kind::op && !e.nested) total += e.time_ns();
  return total;
}

std::vector<OpStats> Profiler::key_averages() const {
  std::map<std::tuple<std::string, bool, std::string>, OpStats> groups;
  for (const ProfileEvent& e : stopped("key_averages")) {
    if (e.kind != ProfileEvent::Kind::op || e.nested) continue;
    OpStats& s = groups[{e.name, e.backward, e.dtype}];
    if (s.calls == 0) {
      s.name = e.name, s.dtype = e.dtype, s.backward = e.backward, s.stub = e.stub, s.kernel = e.kernel;
    } else if (s.kernel.find(e.kernel) == std::string::npos) {
      s.kernel += " | " + e.kernel;
    }
    s.calls++;
    s.total_ns += e.time_ns();
    s.max_ns = std::max(s.max_ns, e.time_ns());
    s.host_ns += e.dur_ns;
    s.bytes_allocated += e.bytes_allocated;
    s.reserved_delta += e.reserved_delta;
    s.flops += e.flops;
  }
  std::vector<OpStats> out;
  for (auto& [k, s] : groups) out.push_back(std::move(s));
  std::stable_sort(out.begin(), out.end(), [](const OpStats& a, const OpStats& b) { return a.total_ns > b.total_ns; });
  return out;
}

std::vector<ModuleStats> Profiler::module_averages() const {
  std::map<std::string, ModuleStats> groups;
  for (const ProfileEvent& e : stopped("module_averages")) {
    if (e.kind != ProfileEvent::Kind::op || e.nested) continue;
    const std::string key = e.module.empty() ? "(none)" : e.module;
    ModuleStats& s = groups[key];
    s.module = key;
    s.calls++;
    (e.backward ? s.backward_ns : s.forward_ns) += e.time_ns();
    s.flops += e.flops;
  }
  std::vector<ModuleStats> out;
  for (auto& [k, s] : groups) out.push_back(std::move(s));
  std::stable_sort(out.begin(), out.end(), [](const ModuleStats& a, const ModuleStats& b) {
    return a.forward_ns + a.backward_ns > b.forward_ns + b.backward_ns;
  });
  return out;
}

namespace {

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

bool any_device_time(const Profiler& p) {
  for (const ProfileEvent& e : p.events())
    if (e.device_timed()) return true;
  return false;
}

std::string header(const Profiler& p) {
  const double wall = static_cast<double>(p.wall_ns()) / 1e6, ops = static_cast<double>(p.op_total_ns()) / 1e6;
  std::string h = "Profiled " + fmt("%.3f", wall) + " ms wall; ops " + fmt("%.3f", ops) + " ms (" +
                  fmt("%.1f", wall > 0 ? 100.0 * ops / wall : 0.0) + "% of wall)";
  const DeviceTimingStats d = p.device_timing();
  if (!d.error.empty()) return h + "\ncuda ops in host time: device timing failed: " + d.error + "\n";
  if (!any_device_time(p)) return h + "\n";
  h += "\ncuda ops in device time (" + std::to_string(d.pairs) + " CUDA event pairs; the host waited for the device " +
       std::to_string(d.anchor_syncs) + " time(s) to align clocks";
  if (d.pool_flushes > 0) h += " and " + std::to_string(d.pool_flushes) + " time(s) because the event pool was full";
  return h + "), cpu ops in host time\n";
}

std::string pad(std::string s, size_t width, bool left = true) {
  if (s.size() >= width) return s + " ";
  return left ? s + std::string(width - s.size(), ' ') : std::string(width - s.size(), ' ') + s;
}

}  // namespace

std::string Profiler::table(size_t rows) const {
  const auto stats = key_averages();
  const double total = static_cast<double>(std::max<int64_t>(op_total_ns(), 1));
  const bool device = any_device_time(*this);  // then host time and allocator bytes get columns
  std::ostringstream os;
  os << header(*this);
  os << pad("Op", 26) << pad("Phase", 6) << pad("DType", 10) << pad("Calls", 7, false) << pad("Total ms", 11, false)
     << (device ? pad("Host ms", 11, false) : "") << pad("%Ops", 8, false) << pad("Avg us", 10, false)
     << pad("GFLOP/s", 9, false) << pad("Alloc MB", 10, false) << (device ? pad("Rsv MB", 9, false) : "")
     << "  Kernel\n";
  for (size_t i = 0; i < stats.size() && i < rows; ++i) {
    const OpStats& s = stats[i];
    const double ms = static_cast<double>(s.total_ns) / 1e6;
    os << pad(s.name, 26) << pad(s.backward ? "bwd" : "fwd", 6) << pad(s.dtype, 10)
       << pad(std::to_string(s.calls), 7, false) << pad(fmt("%.3f", ms), 11, false)
       << (device ? pad(fmt("%.3f", static_cast<double>(s.host_ns) / 1e6), 11, false) : "")
       << pad(fmt("%.1f%%", 100.0 * static_cast<double>(s.total_ns) / total), 8, false)
       << pad(fmt("%.1f", 1e3 * ms / static_cast<double>(s.calls)), 10, false)
       << pad(s.flops > 0 ? fmt("%.1f", s.gflops_per_s()) : "-", 9, false)
       << pad(fmt("%.2f", static_cast<double>(s.bytes_allocated) / 1048576.0), 10, false)
       << (device ? pad(fmt("%+.2f", static_cast<double>(s.reserved_delta) / 1048576.0), 9, false) : "") << "  "
       << s.kernel << "\n";
  }
  if (stats.size() > rows) os << "(" << stats.size() - rows << " more rows)\n";
  return os.str();
}

std::string Profiler::module_table(size_t rows) const {
  const auto stats = module_averages();
  const double total = static_cast<double>(std::max<int64_t>(op_total_ns(), 1));
  std::ostringstream os;
  os << header(*this);
  os << pad("Module", 32) << pad("Ops", 7, false) << pad("Fwd ms", 11, false) << pad("Bwd ms", 11, false)
     << pad("%Ops", 8, false) << pad("GFLOP", 10, false) << "\n";
  for (size_t i = 0; i < stats.size() && i < rows; ++i) {
    const ModuleStats& s = stats[i];
    os << pad(s.module, 32) << pad(std::to_string(s.calls), 7, false)
       << pad(fmt("%.3f", static_cast<double>(s.forward_ns) / 1e6), 11, false)
       << pad(fmt("%.3f", static_cast<double>(s.backward_ns) / 1e6), 11, false)
       << pad(fmt("%.1f%%", 100.0 * static_cast<double>(s.forward_ns + s.backward_ns) / total), 8, false)
       << pad(fmt("%.3f", s.flops / 1e9), 10, false) << "\n";
  }
  if (stats.size() > rows) os << "(" << stats.size() - rows << " more rows)\n";
  return os.str();
}

namespace {

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') out += '\\', out += static_cast<char>(c);
    else if (c < 0x20) out += fmt("\\u%04x", c);
    else out += static_cast<char>(c);
  }
  return out + "\"";
}

std::string us(int64_t ns) {  // exact: 3 decimals of microseconds are whole nanoseconds
  return std::to_string(ns / 1000) + "." + fmt("%03.0f", static_cast<double>(ns % 1000));
}

int tid_of(const ProfileEvent& e) { return 2 * e.thread + (e.backward ? 2 : 1); }
// The host is process 1; cuda:N's device time is process 2 + N, a track per stream.
int device_pid(const ProfileEvent& e) { return 2 + e.device.index; }
bool on_device_track(const ProfileEvent& e) { return e.device_timed() && e.stream >= 0; }

std::string meta(const char* what, int pid, int tid, const std::string& arg) {
  return std::string(",\n{\"name\":\"") + what + "\",\"ph\":\"M\",\"pid\":" + std::to_string(pid) +
         ",\"tid\":" + std::to_string(tid) + ",\"args\":{" + arg + "}}";
}

std::string event_args(const ProfileEvent& e) {
  std::string a = "{\"module\":" + quote(e.module);
  if (e.kind == ProfileEvent::Kind::op) {
    std::string shapes = "[";
    for (size_t i = 0; i < e.shapes.size(); ++i) {
      if (i) shapes += ",";
      shapes += quote(shape_str(e.shapes[i]));
    }
    a += ",\"stub\":" + quote(e.stub) + ",\"dtype\":" + quote(e.dtype) + ",\"shapes\":" + shapes + "]" +
         ",\"device\":" + quote(e.device.str()) + ",\"kernel\":" + quote(e.kernel) +
         ",\"bytes_allocated\":" + std::to_string(e.bytes_allocated) + ",\"flops\":" + fmt("%.0f", e.flops);
    if (e.device.is_cuda())
      a += ",\"host_ts\":" + us(e.start_ns) + ",\"host_dur\":" + us(e.dur_ns) +
           ",\"reserved_delta\":" + std::to_string(e.reserved_delta);
  }
  if (e.backward) a += ",\"forward_op\":" + quote(e.forward_op);
  return a + "}";
}

}  // namespace

std::string Profiler::chrome_trace() const {
  const auto& evs = stopped("chrome_trace");
  std::ostringstream os;
  os << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  os << "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"tid\":0,\"args\":{\"name\":\"halfgrad\"}}";
  std::set<int> tids;
  std::set<std::pair<int, int>> device_tracks;  // (pid, stream)
  for (const ProfileEvent& e : evs) {
    tids.insert(tid_of(e));
    if (on_device_track(e)) device_tracks.insert({device_pid(e), e.stream});
  }
  for (int tid : tids) {
    const int thread = (tid - 1) / 2;
    const std::string track = "thread " + std::to_string(thread) + (tid % 2 ? " forward" : " backward");
    os << meta("thread_name", 1, tid, "\"name\":" + quote(track))
       << meta("thread_sort_index", 1, tid, "\"sort_index\":" + std::to_string(tid));
  }
  int named_pid = 0, flows = 0;
  for (const auto& [pid, stream] : device_tracks) {
    if (pid != named_pid)
      os << meta("process_name", pid, 0, "\"name\":\"cuda:" + std::to_string(pid - 2) + " (device time)\"")
         << meta("process_sort_index", pid, 0, "\"sort_index\":" + std::to_string(pid));
    named_pid = pid;
    const std::string track = "stream " + std::to_string(stream) + (stream == 0 ? " (default)" : "");
    os << meta("thread_name", pid, stream + 1, "\"name\":" + quote(track));
  }
  for (const ProfileEvent& e : evs) {
    const bool op = e.kind == ProfileEvent::Kind::op;
    os << ",\n{\"name\":" << quote(e.name) << ",\"cat\":\"" << (op ? "op" : "range") << "\",\"ph\":\"X\",\"ts\":"
       << us(e.start_ns) << ",\"dur\":" << us(e.dur_ns) << ",\"pid\":1,\"tid\":" << tid_of(e)
       << ",\"args\":" << event_args(e) << "}";
    if (!op) continue;
    const std::string end = us(e.start_ns + e.dur_ns);
    os << ",\n{\"name\":\"memory\",\"ph\":\"C\",\"ts\":" << end << ",\"pid\":1,\"args\":{\"bytes in use\":"
       << e.live_bytes << "}}";
    if (on_device_track(e)) {
      const std::string device_ts = us(std::max<int64_t>(e.device_start_ns, 0));
      os << ",\n{\"name\":" << quote(e.name) << ",\"cat\":\"device\",\"ph\":\"X\",\"ts\":" << device_ts
         << ",\"dur\":" << us(e.device_dur_ns) << ",\"pid\":" << device_pid(e) << ",\"tid\":" << e.stream + 1
         << ",\"args\":" << event_args(e) << "}";
      // A flow arrow from the op on its host track to its work on the device (as
      // torch.profiler's launch arrows): both ends bind to the slice starting there.
      ++flows;
      os << ",\n{\"name\":\"launch\",\"cat\":\"launch\",\"ph\":\"s\",\"id\":" << flows << ",\"ts\":" << us(e.start_ns)
         << ",\"pid\":1,\"tid\":" << tid_of(e) << "},\n{\"name\":\"launch\",\"cat\":\"launch\",\"ph\":\"f\",\"bp\":\"e\",\"id\":"
         << flows << ",\"ts\":" << device_ts << ",\"pid\":" << device_pid(e) << ",\"tid\":" << e.stream + 1 << "}";
    }
    // Stacked in the viewer: in use + cached = what the allocator holds from the driver.
    if (e.allocator_reserved >= 0)
      os << ",\n{\"name\":\"allocator\",\"ph\":\"C\",\"ts\":" << end << ",\"pid\":" << device_pid(e)
         << ",\"args\":{\"in use\":" << e.allocator_in_use << ",\"cached\":" << e.allocator_reserved - e.allocator_in_use
         << "}}";
  }
  os << "\n]}\n";
  return os.str();
}

void Profiler::write_chrome_trace(const std::string& path) const {
  const std::string text = chrome_trace();
  write_file_atomically(path, {{text.data(), text.size()}});
}

}  // namespace hg
