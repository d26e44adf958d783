// safetensors files: bit-exact round trips, the byte layout against hand-built bytes,
// atomic writes, hostile and truncated files, and interchange with Python's reference.
#include <catch2/catch.hpp>
#include <stdlib.h>
#include <sys/stat.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "halfgrad.h"
#include "tests/temp_dir.h"
#include "tests/skip.h"
#include "tests/python_check.h"

using namespace hg;
using hg::test::TempDir;
namespace fs = std::filesystem;

namespace {

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A file assembled by hand: 8-byte little-endian header length, header, data.
std::string raw_file(const std::string& header, const std::string& data = "") {
  std::string len(8, '\0');
  for (int i = 0; i < 8; ++i) len[i] = static_cast<char>(uint64_t{header.size()} >> (8 * i));
  return len + header + data;
}

// A CPU tensor holding exactly these bit patterns, no conversion on the way in.
template <class Bits>
Tensor with_bits(const std::vector<Bits>& bits, const Shape& shape, DType dtype) {
  REQUIRE(dtype_size(dtype) == sizeof(Bits));
  Tensor t = empty(shape, {dtype});
  if (!bits.empty()) std::memcpy(t.data_ptr(), bits.data(), bits.size() * sizeof(Bits));
  return t;
}

std::string raw_bytes(const Tensor& t) {
  Tensor c = t.contiguous();
  return {static_cast<const char*>(c.data_ptr()), static_cast<size_t>(c.numel()) * dtype_size(c.dtype())};
}

}  // namespace

TEST_CASE("every dtype round-trips bit for bit, with NaN, inf, subnormals, 0-d and empty tensors", "[safetensors]") {
  TempDir dir;
  StateDict sd;
  sd["f16"] = with_bits<uint16_t>({0x0000, 0x8000, 0x0001, 0x03ff, 0x0400, 0x7bff, 0x7c00, 0xfc00, 0x7e00, 0x7d01,
                                   0x3c00, 0xbc00}, {3, 4}, f16);
  sd["bf16"] = with_bits<uint16_t>({0x0000, 0x8000, 0x0001, 0x007f, 0x7f80, 0xff80, 0x7fc0, 0x7f81, 0x3f80, 0xc2f7},
                                   {10}, bf16);
  sd["f32"] = with_bits<uint32_t>({0x00000001, 0x80000000, 0x7f800000, 0x7fc00001, 0x3f800000, 0x7f7fffff}, {2, 3}, f32);
  sd["f64"] = with_bits<uint64_t>({0x1, 0x8000000000000000, 0x7ff0000000000000, 0x7ff0000000000001,
                                   0x3fd5555555555555}, {5, 1}, f64);
  sd["i64"] = with_bits<int64_t>({INT64_MIN, -1, 0, INT64_MAX}, {2, 2}, i64);
  sd["bool"] = with_bits<uint8_t>({1, 0, 1}, {3}, b8);
  sd["scalar"] = with_bits<uint32_t>({0x40200000}, {}, f32);
  sd["empty"] = empty({0, 3}, {f16});
  sd["empty_bool"] = empty({0}, {b8});
  const std::map<std::string, std::string> meta = {
      {"quote\"back\\slash", "line\nbreak\ttab\x01"}, {"unicode", "\xc3\xa9\xe6\xbc\xa2\xf0\x9f\x98\x80"}, {"", ""}};
  save_safetensors(dir / "all.safetensors", sd, meta);

  SafetensorsFile f = load_safetensors(dir / "all.safetensors");
  CHECK(f.metadata == meta);
  REQUIRE(f.tensors.size() == sd.size());
  for (const auto& [name, t] : sd) {
    INFO(name);
    REQUIRE(f.tensors.count(name));
    const Tensor& got = f.tensors.at(name);
    CHECK(got.dtype() == t.dtype());
    CHECK(got.shape() == t.shape());
    CHECK(got.device() == Device::cpu());
    CHECK(raw_bytes(got) == raw_bytes(t));
  }
  CHECK(dir.listing() == std::vector<std::string>{"all.safetensors"});
}

TEST_CASE("hg::save and hg::load are the short names for files without metadata", "[safetensors]") {
  TempDir dir;
  save(dir / "w.safetensors", {{"w", tensor({1.5, -2.0})}});
  StateDict sd = load((dir / "w.safetensors").c_str());
  CHECK(sd.at("w").to_vector<double>() == std::vector<double>{1.5, -2.0});
  CHECK(load_safetensors(dir / "w.safetensors").metadata.empty());
}

