// A tiny streaming JSON writer for segbench's report.json: objects, arrays, escaped
// strings, numbers (NaN/inf become null, since JSON has none), bools and null. Objects
// are indented one key per line unless begun on one line (small records such as a layer's
// statistics); arrays of scalars stay on one line so curves stay compact.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hg::segbench {

// The JSON text of a string, quotes included.
std::string json_quote(std::string_view s);
// Shortest text that reads back as the same double; "null" for NaN and inf.
std::string json_number(double v);

class JsonWriter {
 public:
  JsonWriter& begin_object(bool one_line = false);
  JsonWriter& end_object();
  JsonWriter& begin_array();
  JsonWriter& end_array();
  // The next value's name; only inside an object.
  JsonWriter& key(std::string_view name);

  JsonWriter& value(std::string_view s);
  JsonWriter& value(const char* s) { return value(std::string_view(s)); }
  JsonWriter& value(const std::string& s) { return value(std::string_view(s)); }
  JsonWriter& value(double v);
  JsonWriter& value(int64_t v);
  JsonWriter& value(int v) { return value(static_cast<int64_t>(v)); }
  JsonWriter& value(uint64_t v);
  JsonWriter& value(bool v);
  JsonWriter& null();
  template <class T>
  JsonWriter& value(const std::optional<T>& v) {
    return v ? value(*v) : null();
  }
  template <class T>
  JsonWriter& value(const std::vector<T>& values) {
    begin_array();
    for (const T& v : values) value(v);
    return end_array();
  }
  // key(name).value(v) in one call.
  template <class T>
  JsonWriter& field(std::string_view name, const T& v) {
    key(name);
    return value(v);
  }

  // The document; throws hg::Error while an object or array is still open.
  const std::string& str() const;

 private:
  struct Frame {
    bool is_object = false, empty = true, multiline = false;
  };
  // Writes what goes before a value (separator, indentation) and checks it is allowed.
  void before_value(bool is_container);
  void close(bool is_object);
  void newline(size_t depth);

  std::string out_;
  std::vector<Frame> stack_;
  bool key_pending_ = false, done_ = false;
};

}  // namespace hg::segbench
