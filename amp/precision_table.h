// The precision class of every op, with the reason, in one table: what autocast does to
// each op's inputs (docs/amp.md prints the same table; tests check the ops obey it).
#pragma once
#include <string>
#include <vector>

#include "framework/precision.h"

namespace hg::amp {

struct OpPrecision {
  const char* op;
  PrecisionClass cls;
  const char* reason;
};

const std::vector<OpPrecision>& precision_table();
// The class of `op` ("conv2d"); throws hg::Error for an op not in the table.
PrecisionClass precision_class_of(const std::string& op);
// The table as Markdown (op | class | why).
std::string precision_table_markdown();

}  // namespace hg::amp
