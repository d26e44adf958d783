// Reading and writing safetensors: the header read by its schema (json_reader.h: no
// recursion, bounded nesting), the checks that tie the header to the file before anything
// is allocated, the widening of narrow integers, and the atomic write (atomic_write.h).
#include "framework/serialize/safetensors.h"

#include "framework/serialize/atomic_write.h"
#include "framework/serialize/json_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <new>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

namespace hg {
namespace {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; a big-endian host would need byte swaps");

using detail::concat;
using serialize_detail::excerpt;
using serialize_detail::JsonReader;
using serialize_detail::valid_utf8;

constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // as the reference implementation
// The reference reader (serde_json) stops at 128 levels of nesting in all; a tensor's
// entry sits 2 deep, so a field it does not know may nest 125 more.
constexpr size_t kMaxIgnoredDepth = 125;

// The file's dtypes halfgrad reads. Integers narrower than 64 bits come in as i64
// (exactly: every I32, U32, ... value is an i64); they are written back as I64.
enum class Widen : uint8_t { none, signed_int, unsigned_int };
struct FileDType {
  const char* name;
  DType dtype;
  uint8_t bytes;  // per element in the file
  Widen widen;
};
constexpr FileDType kFileDTypes[] = {
    {"F64", f64, 8, Widen::none},         {"F32", f32, 4, Widen::none},         {"F16", f16, 2, Widen::none},
    {"BF16", bf16, 2, Widen::none},       {"I64", i64, 8, Widen::none},         {"BOOL", b8, 1, Widen::none},
    {"I32", i64, 4, Widen::signed_int},   {"I16", i64, 2, Widen::signed_int},   {"I8", i64, 1, Widen::signed_int},
    {"U32", i64, 4, Widen::unsigned_int}, {"U16", i64, 2, Widen::unsigned_int}, {"U8", i64, 1, Widen::unsigned_int}};

const char* format_dtype_name(DType dt) {
  for (const auto& e : kFileDTypes)
    if (e.dtype == dt && e.widen == Widen::none) return e.name;
  throw Error(concat("safetensors: dtype ", dtype_name(dt), " has no safetensors name"));
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
      out += serialize_detail::kHex[c >> 4];
      out += serialize_detail::kHex[c & 15];
    } else {
      out += ch;
    }
  }
  out += '"';
}

// A header's shape in a message: a hostile one may have millions of sizes.
std::string shape_text(const Shape& shape) {
  if (shape.size() <= 16) return shape_str(shape);
  const std::string start = shape_str(Shape(shape.begin(), shape.begin() + 8));
  return concat(start.substr(0, start.size() - 1), ", ...] (", shape.size(), " sizes)");
}

struct Entry {
  std::string name;
  const FileDType* type = nullptr;
  Shape shape;
  int64_t begin = 0, end = 0;
};

struct Header {
  std::vector<Entry> entries;
  std::map<std::string, std::string> metadata;
};

const FileDType& file_dtype(const std::string& name, const std::string& tensor, const std::string& path) {
  for (const FileDType& d : kFileDTypes)
    if (name == d.name) return d;
  throw Error(concat(path, ": tensor ", excerpt(tensor), " has dtype ", excerpt(name),
                     ", which halfgrad does not read (it reads F64, F32, F16, BF16, I64, BOOL, and I32, I16, I8, "
                     "U32, U16, U8 as I64)"));
}

Entry parse_entry(JsonReader& r, const std::string& key, const std::string& path) {
  Entry e;
  e.name = key;
  const size_t entry_pos = r.pos();
  if (!r.at('{'))
    r.fail(concat("member ", excerpt(key), " is neither \"__metadata__\" nor a tensor ({\"dtype\", \"shape\", "
                  "\"data_offsets\"}): expected '{' but ", r.found()));
  bool has_shape = false, has_offsets = false;
  r.object([&](const std::string& field) {
    if (field == "dtype") {
      e.type = &file_dtype(r.string(), key, path);
    } else if (field == "shape") {
      e.shape = r.integers();
      has_shape = true;
    } else if (field == "data_offsets") {
      const std::vector<int64_t> o = r.integers(2);
      if (o.size() != 2) r.fail(concat("data_offsets of tensor ", excerpt(key), " must be [begin, end]"));
      e.begin = o[0];
      e.end = o[1];
      has_offsets = true;
    } else {
      r.skip_value(kMaxIgnoredDepth);  // the format may grow fields; the reference ignores them too
    }
  });
  HG_CHECK(e.type && has_shape && has_offsets, path, ": tensor ", excerpt(key), " (header byte ", entry_pos,
           ") lacks ", !e.type ? "\"dtype\"" : !has_shape ? "\"shape\"" : "\"data_offsets\"");
  return e;
}

