// The layout of json_text; every scalar and key is written by nlohmann-json's dump().
#include "bench/segbench/json_text.h"

#include <nlohmann/json.hpp>

namespace hg::segbench {
namespace {

using Json = nlohmann::ordered_json;

bool flat(const Json& j) {
  for (const Json& v : j)
    if (v.is_structured()) return false;
  return true;
}

// Invalid UTF-8 (from a CPU model name, say) is replaced rather than thrown: an exception
// here would lose the whole report over one character.
std::string scalar(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

void write(std::string& out, const Json& j, size_t depth) {
  if (!j.is_structured()) {
    out += scalar(j);
    return;
  }
  const bool obj = j.is_object();
  const bool one_line = j.empty() || (flat(j) && (!obj || depth >= 2));
  out += obj ? '{' : '[';
  bool first = true;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!first) out += ',';
    if (one_line) {
      if (!first) out += ' ';
    } else {
      out += '\n';
      out.append(2 * (depth + 1), ' ');
    }
    first = false;
    if (obj) out += scalar(Json(it.key())) + ": ";
    write(out, it.value(), depth + 1);
  }
  if (!one_line) {
    out += '\n';
    out.append(2 * depth, ' ');
  }
  out += obj ? '}' : ']';
}

}  // namespace

std::string json_text(const Json& value) {
  std::string out;
  write(out, value, 0);
  return out;
}

}  // namespace hg::segbench
