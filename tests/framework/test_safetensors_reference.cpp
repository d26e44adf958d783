// Hand-built safetensors files at the edges of the format (issue 29, item 8): what the
// reference parser reads loads here too, what it refuses is refused, and where halfgrad
// chooses otherwise (dtypes it has no type for) the message says so. With Python's
// safetensors package installed, its verdict on each file is checked as well.
#include <catch2/catch.hpp>
#include <stdlib.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <sstream>

#include "halfgrad.h"
#include "tests/skip.h"
#include "tests/temp_dir.h"
#include "tests/python_check.h"

using namespace hg;
using hg::test::TempDir;
namespace fs = std::filesystem;

namespace {

std::string raw_file(const std::string& header, const std::string& data = "") {
  std::string len(8, '\0');
  for (int i = 0; i < 8; ++i) len[i] = static_cast<char>(uint64_t{header.size()} >> (8 * i));
  return len + header + data;
}

std::string entry(const std::string& name, const std::string& dtype, const std::string& shape, int64_t b, int64_t e,
                  const std::string& extra = "") {
  return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape + ",\"data_offsets\":[" +
         std::to_string(b) + "," + std::to_string(e) + "]" + extra + "}";
}

template <class T>
std::string le(std::initializer_list<T> values) {
  std::string out;
  for (T v : values) out.append(reinterpret_cast<const char*>(&v), sizeof v);
  return out;
}

std::string ones_shape(int rank) {
  std::string s = "[";
  for (int i = 0; i < rank; ++i) s += i ? ",1" : "1";
  return s + "]";
}

std::vector<int64_t> i64_values(const Tensor& t) {
  REQUIRE(t.dtype() == i64);
  const Tensor c = t.contiguous();
  return {c.data<int64_t>(), c.data<int64_t>() + c.numel()};
}

struct Case {
  std::string file;    // a name for messages and the Python verdicts
  std::string bytes;
  bool reference_reads;
  std::string refusal;  // empty: halfgrad reads it, and check() looks at what came back
  std::function<void(const SafetensorsFile&)> check = [](const SafetensorsFile&) {};
};

std::vector<Case> cases() {
  const std::string a = entry("a", "F32", "[1]", 0, 4), f = le<float>({1.5f});
  const std::string nested = ",\"x\":{\"y\":[1,2.5e3,-0.0,true,false,null,\"s\\u00e9\\n\",{}],\"y\":[],"
                             "\"big\":123456789012345678901234567890,\"e\":1E-7}";
  return {
      {"metadata_null", raw_file("{\"__metadata__\":null," + a + "}", f), true, "",
       [](const SafetensorsFile& s) {
         CHECK(s.metadata.empty());
         CHECK(s.tensors.at("a").item<double>() == 1.5);
       }},
      {"metadata_key_twice", raw_file("{\"__metadata__\":{\"k\":\"1\",\"j\":\"x\",\"k\":\"2\"}," + a + "}", f), true, "",
       [](const SafetensorsFile& s) {
         CHECK(s.metadata == std::map<std::string, std::string>{{"j", "x"}, {"k", "2"}});
       }},
      {"name_twice", raw_file("{" + entry("a", "F16", "[2]", 0, 4) + "," + a + "}", f), true, "",
       [](const SafetensorsFile& s) {
         REQUIRE(s.tensors.size() == 1);
         CHECK(s.tensors.at("a").dtype() == f32);  // the last entry
         CHECK(s.tensors.at("a").shape() == Shape{1});
       }},
      {"unknown_fields", raw_file("{" + entry("a", "F32", "[1]", 0, 4, nested) + "}", f), true, "",
       [](const SafetensorsFile& s) { CHECK(s.tensors.at("a").item<double>() == 1.5); }},
      {"unknown_field_125_deep",
       raw_file("{" + entry("a", "F32", "[1]", 0, 4, ",\"x\":" + std::string(125, '[') + std::string(125, ']')) + "}", f),
       true, ""},
      {"unknown_field_126_deep",
       raw_file("{" + entry("a", "F32", "[1]", 0, 4, ",\"x\":" + std::string(126, '[') + std::string(126, ']')) + "}", f),
       false, "nested deeper than 125"},
      {"bool_bytes", raw_file("{" + entry("m", "BOOL", "[5]", 0, 5) + "}", std::string("\x01\x02\x00\xff\x80", 5)), true,
       "",
       [](const SafetensorsFile& s) {
         const Tensor& m = s.tensors.at("m");
         CHECK(m.to_vector<double>() == std::vector<double>{1, 1, 0, 1, 1});
         CHECK(std::string(static_cast<const char*>(m.data_ptr()), 5) == std::string("\x01\x01\x00\x01\x01", 5));
       }},
      {"narrow_integers",
       raw_file("{" + entry("i32", "I32", "[3]", 0, 12) + "," + entry("u32", "U32", "[1]", 12, 16) + "," +
                    entry("i16", "I16", "[2]", 16, 20) + "," + entry("u16", "U16", "[1]", 20, 22) + "," +
                    entry("i8", "I8", "[2]", 22, 24) + "," + entry("u8", "U8", "[2,1]", 24, 26) + "}",
                le<int32_t>({-7, INT32_MAX, INT32_MIN}) + le<uint32_t>({UINT32_MAX}) + le<int16_t>({-32768, 32767}) +
                    le<uint16_t>({65535}) + le<int8_t>({-128, 127}) + le<uint8_t>({0, 255})),
       true, "",
       [](const SafetensorsFile& s) {
         CHECK(i64_values(s.tensors.at("i32")) == std::vector<int64_t>{-7, INT32_MAX, INT32_MIN});
         CHECK(i64_values(s.tensors.at("u32")) == std::vector<int64_t>{UINT32_MAX});
         CHECK(i64_values(s.tensors.at("i16")) == std::vector<int64_t>{-32768, 32767});
         CHECK(i64_values(s.tensors.at("u16")) == std::vector<int64_t>{65535});
         CHECK(i64_values(s.tensors.at("i8")) == std::vector<int64_t>{-128, 127});
         CHECK(i64_values(s.tensors.at("u8")) == std::vector<int64_t>{0, 255});
         CHECK(s.tensors.at("u8").shape() == Shape{2, 1});
       }},
      {"rank_65", raw_file("{" + entry("r", "F32", ones_shape(65), 0, 4) + "}", f), true, "",
       [](const SafetensorsFile& s) {
         CHECK(s.tensors.at("r").dim() == 65);
         CHECK(s.tensors.at("r").to_vector<double>() == std::vector<double>{1.5});
       }},
      {"rank_300_empty", raw_file("{" + entry("r", "F64", "[0," + ones_shape(299).substr(1), 0, 0) + "}"), true, "",
       [](const SafetensorsFile& s) { CHECK(s.tensors.at("r").dim() == 300); }},
      // Refused by both.
      {"metadata_value_null", raw_file("{\"__metadata__\":{\"k\":null}," + a + "}", f), false,
       "metadata value of 'k' must be a string"},
      {"metadata_twice", raw_file("{\"__metadata__\":{},\"__metadata__\":{}," + a + "}", f), false,
       "\"__metadata__\" appears twice"},
      {"unknown_member", raw_file("{\"format\":\"pt\"," + a + "}", f), false,
       "member 'format' is neither \"__metadata__\" nor a tensor"},
      {"field_twice", raw_file("{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", f),
       false, "duplicate key 'dtype'"},
      {"I32_size_mismatch", raw_file("{" + entry("a", "I32", "[2]", 0, 4) + "}", f), false,
       "is I32 of shape [2] (8 bytes)"},
      // The reference reads these; halfgrad has no type that holds them exactly.
      {"U64", raw_file("{" + entry("a", "U64", "[1]", 0, 8) + "}", le<uint64_t>({1})), true,
       "dtype 'U64', which halfgrad does not read"},
      {"F8_E5M2", raw_file("{" + entry("a", "F8_E5M2", "[1]", 0, 1) + "}", "\x01"), true,
       "dtype 'F8_E5M2', which halfgrad does not read"},
  };
}

}  // namespace

