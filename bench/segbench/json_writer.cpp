// The JSON writer: separators and indentation follow from a stack of open containers,
// so callers never place a comma; misuse (a value without a key, unbalanced ends) throws.
#include "bench/segbench/json_writer.h"

#include <charconv>
#include <cmath>

#include "framework/error.h"

namespace hg::segbench {

std::string json_quote(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out += '"';
  for (const char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          static constexpr char kHex[] = "0123456789abcdef";
          out += "\\u00";
          out += kHex[(c >> 4) & 0xF];
          out += kHex[c & 0xF];
        } else {
          out += c;  // UTF-8 passes through: JSON text is UTF-8
        }
    }
  }
  out += '"';
  return out;
}

std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[32];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, end);
}

void JsonWriter::newline(size_t depth) {
  out_ += '\n';
  out_.append(2 * depth, ' ');
}

void JsonWriter::before_value(bool is_container) {
  if (stack_.empty()) {
    HG_CHECK(!done_, "JsonWriter: a document holds one top-level value; a second one was started");
    done_ = true;
    return;
  }
  Frame& top = stack_.back();
  if (top.is_object) {
    HG_CHECK(key_pending_, "JsonWriter: a value inside an object needs key() first");
    key_pending_ = false;
    top.empty = false;
    return;
  }
  if (top.empty) {
    top.multiline = is_container;
    if (top.multiline) newline(stack_.size());
  } else {
    out_ += ',';
    if (top.multiline) newline(stack_.size());
    else out_ += ' ';
  }
  top.empty = false;
}

void JsonWriter::close(bool is_object) {
  HG_CHECK(!stack_.empty() && stack_.back().is_object == is_object, "JsonWriter: end_",
           is_object ? "object" : "array", "() without a matching begin");
  HG_CHECK(!key_pending_, "JsonWriter: key() without a value before end_object()");
  const Frame top = stack_.back();
  stack_.pop_back();
  if (!top.empty && top.multiline) newline(stack_.size());
  out_ += is_object ? '}' : ']';
}

JsonWriter& JsonWriter::begin_object(bool one_line) {
  before_value(true);
  out_ += '{';
  stack_.push_back({.is_object = true, .multiline = !one_line});
  return *this;
}

JsonWriter& JsonWriter::end_object() {
  close(true);
  return *this;
}

JsonWriter& JsonWriter::begin_array() {
  before_value(true);
  out_ += '[';
  stack_.push_back({.is_object = false});
  return *this;
}

JsonWriter& JsonWriter::end_array() {
  close(false);
  return *this;
}

JsonWriter& JsonWriter::key(std::string_view name) {
  HG_CHECK(!stack_.empty() && stack_.back().is_object, "JsonWriter: key(\"", name, "\") outside an object");
  HG_CHECK(!key_pending_, "JsonWriter: key(\"", name, "\") follows a key that has no value");
  const Frame& top = stack_.back();
  if (!top.empty) out_ += top.multiline ? "," : ", ";
  if (top.multiline) newline(stack_.size());
  out_ += json_quote(name);
  out_ += ": ";
  key_pending_ = true;
  return *this;
}

JsonWriter& JsonWriter::value(std::string_view s) {
  before_value(false);
  out_ += json_quote(s);
  return *this;
}

JsonWriter& JsonWriter::value(double v) {
  before_value(false);
  out_ += json_number(v);
  return *this;
}

JsonWriter& JsonWriter::value(int64_t v) {
  before_value(false);
  out_ += std::to_string(v);
  return *this;
}

JsonWriter& JsonWriter::value(uint64_t v) {
  before_value(false);
  out_ += std::to_string(v);
  return *this;
}

JsonWriter& JsonWriter::value(bool v) {
  before_value(false);
  out_ += v ? "true" : "false";
  return *this;
}

JsonWriter& JsonWriter::null() {
  before_value(false);
  out_ += "null";
  return *this;
}

const std::string& JsonWriter::str() const {
  HG_CHECK(done_ && stack_.empty() && !key_pending_, "JsonWriter: the document is incomplete (",
           stack_.size(), " containers still open)");
  return out_;
}

}  // namespace hg::segbench