TEST_CASE("hg::load of a std::filesystem::path reads the file", "[safetensors]") {
  TempDir dir;
  const std::filesystem::path path = std::filesystem::path(dir.path) / "p.safetensors";
  save(path, {{"w", tensor({0.5, 3.0})}});
  // It used to bind to dtype.h's element load<T>(T) and hand the path back.
  static_assert(std::is_same_v<decltype(load(path)), StateDict>);
  StateDict sd = load(path);
  REQUIRE(sd.count("w") == 1);
  CHECK(sd.at("w").to_vector<double>() == std::vector<double>{0.5, 3.0});
}

TEST_CASE("views are written as their values: transposed, strided, offset, expanded", "[safetensors]") {
  TempDir dir;
  Tensor base = arange(0, 12, 1, {f32}).view({3, 4});  // base[i][j] = 4i + j
  save(dir / "v.safetensors", {{"t", base.transpose(0, 1)},
                               {"s", base.slice(1, 1, 4, 2)},
                               {"row", base.select(0, 2)},
                               {"x", tensor({7.0}, {f64}).expand({2, 3})}});
  StateDict sd = load(dir / "v.safetensors");
  CHECK(sd.at("t").shape() == Shape{4, 3});
  CHECK(sd.at("t").to_vector<double>() == std::vector<double>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11});
  CHECK(sd.at("s").shape() == Shape{3, 2});
  CHECK(sd.at("s").to_vector<double>() == std::vector<double>{1, 3, 5, 7, 9, 11});
  CHECK(sd.at("row").to_vector<double>() == std::vector<double>{8, 9, 10, 11});
  CHECK(sd.at("x").to_vector<double>() == std::vector<double>(6, 7.0));
  CHECK(sd.at("x").dtype() == f64);
}

TEST_CASE("a tiny file matches the format byte for byte", "[safetensors]") {
  TempDir dir;
  save_safetensors(dir / "tiny.safetensors",
                   {{"b", with_bits<uint8_t>({1}, {}, b8)},
                    {"a", with_bits<uint16_t>({0x3c00, 0xc000}, {2}, f16)},
                    {"c", with_bits<uint32_t>({0x3f000000}, {1}, f32)}},
                   {{"k", "v"}});
  // Widest dtype first keeps each tensor aligned; the header is padded with spaces to 8n.
  const std::string header =
      "{\"__metadata__\":{\"k\":\"v\"},"
      "\"c\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
      "\"a\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[4,8]},"
      "\"b\":{\"dtype\":\"BOOL\",\"shape\":[],\"data_offsets\":[8,9]}}       ";
  const std::string expected = std::string("\xc0\0\0\0\0\0\0\0", 8) + header +
                               std::string("\x00\x00\x00\x3f" "\x00\x3c\x00\xc0" "\x01", 9);
  CHECK(read_bytes(dir / "tiny.safetensors") == expected);
}

TEST_CASE("a failed save leaves the previous file intact and no temporary file behind", "[safetensors][atomic]") {
  TempDir dir;
  const std::string path = dir / "model.safetensors";
  save(path, {{"w", tensor({1.0, 2.0})}});
  const std::string before = read_bytes(path);

  CHECK_THROWS_WITH(save(path, {{"w", tensor({3.0})}, {"bad", Tensor()}}), Catch::Contains("'bad' is undefined"));
  CHECK_THROWS_WITH(save(path, {{"__metadata__", tensor({3.0})}}), Catch::Contains("reserved"));
  CHECK_THROWS_WITH(save(path, {{"bad\xff", tensor({3.0})}}), Catch::Contains("not valid UTF-8"));
  CHECK(read_bytes(path) == before);

  // A path with no file to replace is refused before any temporary is made.
  REQUIRE(fs::create_directory(dir / "taken"));
  CHECK_THROWS_WITH(save(dir / "taken", {{"w", tensor({3.0})}}),
                    Catch::Contains(dir / "taken") && Catch::Contains("is a directory, not a file"));
  CHECK_THROWS_WITH(save(dir / "taken/", {{"w", tensor({3.0})}}), Catch::Contains("names a directory"));
  CHECK_THROWS_WITH(save(dir / "taken/..", {{"w", tensor({3.0})}}), Catch::Contains("names a directory"));
  CHECK_THROWS_WITH(save("", {{"w", tensor({3.0})}}), Catch::Contains("cannot write a file at an empty path"));
  CHECK(fs::is_empty(dir / "taken"));
  CHECK_THROWS_WITH(save(dir / "missing/model.safetensors", {{"w", tensor({3.0})}}),
                    Catch::Contains("cannot create the temporary file"));
  CHECK(dir.listing() == std::vector<std::string>{"model.safetensors", "taken"});
  CHECK(read_bytes(path) == before);

  save(path, {{"w", tensor({4.0})}});
  CHECK(load(path).at("w").to_vector<double>() == std::vector<double>{4.0});
  CHECK(dir.listing() == std::vector<std::string>{"model.safetensors", "taken"});
}

