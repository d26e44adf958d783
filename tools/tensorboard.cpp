// Hand-written protobuf encoding of TensorBoard's Event, Summary and HistogramProto
// (only the fields written here) and the TFRecord framing around each event.
#include "tools/tensorboard.h"

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "framework/error.h"
#include "tools/crc32c.h"

namespace hg::logging {
namespace {

// Wire types of the protobuf encoding.
constexpr int kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5;

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void put_key(std::string& out, int field, int wire_type) { put_varint(out, static_cast<uint64_t>(field << 3 | wire_type)); }

template <class T>
void put_little_endian(std::string& out, T bits) {
  for (size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<char>((bits >> (8 * i)) & 0xFF));
}

void put_double(std::string& out, int field, double v) {
  put_key(out, field, kFixed64);
  put_little_endian(out, std::bit_cast<uint64_t>(v));
}

void put_float(std::string& out, int field, float v) {
  put_key(out, field, kFixed32);
  put_little_endian(out, std::bit_cast<uint32_t>(v));
}

void put_bytes(std::string& out, int field, const std::string& bytes) {
  put_key(out, field, kLengthDelimited);
  put_varint(out, bytes.size());
  out += bytes;
}

void put_packed_doubles(std::string& out, int field, const std::vector<double>& v) {
  std::string packed;
  for (double d : v) put_little_endian(packed, std::bit_cast<uint64_t>(d));
  put_bytes(out, field, packed);
}

// Summary { repeated Value value = 1; } with Value { string tag = 1; ... }.
std::string summary_of(const std::string& tag, const std::string& value_fields) {
  std::string value;
  put_bytes(value, 1, tag);
  value += value_fields;
  std::string summary;
  put_bytes(summary, 1, value);
  return summary;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

Histogram Histogram::of(const std::vector<double>& values, const std::vector<double>& limits) {
  HG_CHECK(!limits.empty(), "Histogram::of: give at least one bucket limit");
  HG_CHECK(std::is_sorted(limits.begin(), limits.end()) &&
               std::adjacent_find(limits.begin(), limits.end()) == limits.end(),
           "Histogram::of: bucket limits must be strictly increasing");
  Histogram h;
  h.bucket_limit = limits;
  h.bucket.assign(limits.size(), 0.0);
  h.min = INFINITY;
  h.max = -INFINITY;
  for (double v : values) {
    if (!std::isfinite(v)) continue;
    const auto at = std::lower_bound(limits.begin(), limits.end(), v);
    h.bucket[std::min<size_t>(static_cast<size_t>(at - limits.begin()), limits.size() - 1)] += 1;
    h.min = std::min(h.min, v);
    h.max = std::max(h.max, v);
    h.num += 1;
    h.sum += v;
    h.sum_squares += v * v;
  }
  if (h.num == 0) h.min = h.max = 0;
  return h;
}

std::string tfrecord(const std::string& payload) {
  std::string length;
  put_little_endian(length, static_cast<uint64_t>(payload.size()));
  std::string out = length;
  put_little_endian(out, masked_crc32c(length.data(), length.size()));
  out += payload;
  put_little_endian(out, masked_crc32c(payload.data(), payload.size()));
  return out;
}

SummaryWriter::SummaryWriter(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  HG_CHECK(!ec && std::filesystem::is_directory(dir), "SummaryWriter: cannot create the folder '", dir,
           "': ", ec ? ec.message() : "a file of that name exists");
  char host[256] = "localhost";
  gethostname(host, sizeof host - 1);
  path_ = detail::concat(dir, "/events.out.tfevents.", static_cast<int64_t>(now_seconds()), ".", host, ".", getpid());
  file_ = std::fopen(path_.c_str(), "wb");
  HG_CHECK(file_ != nullptr, "SummaryWriter: cannot open '", path_, "' for writing: ", std::strerror(errno));
  // The first event names the format version; readers expect it.
  std::string event;
  put_double(event, 1, now_seconds());
  put_bytes(event, 3, "brain.Event:2");
  const std::string rec = tfrecord(event);
  std::fwrite(rec.data(), 1, rec.size(), file_);
}

SummaryWriter::~SummaryWriter() {
  if (file_) std::fclose(file_);
}

void SummaryWriter::write_event(const std::string& summary, int64_t step) {
  // Event { double wall_time = 1; int64 step = 2; Summary summary = 5; }
  std::string event;
  put_double(event, 1, now_seconds());
  put_key(event, 2, kVarint);
  put_varint(event, static_cast<uint64_t>(step));
  put_bytes(event, 5, summary);
  const std::string rec = tfrecord(event);
  HG_CHECK(std::fwrite(rec.data(), 1, rec.size(), file_) == rec.size(), "SummaryWriter: writing '", path_,
           "' failed: ", std::strerror(errno));
}

void SummaryWriter::add_scalar(const std::string& tag, double value, int64_t step) {
  std::string fields;
  put_float(fields, 2, static_cast<float>(value));  // Value.simple_value
  write_event(summary_of(tag, fields), step);
}

void SummaryWriter::add_histogram(const std::string& tag, const Histogram& h, int64_t step) {
  HG_CHECK(h.bucket.size() == h.bucket_limit.size(), "SummaryWriter::add_histogram: '", tag, "' has ",
           h.bucket.size(), " buckets but ", h.bucket_limit.size(), " limits; they must match");
  std::string histo;  // HistogramProto
  put_double(histo, 1, h.min);
  put_double(histo, 2, h.max);
  put_double(histo, 3, h.num);
  put_double(histo, 4, h.sum);
  put_double(histo, 5, h.sum_squares);
  put_packed_doubles(histo, 6, h.bucket_limit);
  put_packed_doubles(histo, 7, h.bucket);
  std::string fields;
  put_bytes(fields, 5, histo);  // Value.histo
  write_event(summary_of(tag, fields), step);
}

void SummaryWriter::flush() {
  HG_CHECK(std::fflush(file_) == 0, "SummaryWriter: flushing '", path_, "' failed: ", std::strerror(errno));
}

}  // namespace hg::logging
