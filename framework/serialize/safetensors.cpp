// Reading and writing safetensors: a JSON reader shaped by the header's schema (so no
// recursion and bounded memory on hostile input), the checks that tie the header to the
// file before anything is allocated, and the atomic write (temp, fsync, rename, fsync dir).
#include "framework/serialize/safetensors.h"

#include "framework/serialize/atomic_write.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <new>
#include <set>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

namespace hg {
namespace {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; a big-endian host would need byte swaps");

using detail::concat;

constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // as the reference implementation
constexpr size_t kMaxRank = 64;

struct DTypeName {
  DType dtype;
  const char* name;
};
constexpr DTypeName kDTypeNames[] = {{f64, "F64"}, {f32, "F32"}, {f16, "F16"},
                                     {bf16, "BF16"}, {i64, "I64"}, {b8, "BOOL"}};

constexpr char kHex[] = "0123456789abcdef";

const char* format_dtype_name(DType dt) {
  for (const auto& e : kDTypeNames)
    if (e.dtype == dt) return e.name;
  throw Error(concat("safetensors: dtype ", dtype_name(dt), " has no safetensors name"));
}

// Names from a hostile file can be huge; messages show the start.
std::string quoted(std::string_view s) {
  return s.size() <= 80 ? concat('\'', s, '\'') : concat('\'', s.substr(0, 80), "...'");
}

// Length of the well-formed UTF-8 sequence at s[i], or 0 if there is none (overlong
// forms, surrogates and code points past U+10FFFF are ill-formed, as JSON readers agree).
size_t utf8_length(std::string_view s, size_t i) {
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

bool valid_utf8(std::string_view s) {
  for (size_t i = 0, n; i < s.size(); i += n)
    if ((n = utf8_length(s, i)) == 0) return false;
  return true;
}

void append_utf8(std::string& out, uint32_t cp) {
  const int n = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
  static constexpr unsigned lead[] = {0, 0, 0xC0, 0xE0, 0xF0};
  out += static_cast<char>(lead[n] | (cp >> (6 * (n - 1))));
  for (int k = n - 2; k >= 0; --k) out += static_cast<char>(0x80 | ((cp >> (6 * k)) & 0x3F));
}

void write_json_string(std::string& out, std::string_view s) {
  out += '"';
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20) {
      out += "\\u00";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += ch;
    }
  }
  out += '"';
}

// The pieces of JSON the header is made of, read in the order the schema expects them.
// Every fault names the byte of the header it was found at.
class JsonReader {
 public:
  JsonReader(std::string_view text, const std::string& path) : s_(text), path_(path) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw Error(concat(path_, ": invalid JSON in the safetensors header at byte ", pos_, ": ", what));
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
    if (!at(c)) fail(concat("expected '", c, "' but ", found()));
    ++pos_;
  }
  void expect_end() {
    skip_space();
    if (pos_ < s_.size()) fail(concat("expected the end of the header but ", found()));
  }