TEST_CASE("a file cut at any byte is an hg::Error naming what is missing", "[safetensors][corrupt]") {
  TempDir dir;
  const std::string good = dir / "good.safetensors", cut = dir / "cut.safetensors";
  save(good, {{"a", with_bits<uint16_t>({0x3c00, 0x7c00, 0x0001}, {3}, f16)}, {"b", tensor({1.0}, {f64})}});
  const std::string bytes = read_bytes(good);
  const size_t data_start = 8 + static_cast<size_t>(static_cast<unsigned char>(bytes[0]));
  REQUIRE(bytes[1] == 0);
  for (size_t n = 0; n < bytes.size(); ++n) {
    write_bytes(cut, bytes.substr(0, n));
    const char* why = n < 8 ? "shorter than the 8-byte header length" : n < data_start ? "exceeds the" : "truncated";
    CHECK_THROWS_WITH(load(cut), Catch::Contains(cut) && Catch::Contains(why));
  }
  CHECK(load(good).size() == 2);
}

TEST_CASE("header lengths that lie are rejected before anything is allocated", "[safetensors][corrupt]") {
  TempDir dir;
  const std::string path = dir / "f.safetensors";
  const std::string header = "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}";
  std::string bytes = raw_file(header, std::string(4, '\0'));
  bytes[5] = 1;  // 2^40 + length
  write_bytes(path, bytes);
  CHECK_THROWS_WITH(load(path), Catch::Contains("absurd"));
  bytes[5] = 0;
  bytes[1] = 1;  // 256 + length: past the end of this small file
  write_bytes(path, bytes);
  CHECK_THROWS_WITH(load(path), Catch::Contains("exceeds the"));
  bytes[1] = 0;
  bytes[0] = static_cast<char>(header.size() - 3);  // cuts into the JSON
  write_bytes(path, bytes);
  CHECK_THROWS_WITH(load(path), Catch::Contains("invalid JSON") && Catch::Contains("header ends"));
}

TEST_CASE("malformed JSON headers are rejected naming the byte at fault", "[safetensors][corrupt]") {
  TempDir dir;
  const std::string path = dir / "f.safetensors";
  const std::string ok = "\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"garbage", "at byte 0: expected '{' but found 'g'"},
      {"", "at byte 0: expected '{' but the header ends"},
      {"{\"a\":{" + ok + "}", "expected '}' but the header ends"},
      {"{\"a\" {" + ok + "}}", "at byte 5: expected ':'"},
      {"{\"a", "unterminated string"},
      {"{\"\\q\":{" + ok + "}}", "at byte 3: invalid escape"},
      {"{\"\\ud800x\":{" + ok + "}}", "unpaired high surrogate"},
      {"{\"\\udc00\":{" + ok + "}}", "unpaired low surrogate"},
      {"{\"\\u12g4\":{" + ok + "}}", "invalid hex digit"},
      {"{\"\xff\":{" + ok + "}}", "at byte 2: invalid UTF-8"},
      {"{\"\xc0\x80\":{" + ok + "}}", "invalid UTF-8"},  // overlong NUL
      {"{\"a\nb\":{" + ok + "}}", "control character"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", "fraction or exponent"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[01],\"data_offsets\":[0,4]}}", "leading zero"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[99999999999999999999],\"data_offsets\":[0,4]}}", "64-bit range"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", "longer than 2"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4]}}", "must be [begin, end]"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":" + std::string(100000, '[') + "}}", "expected an integer but found '['"},
      {"{\"a\":" + std::string(100000, '{') + "}}", "expected '\"' but found '{'"},
      {"{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", "lacks \"shape\""},
      {"{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\"}}", "duplicate key 'dtype'"},
      {"{\"a\":{" + ok + "},}", "expected '\"' but found '}'"},
      {"{\"__metadata__\":{\"k\":1},\"a\":{" + ok + "}}", "metadata value of 'k' must be a string but found '1'"},
      {"{\"__metadata__\":{\"k\":null},\"a\":{" + ok + "}}", "metadata value of 'k' must be a string"},
      {"{\"__metadata__\":\"x\",\"a\":{" + ok + "}}", "expected '{' but found '\"'"},
      {"{\"__metadata__\":{},\"__metadata__\":{},\"a\":{" + ok + "}}", "\"__metadata__\" appears twice"},
      {"{\"foo\":\"bar\",\"a\":{" + ok + "}}", "member 'foo' is neither \"__metadata__\" nor a tensor"},
      // Fields a tensor's entry does not know are skipped, but must be valid JSON.
      {"{\"a\":{" + ok + ",\"x\":01}}", "number with a leading zero"},
      {"{\"a\":{" + ok + ",\"x\":[1,]}}", "expected a value but found ']'"},
      {"{\"a\":{" + ok + ",\"x\":tru}}", "expected true, false or null"},
      {"{\"a\":{" + ok + ",\"x\":1.}}", "invalid number"},
      {"{\"a\":{" + ok + ",\"x\":{\"k\" 1}}}", "expected ':'"},
      {"{\"a\":{" + ok + ",\"x\":" + std::string(126, '[') + std::string(126, ']') + "}}", "nested deeper than 125"},
      {"{\"a\":{" + ok + "}} x", "expected the end of the header but found 'x'"},
      {"{\"a\":{" + ok + std::string("}}\0", 3), "found byte 0x00"},
  };
  for (const auto& [header, message] : cases) {
    INFO(header.substr(0, 80));
    write_bytes(path, raw_file(header, std::string(4, '\0')));
    CHECK_THROWS_WITH(load(path), Catch::Contains(path) && Catch::Contains(message));
  }
}