// Repeats follow the reference reader: a tensor name or metadata key given twice keeps
// its last value; "__metadata__" twice, or a field twice within a tensor, is an error.
Header parse_header(std::string_view text, const std::string& path) {
  JsonReader r(text, path);
  Header h;
  bool has_metadata = false;
  std::map<std::string, size_t> index;  // tensor name -> its place in h.entries
  r.object(
      [&](const std::string& key) {
        if (key == "__metadata__") {
          if (has_metadata) r.fail("\"__metadata__\" appears twice");
          has_metadata = true;
          if (r.null()) return;  // the reference reads null as no metadata
          r.object(
              [&](const std::string& k) {
                if (!r.at('"')) r.fail(concat("metadata value of ", excerpt(k), " must be a string but ", r.found()));
                h.metadata[k] = r.string();
              },
              /*unique_keys=*/false);
          return;
        }
        Entry e = parse_entry(r, key, path);
        if (auto [it, added] = index.emplace(key, h.entries.size()); !added) h.entries[it->second] = std::move(e);
        else h.entries.push_back(std::move(e));
      },
      /*unique_keys=*/false);
  r.expect_end();
  return h;
}

// Ties every entry to the data section: sizes agree with shapes and the byte ranges
// tile [0, data_size) with no gap or overlap. Nothing is allocated here.
void check_entries(std::vector<Entry>& entries, int64_t data_size, const std::string& path) {
  for (const Entry& e : entries) {
    // Zero sizes count as 1 here, as in check_shape: [0, 2^40, 2^40] holds no bytes but
    // has strides past int64, so it is refused whatever the order of its sizes. The
    // tensor made is i64 for widened integers: its 8 bytes an element must not overflow.
    int64_t nbytes = e.type->bytes, elements = 1, made = static_cast<int64_t>(dtype_size(e.type->dtype));
    for (int64_t d : e.shape) {
      HG_CHECK(d >= 0, path, ": tensor ", excerpt(e.name), " has a negative size in its shape ", shape_text(e.shape));
      HG_CHECK(!__builtin_mul_overflow(nbytes, std::max<int64_t>(d, 1), &nbytes) &&
                   !__builtin_mul_overflow(made, std::max<int64_t>(d, 1), &made),
               path, ": tensor ", excerpt(e.name), " of shape ", shape_text(e.shape),
               " would overflow a 64-bit byte count");
      elements *= d;
    }
    if (elements == 0) nbytes = 0;
    HG_CHECK(e.begin >= 0 && e.begin <= e.end, path, ": tensor ", excerpt(e.name), " has data_offsets [", e.begin,
             ", ", e.end, "], not 0 <= begin <= end");
    HG_CHECK(e.end - e.begin == nbytes, path, ": tensor ", excerpt(e.name), " is ", e.type->name, " of shape ",
             shape_text(e.shape), " (", nbytes, " bytes) but its data_offsets [", e.begin, ", ", e.end, "] span ",
             e.end - e.begin, " bytes");
    HG_CHECK(e.end <= data_size, path, ": tensor ", excerpt(e.name), " has data_offsets [", e.begin, ", ", e.end,
             "] past the end of the ", data_size, "-byte data section (the file is truncated or the header wrong)");
  }
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return std::tie(a.begin, a.end) < std::tie(b.begin, b.end); });
  int64_t covered = 0;
  const Entry* prev = nullptr;
  for (const Entry& e : entries) {
    HG_CHECK(e.begin >= covered, path, ": tensors ", excerpt(prev ? prev->name : ""), " and ", excerpt(e.name),
             " overlap in the data section (", covered, " > ", e.begin, ")");
    HG_CHECK(e.begin == covered, path, ": the data section has unclaimed bytes ", covered, "..", e.begin,
             " before tensor ", excerpt(e.name));
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

// Turns n little-endian integers of type.bytes each, packed at the start of data, into
// n int64s, last first: writing element i's 8 bytes at 8i never reaches the sources of
// the elements below it (they end by i * bytes), which are still to be read.
void widen_in_place(void* data, size_t n, const FileDType& type) {
  auto* bytes = static_cast<unsigned char*>(data);
  for (size_t i = n; i-- > 0;) {
    uint64_t v = 0;
    std::memcpy(&v, bytes + i * type.bytes, type.bytes);
    const unsigned shift = 64 - 8 * type.bytes;
    const int64_t x = type.widen == Widen::signed_int ? static_cast<int64_t>(v << shift) >> shift
                                                      : static_cast<int64_t>(v);
    std::memcpy(bytes + i * 8, &x, 8);
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
    Tensor t = empty(e.shape, {e.type->dtype, Device::cpu()});
    const auto nbytes = static_cast<size_t>(e.end - e.begin);
    if (nbytes > 0) read_at(fd, t.data_ptr(), nbytes, data_start + static_cast<uint64_t>(e.begin), path);
    if (e.type->dtype == b8) {
      // The reference reads any nonzero byte as true; stored as is, a byte other than 0
      // or 1 would not be a C++ bool, so it becomes 1.
      auto* bytes = static_cast<unsigned char*>(t.data_ptr());
      for (size_t i = 0; i < nbytes; ++i) bytes[i] = bytes[i] != 0;
    }
    if (e.type->widen != Widen::none) widen_in_place(t.data_ptr(), nbytes / e.type->bytes, *e.type);
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
    HG_CHECK(valid_utf8(name), path, ": tensor name ", excerpt(name), " is not valid UTF-8");
    HG_CHECK(t.defined(), path, ": tensor ", excerpt(name), " is undefined");
    host.emplace_back(name, t.detach().to(Device::cpu()).contiguous());
  }
  for (const auto& [k, v] : metadata)
    HG_CHECK(valid_utf8(k) && valid_utf8(v), path, ": metadata entry ", excerpt(k), " is not valid UTF-8");
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
