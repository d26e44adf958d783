// The JSON reader of the safetensors header: strict UTF-8, no recursion (nesting is
// bounded), every fault an hg::Error naming the byte of the header it was found at.
// Internal to framework/serialize; header-only so the fuzz build instruments it too.
#pragma once
#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "framework/error.h"

namespace hg::serialize_detail {

inline constexpr char kHex[] = "0123456789abcdef";

// Names from a hostile file can be huge; messages show the start. (Not "quoted": ADL
// would prefer std::quoted wherever <iomanip> or <filesystem> is included.)
inline std::string excerpt(std::string_view s) {
  return s.size() <= 80 ? detail::concat('\'', s, '\'') : detail::concat('\'', s.substr(0, 80), "...'");
}

// Length of the well-formed UTF-8 sequence at s[i], or 0 if there is none (overlong
// forms, surrogates and code points past U+10FFFF are ill-formed, as JSON readers agree).
inline size_t utf8_length(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) return 1;
  size_t n;
  uint32_t cp;
  if (c >= 0xC2 && c <= 0xDF) n = 2, cp = c & 0x1Fu;
  else if ((c & 0xF0) == 0xE0) n = 3, cp = c & 0x0Fu;
  else if (c >= 0xF0 && c <= 0xF4) n = 4, cp = c & 0x07u;
  else return 0;
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b & 0x3Fu);
  }
  if (n == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) return 0;
  if (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) return 0;
  return n;
}

inline bool valid_utf8(std::string_view s) {
  for (size_t i = 0, n; i < s.size(); i += n)
    if ((n = utf8_length(s, i)) == 0) return false;
  return true;
}

inline void append_utf8(std::string& out, uint32_t cp) {
  const int n = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
  static constexpr unsigned lead[] = {0, 0, 0xC0, 0xE0, 0xF0};
  out += static_cast<char>(lead[n] | (cp >> (6 * (n - 1))));
  for (int k = n - 2; k >= 0; --k) out += static_cast<char>(0x80 | ((cp >> (6 * k)) & 0x3F));
}