TEST_CASE("headers that disagree with the data are rejected", "[safetensors][corrupt]") {
  TempDir dir;
  const std::string path = dir / "f.safetensors";
  auto entry = [](const std::string& name, const std::string& dtype, const std::string& shape, int64_t b, int64_t e) {
    return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape + ",\"data_offsets\":[" +
           std::to_string(b) + "," + std::to_string(e) + "]}";
  };
  const std::string z4(4, '\0');
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {entry("a", "F33", "[1]", 0, 4), z4, "dtype 'F33', which halfgrad does not read (it reads F64, F32"},
      {entry("a", "U64", "[1]", 0, 8), std::string(8, '\0'), "dtype 'U64'"},
      {entry("a", "F8_E4M3", "[1]", 0, 1), std::string(1, '\0'), "dtype 'F8_E4M3'"},
      {entry("a", "I32", "[2]", 0, 4), z4, "is I32 of shape [2] (8 bytes) but its data_offsets [0, 4] span 4 bytes"},
      // A repeated name keeps its last entry (as the reference): the first one's bytes are then unclaimed.
      {entry("a", "F32", "[1]", 0, 4) + "," + entry("a", "F32", "[1]", 4, 8), std::string(8, '\0'), "unclaimed bytes 0..4"},
      {entry("a", "F32", "[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,-1]", 0, 4), z4, "negative size in its shape [1, 1, 1, 1, 1, 1, 1, 1, ...] (18 sizes)"},
      {entry("a", "F32", "[2]", 0, 4), z4, "(8 bytes) but its data_offsets [0, 4] span 4 bytes"},
      {entry("a", "F32", "[2]", 0, 8) + "," + entry("b", "F32", "[2]", 4, 12), std::string(12, '\0'), "overlap"},
      {entry("a", "F32", "[1]", 0, 4) + "," + entry("b", "F32", "[1]", 8, 12), std::string(12, '\0'), "unclaimed bytes 4..8"},
      {entry("a", "F32", "[1]", 0, 4), std::string(8, '\0'), "trailing bytes"},
      {entry("a", "F32", "[1000000000000]", 0, 4000000000000), z4, "past the end of the 4-byte data section"},
      {entry("a", "F32", "[4611686018427387904,4]", 0, 4), z4, "overflow a 64-bit byte count"},
      {entry("a", "F32", "[-1]", 0, 4), z4, "negative size in its shape [-1]"},
      {entry("a", "F32", "[0]", 4, 0), z4, "not 0 <= begin <= end"},
  };
  for (const auto& [members, data, message] : cases) {
    INFO(members);
    write_bytes(path, raw_file("{" + members + "}", data));
    CHECK_THROWS_WITH(load(path), Catch::Contains(path) && Catch::Contains(message));
  }
  CHECK_THROWS_WITH(load(dir.path), Catch::Contains("not a regular file"));
  CHECK_THROWS_WITH(load(dir / "absent"), Catch::Contains("cannot open"));
}

