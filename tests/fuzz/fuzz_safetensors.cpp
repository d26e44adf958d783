// safetensors byte strings: valid files written by the library (read back bitwise),
// truncated ones, corrupted headers and length prefixes, hand-written headers declaring
// absurd sizes or overlapping/gapped offsets, deep nesting, invalid UTF-8, BOOL bytes and
// narrow integers (read as i64).
// Each load returns the right tensors or raises hg::Error, and no declared-but-absurd
// size reaches the allocator (its peak is checked against the file's size).
#include <stdlib.h>

#include <bit>
#include <filesystem>
#include <fstream>

#include "tests/fuzz/fuzz.h"

namespace hg::fuzz {
namespace {

const std::string& scratch_file() {
  static const std::string path = [] {
    char dir[] = "/tmp/hg_fuzz_XXXXXX";
    if (!mkdtemp(dir)) throw std::runtime_error("cannot create a temporary folder");
    static const std::string keep = dir;
    std::atexit([] { std::filesystem::remove_all(keep); });
    return keep + "/case.safetensors";
  }();
  return path;
}

void write_bytes(const std::string& bytes) {
  std::ofstream f(scratch_file(), std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string read_bytes() {
  std::ifstream f(scratch_file(), std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

std::string with_length(uint64_t length, const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>(length >> (8 * i));
  return out + header + data;
}

std::string file_of(const std::string& header, const std::string& data) { return with_length(header.size(), header, data); }

std::string random_name(Rng& rng) {
  static const std::vector<std::string> pieces = {"a", "w", ".", "_", "0", "9", "\"", "\\", "/", " ", "\xc3\xa9",
                                                  "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\n", "\x01", "layer", "__metadata"};
  std::string s;
  for (int64_t k = rng.uniform(1, 5); k > 0; --k) s += rng.pick(pieces);
  return s;
}

Tensor random_any(Rng& rng) {
  static const std::vector<DType> types = {f64, f32, f16, bf16, i64, b8};
  Shape shape;
  for (int64_t d = rng.uniform(0, 3); d > 0; --d) shape.push_back(rng.chance(0.1) ? 0 : rng.uniform(1, 4));
  const DType dt = rng.pick(types);
  if (dt == i64 || dt == b8) {
    std::vector<double> v(static_cast<size_t>(numel_of(shape)));
    for (double& x : v) x = dt == b8 ? static_cast<double>(rng.uniform(0, 1)) : static_cast<double>(rng.uniform(-1000, 1000));
    return from_vector(v, shape, {dt});
  }
  return random_tensor(rng, shape, dt);
}

std::vector<uint64_t> bits_of(const Tensor& t) {
  std::vector<uint64_t> out;
  for (double v : t.to_vector<double>()) out.push_back(std::bit_cast<uint64_t>(v));
  return out;
}

// Integers narrower than I64 (I8 .. U32) are read as i64: at most 8 bytes a file byte.
constexpr int64_t kMaxWidening = 8;

// Loads the scratch file; on success and on refusal alike, the tensors allocated on the
// way must fit in the file, widened (a declared size never reaches the allocator unchecked).
SafetensorsFile load_checked(size_t file_size) {
  reset_peak_memory(Device::cpu());
  const int64_t base = memory_stats(Device::cpu()).in_use;
  auto check = [&] {
    const int64_t grew = memory_stats(Device::cpu()).peak - base;
    expect(grew <= kMaxWidening * static_cast<int64_t>(file_size) + 4096, "loading a ", file_size,
           "-byte file allocated ", grew, " bytes of tensors");
  };
  try {
    SafetensorsFile f = load_safetensors(scratch_file());
    check();
    return f;
  } catch (const Error&) {
    check();
    throw;
  }
}

// A valid file by the library's writer; returns its tensors for comparison.
StateDict write_valid(Rng& rng) {
  StateDict sd;
  for (int64_t k = rng.uniform(0, 4); k > 0; --k) sd[random_name(rng) + std::to_string(k)] = random_any(rng);
  sd.erase("__metadata__");
  std::map<std::string, std::string> meta;
  if (rng.chance(0.5)) meta[random_name(rng)] = random_name(rng);
  save_safetensors(scratch_file(), sd, meta);
  return sd;
}

// A header entry written by hand (so it can lie).
std::string entry(const std::string& name, const std::string& dtype, const std::string& shape, int64_t begin, int64_t end) {
  return detail::concat("\"", name, "\":{\"dtype\":\"", dtype, "\",\"shape\":", shape, ",\"data_offsets\":[", begin, ",",
                        end, "]}");
}

}  // namespace

void fuzz_safetensors(Rng& rng) {
  const int64_t kind = rng.uniform(0, 9);
  if (kind == 0) {  // valid: read back bitwise
    const StateDict sd = write_valid(rng);
    const SafetensorsFile f = must_succeed("a valid file", [&] { return load_checked(read_bytes().size()); });
    expect(f.tensors.size() == sd.size(), "valid file: ", f.tensors.size(), " tensors read, ", sd.size(), " written");
    for (const auto& [name, t] : sd) {
      expect(f.tensors.count(name) == 1, "valid file: tensor '", name, "' missing");
      const Tensor& got = f.tensors.at(name);
      expect(got.dtype() == t.dtype() && got.shape() == t.shape() && bits_of(got) == bits_of(t), "valid file: tensor '",
             name, "' differs");
    }
    return;
  }
  if (kind == 1) {  // truncated anywhere: always invalid (the data must tile the rest exactly)
    write_valid(rng);
    std::string bytes = read_bytes();
    bytes.resize(static_cast<size_t>(rng.uniform(0, static_cast<int64_t>(bytes.size()) - 1)));
    write_bytes(bytes);
    must_fail("a truncated file", [&] { load_checked(bytes.size()); });
  }
  if (kind == 2 || kind == 3) {  // corrupted header bytes or length prefix: refused or read consistently
    write_valid(rng);
    std::string bytes = read_bytes();
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; --i) hlen = (hlen << 8) | static_cast<unsigned char>(bytes[static_cast<size_t>(i)]);
    if (kind == 2) {
      for (int64_t k = rng.uniform(1, 3); k > 0; --k)
        bytes[static_cast<size_t>(8 + rng.uniform(0, static_cast<int64_t>(hlen) - 1))] = static_cast<char>(rng.uniform(0, 255));
    } else {
      const uint64_t fake = rng.pick(std::vector<uint64_t>{0, 1, hlen - 1, hlen + 1, bytes.size(), 100'000'001,
                                                           uint64_t{1} << 63, ~uint64_t{0}, rng.bits()});
      bytes = with_length(fake, bytes.substr(8), "");
    }
    write_bytes(bytes);
    const SafetensorsFile f = load_checked(bytes.size());
    int64_t total = 0;
    for (const auto& [name, t] : f.tensors) total += t.numel() * static_cast<int64_t>(dtype_size(t.dtype()));
    expect(total <= kMaxWidening * static_cast<int64_t>(bytes.size()), "a corrupted file was read as ", total,
           " bytes of tensors from ", bytes.size(), " bytes");
    return;
  }
  if (kind == 4) {  // absurd declared sizes: refused before any allocation of them
    const std::vector<std::string> shapes = {"[1099511627776,1073741824]", "[4611686018427387904]", "[9223372036854775807,2]",
                                             "[-1]", "[100000000000]", "[3,-4]", "[18446744073709551616]"};
    const std::string shape = rng.pick(shapes);
    const int64_t end = rng.pick(std::vector<int64_t>{0, 8, 400000000000, std::numeric_limits<int64_t>::max(), 0});
    const std::string bytes = file_of(detail::concat("{", entry("big", rng.pick(std::vector<std::string>{"F32", "F64", "BOOL"}), shape, 0, end), "}"),
                                      std::string(static_cast<size_t>(rng.uniform(0, 16)), '\0'));
    write_bytes(bytes);
    must_fail("a header declaring shape " + shape, [&] { load_checked(bytes.size()); });
  }
  if (kind == 5) {  // overlapping, gapped or out-of-order offsets
    const int64_t a0 = 0, a1 = 8, b0 = rng.pick(std::vector<int64_t>{0, 4, 7, 12, -8}), b1 = b0 + 8;
    const std::string data(static_cast<size_t>(std::max<int64_t>(b1, a1)), '\x01');
    const std::string bytes = file_of(detail::concat("{", entry("a", "F32", "[2]", a0, a1), ",", entry("b", "F32", "[2]", b0, b1), "}"), data);
    write_bytes(bytes);
    must_fail(detail::concat("tensors at [0, 8) and [", b0, ", ", b1, ")"), [&] { load_checked(bytes.size()); });
  }
  if (kind == 6) {  // deep nesting: an error, not a stack overflow
    const int64_t depth = rng.uniform(100, 100000);
    const std::string open = rng.chance(0.5) ? "[" : "{\"a\":";
    std::string header;
    for (int64_t i = 0; i < depth; ++i) header += open;
    const std::string bytes = file_of(header, "");
    write_bytes(bytes);
    must_fail(detail::concat("a header nested ", depth, " deep"), [&] { load_checked(bytes.size()); });
  }
  if (kind == 7) {  // random bytes after a plausible length
    std::string header(static_cast<size_t>(rng.uniform(0, 64)), '\0');
    for (char& c : header) c = static_cast<char>(rng.uniform(0, 255));
    header[0] = '{';
    const std::string bytes = file_of(header, std::string(static_cast<size_t>(rng.uniform(0, 8)), 'x'));
    write_bytes(bytes);
    load_checked(bytes.size());
    return;
  }
  if (kind == 8) {  // BOOL bytes other than 0 and 1 (true, as the reference reads them), or a name that is not UTF-8
    const int64_t pick = rng.uniform(0, 2);
    if (pick == 2) {  // a narrow integer type: each value exactly, as i64
      struct Narrow { const char* name; int bytes; bool is_signed; };
      const Narrow n = rng.pick(std::vector<Narrow>{{"I8", 1, true}, {"U8", 1, false}, {"I16", 2, true},
                                                    {"U16", 2, false}, {"I32", 4, true}, {"U32", 4, false}});
      const int64_t count = rng.uniform(0, 9);
      std::string data;
      std::vector<double> want;
      for (int64_t i = 0; i < count; ++i) {
        const uint64_t bits = rng.bits() & (~uint64_t{0} >> (64 - 8 * n.bytes));
        for (int k = 0; k < n.bytes; ++k) data += static_cast<char>(bits >> (8 * k));
        const uint64_t sign = uint64_t{1} << (8 * n.bytes - 1);
        want.push_back(n.is_signed && (bits & sign) ? static_cast<double>(bits) - 2.0 * static_cast<double>(sign)
                                                    : static_cast<double>(bits));
      }
      write_bytes(file_of(detail::concat("{", entry("n", n.name, detail::concat("[", count, "]"), 0, count * n.bytes), "}"), data));
      const SafetensorsFile f = must_succeed(detail::concat("an ", n.name, " tensor"), [&] { return load_checked(read_bytes().size()); });
      const Tensor& t = f.tensors.at("n");
      expect(t.dtype() == i64 && t.to_vector<double>() == want, n.name, " values were not read exactly as i64");
    } else if (pick == 1) {
      const auto b = static_cast<char>(rng.uniform(2, 255));
      write_bytes(file_of(detail::concat("{", entry("m", "BOOL", "[2]", 0, 2), "}"), std::string{'\x01', b}));
      const SafetensorsFile f = must_succeed("BOOL bytes 1 and 2..255", [&] { return load_checked(read_bytes().size()); });
      expect(f.tensors.at("m").to_vector<double>() == std::vector<double>{1, 1}, "a BOOL byte above 1 is not true");
    } else {
      const std::string bytes = file_of(detail::concat("{", entry("\xc3\x28", "F32", "[]", 0, 4), "}"), std::string(4, '\0'));
      write_bytes(bytes);
      must_fail("a name with invalid UTF-8", [&] { load_checked(bytes.size()); });
    }
  }
  // A safetensors file that is not a halfgrad checkpoint.
  write_valid(rng);
  must_fail("a plain safetensors file read as a checkpoint", [&] { load_checkpoint(scratch_file()); });
}

}  // namespace hg::fuzz