// The pieces of JSON the header is made of, read in the order the schema expects them.
class JsonReader {
 public:
  JsonReader(std::string_view text, const std::string& path) : s_(text), path_(path) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw Error(detail::concat(path_, ": invalid JSON in the safetensors header at byte ", pos_, ": ", what));
  }
  size_t pos() const { return pos_; }

  void skip_space() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }
  bool at(char c) {
    skip_space();
    return pos_ < s_.size() && s_[pos_] == c;
  }
  void expect(char c) {
    if (!at(c)) fail(detail::concat("expected '", c, "' but ", found()));
    ++pos_;
  }
  void expect_end() {
    skip_space();
    if (pos_ < s_.size()) fail(detail::concat("expected the end of the header but ", found()));
  }
  // What is at the reading position, for messages: "found 'x'" or "the header ends".
  std::string found() const {
    if (pos_ >= s_.size()) return "the header ends";
    const auto c = static_cast<unsigned char>(s_[pos_]);
    if (c >= 0x20 && c < 0x7f) return detail::concat("found '", static_cast<char>(c), "'");
    return detail::concat("found byte 0x", kHex[c >> 4], kHex[c & 15]);
  }

  // Calls on_member(key) with the reader at each member's value. With unique_keys a
  // repeated key is refused; otherwise on_member sees each occurrence.
  template <class F>
  void object(F&& on_member, bool unique_keys = true) {
    std::set<std::string> seen;
    sequence('{', '}', [&] {
      skip_space();
      const size_t key_pos = pos_;
      std::string key = string();
      if (unique_keys && !seen.insert(key).second) {
        pos_ = key_pos;
        fail(detail::concat("duplicate key ", excerpt(key)));
      }
      expect(':');
      on_member(key);
    });
  }

  // Consumes a JSON null if one is next.
  bool null() {
    skip_space();
    if (s_.substr(pos_, 4) != "null") return false;
    pos_ += 4;
    return true;
  }

  std::string string() {
    expect('"');
    std::string out;
    for (;;) {
      if (pos_ >= s_.size()) fail("unterminated string");
      const auto c = static_cast<unsigned char>(s_[pos_]);
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (c < 0x20) fail("control character inside a string");
      if (c == '\\') {
        escape(out);
        continue;
      }
      const size_t n = utf8_length(s_, pos_);
      if (n == 0) fail("invalid UTF-8");
      out.append(s_.substr(pos_, n));
      pos_ += n;
    }
  }

  int64_t integer() {
    skip_space();
    const size_t start = pos_;
    const bool negative = pos_ < s_.size() && s_[pos_] == '-';
    pos_ += negative;
    if (pos_ >= s_.size() || !is_digit(s_[pos_])) fail(detail::concat("expected an integer but ", found()));
    if (s_[pos_] == '0' && pos_ + 1 < s_.size() && is_digit(s_[pos_ + 1])) fail("integer with a leading zero");
    uint64_t v = 0;
    bool overflow = false;
    for (; pos_ < s_.size() && is_digit(s_[pos_]); ++pos_) {
      const unsigned d = static_cast<unsigned>(s_[pos_] - '0');
      overflow |= v > (std::numeric_limits<uint64_t>::max() - d) / 10;
      v = v * 10 + d;
    }
    if (pos_ < s_.size() && (s_[pos_] == '.' || s_[pos_] == 'e' || s_[pos_] == 'E'))
      fail("expected an integer, found a fraction or exponent");
    const uint64_t limit = uint64_t{1} << 63;
    if (overflow || v > limit || (!negative && v == limit)) {
      pos_ = start;
      fail("integer outside the 64-bit range");
    }
    return negative ? static_cast<int64_t>(~v + 1) : static_cast<int64_t>(v);
  }

  std::vector<int64_t> integers(size_t max_len = std::numeric_limits<size_t>::max()) {
    std::vector<int64_t> v;
    sequence('[', ']', [&] {
      if (v.size() == max_len) fail(detail::concat("array longer than ", max_len, " elements"));
      v.push_back(integer());
    });
    return v;
  }

  // Reads any JSON value and drops it; arrays and objects may nest max_depth deep (a
  // stack of brackets, not recursion). Keys of dropped objects may repeat.
  void skip_value(size_t max_depth) {
    std::string open;  // the brackets entered, innermost last
    for (;;) {
      skip_space();
      const char c = pos_ < s_.size() ? s_[pos_] : '\0';
      bool done = true;  // a whole value was read (not just a container opened)
      if (c == '{' || c == '[') {
        if (open.size() == max_depth) fail(detail::concat("a value nested deeper than ", max_depth, " levels"));
        ++pos_;
        open += c;
        if (at(c == '{' ? '}' : ']')) {
          ++pos_;
          open.pop_back();
        } else {
          if (c == '{') member_key();
          done = false;
        }
      } else if (c == '"') {
        (void)string();
      } else if (c == 't' || c == 'f' || c == 'n') {
        literal();
      } else if (c == '-' || is_digit(c)) {
        number();
      } else {
        fail(detail::concat("expected a value but ", found()));
      }
      if (!done) continue;
      // After a value: the next element of the innermost container, or its end.
      for (;;) {
        if (open.empty()) return;
        if (at(',')) {
          ++pos_;
          if (open.back() == '{') member_key();
          break;
        }
        expect(open.back() == '{' ? '}' : ']');
        open.pop_back();
      }
    }
  }

 private:
  static bool is_digit(char c) { return c >= '0' && c <= '9'; }

  // open item (, item)* close, or open close.
  template <class F>
  void sequence(char open, char close, F&& item) {
    expect(open);
    if (!at(close)) {
      item();
      while (at(',')) {
        ++pos_;
        item();
      }
    }
    expect(close);
  }

  void member_key() {
    (void)string();
    expect(':');
  }

  void literal() {
    for (std::string_view word : {"true", "false", "null"})
      if (s_.substr(pos_, word.size()) == word) {
        pos_ += word.size();
        return;
      }
    fail(detail::concat("expected true, false or null but ", found()));
  }

  // -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?, of any length.
  void number() {
    const auto digits = [&] {
      if (pos_ >= s_.size() || !is_digit(s_[pos_])) fail(detail::concat("invalid number: expected a digit but ", found()));
      while (pos_ < s_.size() && is_digit(s_[pos_])) ++pos_;
    };
    if (s_[pos_] == '-') ++pos_;
    if (pos_ < s_.size() && s_[pos_] == '0') {
      ++pos_;
      if (pos_ < s_.size() && is_digit(s_[pos_])) fail("number with a leading zero");
    } else {
      digits();
    }
    if (pos_ < s_.size() && s_[pos_] == '.') {
      ++pos_;
      digits();
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
      digits();
    }
  }

  uint32_t hex4() {
    if (pos_ + 4 > s_.size()) fail("truncated \\u escape");
    uint32_t v = 0;
    for (int k = 0; k < 4; ++k, ++pos_) {
      const char c = s_[pos_], lower = static_cast<char>(c | 0x20);
      if (is_digit(c)) v = v * 16 + static_cast<uint32_t>(c - '0');
      else if (lower >= 'a' && lower <= 'f') v = v * 16 + static_cast<uint32_t>(lower - 'a' + 10);
      else fail("invalid hex digit in a \\u escape");
    }
    return v;
  }

  void escape(std::string& out) {
    ++pos_;
    const char e = pos_ < s_.size() ? s_[pos_++] : '\0';
    static constexpr std::string_view from = "\"\\/bfnrt", to = "\"\\/\b\f\n\r\t";
    if (const size_t k = from.find(e); k != std::string_view::npos) {
      out += to[k];
      return;
    }
    if (e != 'u') {
      --pos_;
      fail("invalid escape");
    }
    uint32_t cp = hex4();
    if (cp >= 0xDC00 && cp <= 0xDFFF) fail("unpaired low surrogate in a \\u escape");
    if (cp >= 0xD800 && cp <= 0xDBFF) {
      if (pos_ + 2 > s_.size() || s_[pos_] != '\\' || s_[pos_ + 1] != 'u') fail("unpaired high surrogate in a \\u escape");
      pos_ += 2;
      const uint32_t lo = hex4();
      if (lo < 0xDC00 || lo > 0xDFFF) fail("unpaired high surrogate in a \\u escape");
      cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
    }
    append_utf8(out, cp);
  }

  std::string_view s_;
  const std::string& path_;
  size_t pos_ = 0;
};

}  // namespace hg::serialize_detail
