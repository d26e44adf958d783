// The TensorBoard writer: CRC-32C against RFC 3720's test vectors, TFRecord framing and the
// protobuf bytes of a scalar event against hand-assembled bytes, histograms, bad folders.
#include <catch2/catch.hpp>

#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "framework/error.h"
#include "tools/crc32c.h"
#include "tools/tensorboard.h"
#include "tests/temp_dir.h"

using namespace hg::logging;

namespace {

uint64_t little_endian(const std::string& s, size_t at, size_t bytes) {
  uint64_t v = 0;
  for (size_t i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(s[at + i])) << (8 * i);
  return v;
}

// Splits a TFRecord file into payloads, checking both masked CRCs of every record.
std::vector<std::string> records_of(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  const std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> out;
  size_t at = 0;
  while (at < s.size()) {
    REQUIRE(at + 12 <= s.size());
    const uint64_t n = little_endian(s, at, 8);
    CHECK(little_endian(s, at + 8, 4) == masked_crc32c(s.data() + at, 8));
    REQUIRE(at + 16 + n <= s.size());
    const std::string payload = s.substr(at + 12, n);
    CHECK(little_endian(s, at + 12 + n, 4) == masked_crc32c(payload.data(), payload.size()));
    out.push_back(payload);
    at += 16 + n;
  }
  return out;
}

std::string bytes(std::initializer_list<int> b) {
  std::string s;
  for (int c : b) s.push_back(static_cast<char>(c));
  return s;
}

}  // namespace

TEST_CASE("crc32c matches RFC 3720 appendix B.4", "[tensorboard]") {
  std::vector<unsigned char> buf(32);
  std::fill(buf.begin(), buf.end(), 0x00);
  CHECK(crc32c(buf.data(), 32) == 0x8A9136AAu);
  std::fill(buf.begin(), buf.end(), 0xFF);
  CHECK(crc32c(buf.data(), 32) == 0x62A8AB43u);
  for (int i = 0; i < 32; ++i) buf[static_cast<size_t>(i)] = static_cast<unsigned char>(i);
  CHECK(crc32c(buf.data(), 32) == 0x46DD794Eu);
  for (int i = 0; i < 32; ++i) buf[static_cast<size_t>(i)] = static_cast<unsigned char>(31 - i);
  CHECK(crc32c(buf.data(), 32) == 0x113FDB5Cu);
  CHECK(crc32c("123456789", 9) == 0xE3069283u);  // the CRC catalogue's check value
  CHECK(crc32c("4567", 4, crc32c("123", 3)) == crc32c("1234567", 7));  // extends across calls
  CHECK(crc32c("", 0) == 0u);
}

TEST_CASE("masked crc32c rotates by 15 and adds TFRecord's constant", "[tensorboard]") {
  CHECK(masked_crc32c("", 0) == 0xA282EAD8u);
  // 0xE3069283 rotated right by 15 is 0x2507C60D; plus 0xA282EAD8 (mod 2^32) is 0xC78AB0E5.
  CHECK(masked_crc32c("123456789", 9) == 0xC78AB0E5u);
}

TEST_CASE("tfrecord frames a payload with its length and both checksums", "[tensorboard]") {
  const std::string rec = tfrecord("abc");
  REQUIRE(rec.size() == 8 + 4 + 3 + 4);
  CHECK(rec.substr(0, 8) == bytes({3, 0, 0, 0, 0, 0, 0, 0}));
  CHECK(rec.substr(12, 3) == "abc");
  CHECK(little_endian(rec, 15, 4) == masked_crc32c("abc", 3));
}

TEST_CASE("SummaryWriter writes a version event, then scalar and histogram events", "[tensorboard]") {
  hg::test::TempDir dir;
  std::string path;
  {
    SummaryWriter tb(dir / "tb/amp");
    path = tb.path();
    tb.add_scalar("loss", 0.5, 300);
    tb.add_histogram("h", Histogram::of({1.0, 2.0, 2.5, 9.0}, {1.0, 2.0, 4.0}), 7);
    tb.flush();
  }
  CHECK(path.find("/tb/amp/events.out.tfevents.") != std::string::npos);
  const std::vector<std::string> recs = records_of(path);
  REQUIRE(recs.size() == 3);
  CHECK(recs[0].find("brain.Event:2") != std::string::npos);
  // Event: wall_time (key 0x09 + 8 bytes), step 300 (key 0x10, varint 0xAC 0x02), then
  // summary (0x2A) { value (0x0A) { tag (0x0A) "loss", simple_value (0x15) 0.5f = 0x3F000000 } }.
  const std::string& e = recs[1];
  REQUIRE(e.size() == 9 + 3 + 2 + 2 + 6 + 5);
  CHECK(e[0] == 0x09);
  CHECK(e.substr(9) == bytes({0x10, 0xAC, 0x02, 0x2A, 13, 0x0A, 11, 0x0A, 4, 'l', 'o', 's', 's', 0x15, 0, 0, 0, 0x3F}));
  // The histogram: 1.0 -> bucket (-inf, 1]; 2.0 -> (1, 2]; 2.5 -> (2, 4]; 9.0 -> last bucket.
  const std::string& h = recs[2];
  const size_t limits = h.find(bytes({0x32, 24}));
  REQUIRE(limits != std::string::npos);
  const size_t counts = limits + 2 + 24;
  REQUIRE(h.substr(counts, 2) == bytes({0x3A, 24}));
  double c[3];
  std::memcpy(c, h.data() + counts + 2, sizeof c);
  CHECK(c[0] == 1.0);
  CHECK(c[1] == 1.0);
  CHECK(c[2] == 2.0);
}

TEST_CASE("Histogram::of keeps min, max, sum and skips non-finite values", "[tensorboard]") {
  const Histogram h = Histogram::of({-3.0, 0.5, NAN, 4.0, INFINITY}, {0.0, 10.0});
  CHECK(h.num == 3);
  CHECK(h.min == -3.0);
  CHECK(h.max == 4.0);
  CHECK(h.sum == 1.5);
  CHECK(h.sum_squares == 9.0 + 0.25 + 16.0);
  CHECK(h.bucket == std::vector<double>{1.0, 2.0});
  CHECK_THROWS_WITH(Histogram::of({1.0}, {2.0, 1.0}), Catch::Contains("strictly increasing"));
  CHECK_THROWS_WITH(Histogram::of({1.0}, {}), Catch::Contains("at least one bucket limit"));
}

TEST_CASE("SummaryWriter refuses a folder it cannot create", "[tensorboard]") {
  hg::test::TempDir dir;
  { std::ofstream(dir / "file") << "x"; }
  CHECK_THROWS_AS(SummaryWriter(dir / "file"), hg::Error);
  CHECK_THROWS_WITH(SummaryWriter(dir / "file/sub"), Catch::Contains("cannot create the folder"));
}
