// segbench's command line, parsed and range-checked into a Config without touching the
// machine (no files, no training), so that tests and a fuzzer can drive it alone.
#pragma once
#include <string>
#include <vector>

#include "bench/segbench/run_result.h"

namespace hg::segbench {

struct Flags {
  Config config;
  bool overwrite = false;  // --overwrite: an existing non-empty --out may be written into
  bool run = false;        // false: do not run; print `message` and exit with `exit_code`
  int exit_code = 0;       // 0 for --help, 2 for a bad command line
  std::string message;     // --help's text, or what was wrong with the command line
};

// args[0] is the program name. Never throws and never prints: every fault, of CLI11's
// parsing or of the checks after it, ends up in exit_code 2 and message.
Flags parse_flags(const std::vector<std::string>& args);

}  // namespace hg::segbench
