// A check of hg::Profiler's Chrome trace against the trace event format, shared by the cpu
// and cuda profiler tests: every event well formed, every track named, complete events on
// one track nested, each flow arrow's ends where spans start. Returns what the tests look at.
#pragma once
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>
#include <nlohmann/json.hpp>

namespace hg::test {

struct TraceSummary {
  std::map<int, std::string> process_names;                // pid -> name
  std::map<std::pair<int, int>, std::string> track_names;  // (pid, tid) -> name
  std::vector<nlohmann::json> spans;                       // "X" events, in file order
  std::vector<nlohmann::json> counters;                    // "C" events, in file order
  std::map<int64_t, std::vector<nlohmann::json>> flows;    // "s" and "f" events by id
};

inline TraceSummary check_trace(const std::string& text) {
  const auto trace = nlohmann::json::parse(text);
  REQUIRE(trace.is_object());
  REQUIRE(trace.at("traceEvents").is_array());
  TraceSummary out;
  std::map<std::pair<int, int>, std::vector<std::pair<double, double>>> by_track;  // [ts, ts + dur]
  for (const auto& ev : trace["traceEvents"]) {
    REQUIRE(ev.at("name").is_string());
    REQUIRE(ev.at("ph").is_string());
    REQUIRE(ev.at("pid").is_number_integer());
    const std::string ph = ev["ph"];
    const int pid = ev["pid"];
    if (ph == "M") {
      const std::string name = ev["name"];
      const bool sort = name == "thread_sort_index" || name == "process_sort_index";
      REQUIRE(ev.at("args").at(sort ? "sort_index" : "name").is_primitive());
      if (name == "thread_name") out.track_names[{pid, ev.at("tid").get<int>()}] = ev["args"]["name"];
      if (name == "process_name") out.process_names[pid] = ev["args"]["name"];
    } else if (ph == "X") {
      REQUIRE(ev.at("ts").is_number());
      REQUIRE(ev.at("dur").is_number());
      REQUIRE(ev.at("tid").is_number_integer());
      CHECK(ev["ts"].get<double>() >= 0);
      CHECK(ev["dur"].get<double>() >= 0);
      by_track[{pid, ev["tid"].get<int>()}].emplace_back(ev["ts"].get<double>(),
                                                         ev["ts"].get<double>() + ev["dur"].get<double>());
      out.spans.push_back(ev);
    } else if (ph == "s" || ph == "f") {
      REQUIRE(ev.at("id").is_number_integer());
      REQUIRE(ev.at("ts").is_number());
      REQUIRE(ev.at("tid").is_number_integer());
      out.flows[ev["id"].get<int64_t>()].push_back(ev);
    } else {
      REQUIRE(ph == "C");
      REQUIRE(ev.at("ts").is_number());
      CHECK(ev["ts"].get<double>() >= 0);
      REQUIRE(ev.at("args").is_object());
      for (const auto& [series, value] : ev["args"].items()) REQUIRE(value.is_number_integer());
      out.counters.push_back(ev);
    }
  }
  for (auto& [track, s] : by_track) {
    INFO("pid " << track.first << " tid " << track.second);
    CHECK(out.track_names.count(track) == 1);
    CHECK(out.process_names.count(track.first) == 1);
    // Each span starts after and ends before the one it starts in.
    std::sort(s.begin(), s.end(), [](auto& a, auto& b) { return a.first < b.first || (a.first == b.first && a.second > b.second); });
    std::vector<double> open_ends;
    for (const auto& [b, e] : s) {
      // 1e-6 us: ts and dur are exact decimals of whole ns; their double sums may differ by an ulp.
      while (!open_ends.empty() && open_ends.back() <= b + 1e-6) open_ends.pop_back();
      if (!open_ends.empty()) CHECK(e <= open_ends.back() + 1e-6);
      open_ends.push_back(e);
    }
  }
  // A flow is a start on one track and a finish on another, each at a span's start there.
  for (const auto& [id, ends] : out.flows) {
    INFO("flow " << id);
    REQUIRE(ends.size() == 2);
    CHECK(ends[0]["ph"] == "s");
    CHECK(ends[1]["ph"] == "f");
    for (const auto& end : ends) {
      bool at_span_start = false;
      for (const auto& [b, e] : by_track[{end["pid"].get<int>(), end["tid"].get<int>()}])
        at_span_start = at_span_start || std::abs(b - end["ts"].get<double>()) < 1e-6;
      CHECK(at_span_start);
    }
  }
  return out;
}

}  // namespace hg::test
