// Where a tensor's memory lives: the CPU or a CUDA device (by index).
#pragma once
#include <ostream>
#include <string>

namespace hg {

enum class DeviceKind : uint8_t { cpu, cuda };

struct Device {
  DeviceKind kind = DeviceKind::cpu;
  int index = 0;

  static Device cpu() { return {DeviceKind::cpu, 0}; }
  static Device cuda(int index = 0) { return {DeviceKind::cuda, index}; }
  // A usable CUDA device if there is one, else the CPU.
  static Device automatic();
  // "cpu", "cuda", "cuda:1", "auto"; throws hg::Error on anything else.
  static Device parse(const std::string& s);

  bool is_cpu() const { return kind == DeviceKind::cpu; }
  bool is_cuda() const { return kind == DeviceKind::cuda; }
  std::string str() const;
  bool operator==(const Device&) const = default;
};

std::ostream& operator<<(std::ostream& os, const Device& d);

}  // namespace hg
