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
// What a cast (to, copy_) gives for values its target cannot hold, as Markdown: one row per
// value, computed by casting it from f64 to i64, bool and f16 on the CPU (every device gives
// the same). Casts never refuse a value; the factories and fill_ do (framework/scalar.h).
std::string cast_table_markdown();

}  // namespace hg::amp
