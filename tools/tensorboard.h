// A TensorBoard event-file writer: scalars and histograms appended as Event protobufs in
// TFRecord framing, readable by the `tensorboard` package, with no protobuf library.
//
//   hg::logging::SummaryWriter tb("runs/exp1");
//   tb.add_scalar("train/loss", loss.item<double>(), step);
//   tb.add_histogram("grad/log2", hg::logging::Histogram::of(values, limits), step);
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace hg::logging {

// TensorBoard's HistogramProto: bucket i counts values in (bucket_limit[i-1], bucket_limit[i]].
struct Histogram {
  double min = 0, max = 0, num = 0, sum = 0, sum_squares = 0;
  std::vector<double> bucket_limit, bucket;
  // Counts finite values into buckets with these increasing upper limits; values above
  // the last limit go into the last bucket. Throws hg::Error on unsorted or empty limits.
  static Histogram of(const std::vector<double>& values, const std::vector<double>& limits);
};

// One TFRecord: little-endian length, masked CRC-32C of the length, payload, masked CRC-32C
// of the payload.
std::string tfrecord(const std::string& payload);

class SummaryWriter {
 public:
  // Creates `dir` if needed and a new file events.out.tfevents.<seconds>.<host>.<pid> in it;
  // throws hg::Error naming the path when either fails.
  explicit SummaryWriter(const std::string& dir);
  ~SummaryWriter();
  SummaryWriter(const SummaryWriter&) = delete;
  SummaryWriter& operator=(const SummaryWriter&) = delete;

  void add_scalar(const std::string& tag, double value, int64_t step);  // stored as f32, as TensorBoard does
  void add_histogram(const std::string& tag, const Histogram& h, int64_t step);
  void flush();  // throws hg::Error when the disk refused a write
  const std::string& path() const { return path_; }

 private:
  void write_event(const std::string& summary, int64_t step);
  std::string path_;
  std::FILE* file_ = nullptr;
};

}  // namespace hg::logging
