// A failed segbench run keeps what it measured where it can: a run of hours that stops in
// its last mode, or whose report meets a full disk, must not end as an empty folder.
#include "bench/segbench/output_folder.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "bench/segbench/diagnosis.h"
#include "bench/segbench/preflight.h"
#include "bench/segbench/report.h"
#include "framework/error.h"
#include "framework/serialize/atomic_write.h"

namespace hg::segbench {

namespace fs = std::filesystem;

void OutputFolder::prepare(const std::string& dir, bool may_hold_files) {
  std::error_code ec;
  const bool is_new = !fs::exists(dir, ec);
  prepare_output_dir(dir, "--out", may_hold_files);
  dir_ = dir;
  created_ = is_new;
}

void OutputFolder::remove_if_created() const {
  std::error_code ec;
  if (created_) fs::remove_all(dir_, ec);
}

namespace {

std::string joined(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

}  // namespace

std::string keep_what_was_measured(Report& report, const std::string& error, const OutputFolder& out) {
  if (!out.prepared()) return "";
  std::string write_error;
  try {
    if (!report.runs.empty()) {
      std::vector<std::string> measured, missing;
      for (const RunResult& r : report.runs) measured.push_back(r.precision);
      for (const std::string& p : report.config.precisions)
        if (std::find(measured.begin(), measured.end(), p) == measured.end()) missing.push_back(p);
      diagnose(report);
      write_report(report, out.dir());
      const std::string text = "segbench stopped before it finished: " + error + "\nmeasured (in this report): " +
                               joined(measured) + "\nnot measured: " + (missing.empty() ? "none" : joined(missing)) + "\n";
      write_file_atomically(out.dir() + "/error.txt", {{text.data(), text.size()}});
      return detail::concat("the report of the modes measured before the failure (", joined(measured), ") is in ",
                            out.dir(), "/report.html", missing.empty() ? "" : "; not measured: " + joined(missing),
                            " (error.txt says why)");
    }
  } catch (const std::exception& e) {
    write_error = e.what();
  } catch (...) {
    write_error = "an unknown exception";
  }
  const std::string why = report.runs.empty() ? "nothing was measured"
                                              : "its report could not be written either (" + write_error +
                                                    "); the summary above is what was measured";
  if (out.created()) {
    out.remove_if_created();
    std::error_code ec;
    if (!fs::exists(out.dir(), ec))
      return detail::concat("removed the output folder ", out.dir(), " that this run had made: ", why);
    return detail::concat("could not remove the output folder ", out.dir(), " that this run had made: ", why);
  }
  return detail::concat("the output folder ", out.dir(), " was there before this run and is left as it was, with no "
                        "complete report of this run: ", why);
}

}  // namespace hg::segbench