TEST_CASE("a hand-written header with escapes, whitespace and metadata last loads", "[safetensors]") {
  TempDir dir;
  const std::string path = dir / "f.safetensors";
  const std::string header =
      " {\n \"w\\u00e9ight\\ud83d\\ude00\" : { \"shape\" : [ 2 ] ,\t\"dtype\" : \"F32\", \"data_offsets\" : [0, 8] }"
      " , \"__metadata__\": {\"note\": \"a\\\"b\\\\c\\nd\\/\"} }   ";
  write_bytes(path, raw_file(header, std::string("\x00\x00\xc0\x3f" "\x00\x00\x00\xc0", 8)));
  SafetensorsFile f = load_safetensors(path);
  CHECK(f.metadata == std::map<std::string, std::string>{{"note", "a\"b\\c\nd/"}});
  REQUIRE(f.tensors.size() == 1);
  const Tensor& w = f.tensors.at("w\xc3\xa9ight\xf0\x9f\x98\x80");
  CHECK(w.dtype() == f32);
  CHECK(w.to_vector<double>() == std::vector<double>{1.5, -2.0});
  write_bytes(path, raw_file("{}"));
  CHECK(load(path).empty());
}

TEST_CASE("files interchange with Python's reference safetensors package", "[safetensors][python]") {
  HG_REQUIRE_PYTHON_SAFETENSORS();
  const fs::path script = test::safetensors_check_script();
  REQUIRE(fs::exists(script));
  TempDir dir;
  // The script recomputes every value below from the same formulas.
  std::vector<double> k6 = {0, 1, 2, 3, 4, 5};
  auto scaled = [&](double a, double b) {
    std::vector<double> v;
    for (double k : k6) v.push_back(k * a + b);
    return v;
  };
  StateDict sd;
  sd["f64"] = from_vector(scaled(0.25, 0), {2, 3}, {f64});
  sd["f32"] = from_vector(scaled(0.25, -1), {3, 2}, {f32});
  sd["f16"] = from_vector(scaled(0.5, 0), {6}, {f16});
  sd["bf16"] = from_vector({0.5, 1.5, 2.5, 3.5}, {2, 2}, {bf16});
  sd["i64"] = from_data<int64_t>({-2000000000000, -1000000000000, 0, 1000000000000, 2000000000000}, {5}, {i64});
  sd["bool"] = with_bits<uint8_t>({1, 0, 0, 1, 0, 0}, {2, 3}, b8);
  sd["scalar"] = scalar_tensor(3.25);
  sd["empty"] = empty({0, 4});
  save_safetensors(dir / "from_cpp.safetensors", sd, {{"producer", "halfgrad"}, {"note", "\xc3\xa9"}});

  const std::string log = dir / "log.txt";
  const int rc = std::system(("python3 '" + script.string() + "' '" + dir.path + "' >'" + log + "' 2>&1").c_str());
  INFO(read_bytes(log));
  REQUIRE(rc == 0);
  SafetensorsFile f = load_safetensors(dir / "from_python.safetensors");
  CHECK(f.metadata == std::map<std::string, std::string>{{"writer", "python"}});
  CHECK(f.tensors.size() == 7);
  CHECK(f.tensors.at("f64").shape() == Shape{2, 3});
  CHECK(f.tensors.at("f64").to_vector<double>() == scaled(0.125, 0));
  CHECK(f.tensors.at("f32").to_vector<double>() == std::vector<double>{0, -0.75, -1.5, -2.25});
  CHECK(f.tensors.at("f16").to_vector<double>() == std::vector<double>{0, 0.25, 0.5, 0.75, 1.0});
  CHECK(f.tensors.at("i64").to_vector<double>() == std::vector<double>{0, 1099511627776, 2199023255552});
  CHECK(f.tensors.at("bool").to_vector<double>() == std::vector<double>{0, 1, 0, 1});
  CHECK(f.tensors.at("scalar").dim() == 0);
  CHECK(f.tensors.at("scalar").item<double>() == 7.0);
  CHECK(f.tensors.at("empty").shape() == Shape{0, 2});
  CHECK(f.tensors.at("empty").dtype() == f64);
}
