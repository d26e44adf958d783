// segbench's --out folder over a run's life: prepared before training (remembering whether
// this run made it), and what a failed run leaves there: the report of the modes it had
// measured, or, when nothing can be written (a full disk), no folder of its own making.
#pragma once
#include <string>

#include "bench/segbench/run_result.h"

namespace hg::segbench {

class OutputFolder {
 public:
  // prepare_output_dir(dir, "--out", may_hold_files), noting whether `dir` was new.
  void prepare(const std::string& dir, bool may_hold_files);
  bool prepared() const { return !dir_.empty(); }
  const std::string& dir() const { return dir_; }
  bool created() const { return created_; }  // by this run (then a failed run may remove it)
  // Removes the folder with everything in it when this run made it; nothing otherwise.
  void remove_if_created() const;

 private:
  std::string dir_;
  bool created_ = false;
};

// After a run failed with `error`: writes the report of the runs in `report` (diagnosed
// here) plus error.txt into the folder, or, when there is no run or the writing fails
// too, removes the folder if this run made it. Returns one sentence saying which it was
// ("" when no folder was prepared). Never throws.
std::string keep_what_was_measured(Report& report, const std::string& error, const OutputFolder& out);

}  // namespace hg::segbench