  // Calls on_member(key) with the reader at each member's value; keys must be unique.
  template <class F>
  void object(F&& on_member) {
    std::set<std::string> seen;
    sequence('{', '}', [&] {
      skip_space();
      const size_t key_pos = pos_;
      std::string key = string();
      if (!seen.insert(key).second) {
        pos_ = key_pos;
        fail(concat("duplicate key ", quoted(key)));
      }
      expect(':');
      on_member(key);
    });
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
    if (pos_ >= s_.size() || !is_digit(s_[pos_])) fail(concat("expected an integer but ", found()));
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

  std::vector<int64_t> integers(size_t max_len) {
    std::vector<int64_t> v;
    sequence('[', ']', [&] {
      if (v.size() == max_len) fail(concat("array longer than ", max_len, " elements"));
      v.push_back(integer());
    });
    return v;
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

  std::string found() const {
    if (pos_ >= s_.size()) return "the header ends";
    const auto c = static_cast<unsigned char>(s_[pos_]);
    if (c >= 0x20 && c < 0x7f) return concat("found '", static_cast<char>(c), "'");
    return concat("found byte 0x", kHex[c >> 4], kHex[c & 15]);
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

struct Entry {
  std::string name;
  DType dtype = f32;
  Shape shape;
  int64_t begin = 0, end = 0;
};

struct Header {
  std::vector<Entry> entries;
  std::map<std::string, std::string> metadata;
};

Header parse_header(std::string_view text, const std::string& path) {
  JsonReader r(text, path);
  Header h;
  r.object([&](const std::string& key) {
    if (key == "__metadata__") {
      r.object([&](const std::string& k) { h.metadata[k] = r.string(); });
      return;
    }
    Entry e;
    e.name = key;
    bool has_dtype = false, has_shape = false, has_offsets = false;
    const size_t entry_pos = r.pos();
    r.object([&](const std::string& field) {
      if (field == "dtype") {
        const std::string name = r.string();
        const auto* it = std::find_if(std::begin(kDTypeNames), std::end(kDTypeNames),
                                      [&](const DTypeName& d) { return name == d.name; });
        HG_CHECK(it != std::end(kDTypeNames), path, ": tensor ", quoted(key), " has dtype ", quoted(name),
                 ", which halfgrad does not read (it reads F64, F32, F16, BF16, I64, BOOL)");
        e.dtype = it->dtype;
        has_dtype = true;
      } else if (field == "shape") {
        e.shape = r.integers(kMaxRank);
        has_shape = true;
      } else if (field == "data_offsets") {
        const std::vector<int64_t> o = r.integers(2);
        if (o.size() != 2) r.fail(concat("data_offsets of tensor ", quoted(key), " must be [begin, end]"));
        e.begin = o[0];
        e.end = o[1];
        has_offsets = true;
      } else {
        r.fail(concat("tensor ", quoted(key), " has an unknown field ", quoted(field)));
      }
    });
    HG_CHECK(has_dtype && has_shape && has_offsets, path, ": tensor ", quoted(key), " (header byte ", entry_pos,
             ") lacks ", !has_dtype ? "\"dtype\"" : !has_shape ? "\"shape\"" : "\"data_offsets\"");
    h.entries.push_back(std::move(e));
  });
  r.expect_end();
  return h;
}

// Ties every entry to the data section: sizes agree with shapes and the byte ranges
// tile [0, data_size) with no gap or overlap. Nothing is allocated here.
void check_entries(std::vector<Entry>& entries, int64_t data_size, const std::string& path) {
  for (const Entry& e : entries) {
    // Zero sizes count as 1 here, as in check_shape: [0, 2^40, 2^40] holds no bytes but
    // has strides past int64, so it is refused whatever the order of its sizes.
    int64_t nbytes = static_cast<int64_t>(dtype_size(e.dtype)), elements = 1;
    for (int64_t d : e.shape) {
      HG_CHECK(d >= 0, path, ": tensor ", quoted(e.name), " has a negative size in its shape ", shape_str(e.shape));
      HG_CHECK(!__builtin_mul_overflow(nbytes, std::max<int64_t>(d, 1), &nbytes), path, ": tensor ", quoted(e.name),
               " of shape ", shape_str(e.shape), " would overflow a 64-bit byte count");
      elements *= d;
    }
    if (elements == 0) nbytes = 0;
    HG_CHECK(e.begin >= 0 && e.begin <= e.end, path, ": tensor ", quoted(e.name), " has data_offsets [", e.begin,
             ", ", e.end, "], not 0 <= begin <= end");
    HG_CHECK(e.end - e.begin == nbytes, path, ": tensor ", quoted(e.name), " is ", format_dtype_name(e.dtype),
             " of shape ", shape_str(e.shape), " (", nbytes, " bytes) but its data_offsets [", e.begin, ", ", e.end,
             "] span ", e.end - e.begin, " bytes");
    HG_CHECK(e.end <= data_size, path, ": tensor ", quoted(e.name), " has data_offsets [", e.begin, ", ", e.end,
             "] past the end of the ", data_size, "-byte data section (the file is truncated or the header wrong)");
  }
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return std::tie(a.begin, a.end) < std::tie(b.begin, b.end); });
  int64_t covered = 0;
  const Entry* prev = nullptr;
  for (const Entry& e : entries) {
    HG_CHECK(e.begin >= covered, path, ": tensors ", quoted(prev ? prev->name : ""), " and ", quoted(e.name),
             " overlap in the data section (", covered, " > ", e.begin, ")");
    HG_CHECK(e.begin == covered, path, ": the data section has unclaimed bytes ", covered, "..", e.begin,
             " before tensor ", quoted(e.name));
    covered = e.end;
    prev = &e;
  }
  HG_CHECK(covered == data_size, path, ": the data section is ", data_size, " bytes but the tensors cover ", covered,
           " (trailing bytes after the last tensor)");
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

void read_at(int fd, void* dst, size_t n, uint64_t offset, const std::string& path) {
  auto* p = static_cast<char*>(dst);
  while (n > 0) {
    const ssize_t got = ::pread(fd, p, n, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    HG_CHECK(got > 0, path, ": read failed at byte ", offset, ": ",
             got < 0 ? std::strerror(errno) : "the file ended early (was it truncated while being read?)");
    p += got;
    n -= static_cast<size_t>(got);
    offset += static_cast<uint64_t>(got);
  }
}

// The whole read after the file is known to be a regular one of file_size bytes.
SafetensorsFile read_safetensors(int fd, uint64_t file_size, const std::string& path) {
  HG_CHECK(file_size >= 8, path, ": the file is ", file_size,
           " bytes, shorter than the 8-byte header length a safetensors file starts with");
  unsigned char length[8];
  read_at(fd, length, 8, 0, path);
  uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i) header_size = (header_size << 8) | length[i];
  HG_CHECK(header_size <= kMaxHeaderBytes, path, ": the header length ", header_size, " is absurd (over ",
           kMaxHeaderBytes, " bytes); this is not a safetensors file");
  HG_CHECK(header_size <= file_size - 8, path, ": the header length ", header_size, " exceeds the ",
           file_size - 8, " bytes that follow it (the file is truncated or not a safetensors file)");
  std::string text(header_size, '\0');
  read_at(fd, text.data(), text.size(), 8, path);
  Header h = parse_header(text, path);
  const uint64_t data_start = 8 + header_size;
  check_entries(h.entries, static_cast<int64_t>(file_size - data_start), path);

  SafetensorsFile out;
  out.metadata = std::move(h.metadata);
  for (const Entry& e : h.entries) {
    Tensor t = empty(e.shape, {e.dtype, Device::cpu()});
    const auto nbytes = static_cast<size_t>(e.end - e.begin);
    if (nbytes > 0) read_at(fd, t.data_ptr(), nbytes, data_start + static_cast<uint64_t>(e.begin), path);
    if (e.dtype == b8) {
      // Any byte but 0 or 1 is not a C++ bool; reading it as one would be undefined.
      const auto* bytes = static_cast<const unsigned char*>(t.data_ptr());
      for (size_t i = 0; i < nbytes; ++i)
        HG_CHECK(bytes[i] <= 1, path, ": BOOL tensor ", quoted(e.name), " holds byte ", int{bytes[i]},
                 " at element ", i, "; only 0 and 1 are booleans");
    }
    out.tensors.emplace(e.name, std::move(t));
  }
  return out;
}

}  // namespace

void save_safetensors(const std::string& path, const StateDict& tensors,
                      const std::map<std::string, std::string>& metadata) {
  std::vector<std::pair<std::string, Tensor>> host;
  for (const auto& [name, t] : tensors) {
    HG_CHECK(name != "__metadata__", path, ": '__metadata__' is reserved by the safetensors format, not a tensor name");
    HG_CHECK(valid_utf8(name), path, ": tensor name ", quoted(name), " is not valid UTF-8");
    HG_CHECK(t.defined(), path, ": tensor ", quoted(name), " is undefined");
    host.emplace_back(name, t.detach().to(Device::cpu()).contiguous());
  }
  for (const auto& [k, v] : metadata)
    HG_CHECK(valid_utf8(k) && valid_utf8(v), path, ": metadata entry ", quoted(k), " is not valid UTF-8");
  // Widest items first keeps every tensor naturally aligned in the file, as the
  // reference writer does, so readers that map the file can use the data in place.
  std::stable_sort(host.begin(), host.end(),
                   [](const auto& a, const auto& b) { return dtype_size(a.second.dtype()) > dtype_size(b.second.dtype()); });

  std::string header = "{";
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    for (const auto& [k, v] : metadata) {
      write_json_string(header, k);
      header += ':';
      write_json_string(header, v);
      header += ',';
    }
    header.back() = '}';
    header += ',';
  }
  std::vector<ByteChunk> chunks(2);
  int64_t offset = 0;
  for (const auto& [name, t] : host) {
    const auto nbytes = static_cast<int64_t>(static_cast<size_t>(t.numel()) * dtype_size(t.dtype()));
    write_json_string(header, name);
    header += concat(":{\"dtype\":\"", format_dtype_name(t.dtype()), "\",\"shape\":[");
    for (int64_t d : t.shape()) header += concat(d, ',');
    if (header.back() == ',') header.pop_back();
    header += concat("],\"data_offsets\":[", offset, ",", offset + nbytes, "]},");
    if (nbytes > 0) chunks.push_back({t.data_ptr(), static_cast<size_t>(nbytes)});
    offset += nbytes;
  }
  if (header.back() == ',') header.pop_back();
  header += '}';
  header.resize((header.size() + 7) / 8 * 8, ' ');
  HG_CHECK(header.size() <= kMaxHeaderBytes, path, ": the header would be ", header.size(),
           " bytes, over the ", kMaxHeaderBytes, "-byte limit readers enforce");
  unsigned char length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<unsigned char>(uint64_t{header.size()} >> (8 * i));
  chunks[0] = {length, 8};
  chunks[1] = {header.data(), header.size()};
  write_file_atomically(path, chunks);
}

SafetensorsFile load_safetensors(const std::string& path) {
  // A plain open() of a FIFO waits for a writer forever: O_NONBLOCK returns at once, and
  // the type check below refuses it (on a regular file O_NONBLOCK changes nothing).
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  HG_CHECK(fd.get() >= 0, path, ": cannot open: ", std::strerror(errno));
  struct stat st {};
  HG_CHECK(::fstat(fd.get(), &st) == 0, path, ": cannot stat: ", std::strerror(errno));
  HG_CHECK(S_ISREG(st.st_mode), path, ": not a regular file (",
           S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISDIR(st.st_mode) ? "a directory" : S_ISSOCK(st.st_mode) ? "a socket" : "a device",
           "); a safetensors file must be a regular file");
  try {
    return read_safetensors(fd.get(), static_cast<uint64_t>(st.st_size), path);
  } catch (const std::bad_alloc&) {
    // A header of millions of empty tensors fits the 100 MB limit but not every machine.
    throw Error(concat(path, ": out of memory while reading the header's tensors"));
  }
}

void save(const std::string& path, const StateDict& tensors) { save_safetensors(path, tensors); }
StateDict load(const std::string& path) { return load_safetensors(path).tensors; }

}  // namespace hg