TEST_CASE("files at the edges of the format load or are refused as the reference parser does", "[safetensors]") {
  TempDir dir;
  for (const Case& c : cases()) {
    INFO(c.file);
    const std::string path = dir / (c.file + ".safetensors");
    std::ofstream(path, std::ios::binary) << c.bytes;
    if (c.refusal.empty()) {
      SafetensorsFile s;
      REQUIRE_NOTHROW(s = load_safetensors(path));
      c.check(s);
    } else {
      CHECK_THROWS_WITH(load_safetensors(path), Catch::Contains(path) && Catch::Contains(c.refusal));
    }
  }
}

TEST_CASE("the reference parser's verdicts on those files are the ones recorded", "[safetensors][python]") {
  HG_REQUIRE_PYTHON_SAFETENSORS();
  const fs::path script = test::safetensors_check_script();
  REQUIRE(fs::exists(script));
  TempDir dir;
  for (const Case& c : cases()) std::ofstream(dir / (c.file + ".safetensors"), std::ios::binary) << c.bytes;
  const std::string log = dir / "verdicts.txt";
  REQUIRE(std::system(("python3 '" + script.string() + "' --verdicts '" + dir.path + "' >'" + log + "' 2>&1").c_str()) ==
          0);
  std::ifstream in(log);
  std::map<std::string, std::string> verdict;
  for (std::string line; std::getline(in, line);) {
    const size_t space = line.find(' ');
    verdict[line.substr(0, space)] = line.substr(space + 1);
  }
  for (const Case& c : cases()) {
    const std::string name = c.file + ".safetensors";
    INFO(name << ": " << verdict[name]);
    REQUIRE(verdict.count(name));
    CHECK((verdict[name] == "read") == c.reference_reads);
  }
}
