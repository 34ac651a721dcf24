// Where a tensor lives. Only CPU kernels exist today, but nothing may assume CPU.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

namespace kiln {

enum class DeviceType : uint8_t { CPU, CUDA };
inline constexpr int kNumDeviceTypes = 2;

struct Device {
  DeviceType type = DeviceType::CPU;
  int16_t index = 0;

  constexpr Device() = default;
  constexpr Device(DeviceType t, int16_t i = 0) : type(t), index(i) {}
  // Parses "cpu", "cuda", "cuda:1".
  explicit Device(const std::string& spec);

  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  std::string str() const;
  friend bool operator==(const Device& a, const Device& b) = default;
};

inline constexpr Device kCPU{DeviceType::CPU, 0};
// The first GPU; kiln::cuda::device(i) names another (kiln/cuda/device.h, where kiln::cuda is
// the namespace of the CUDA API: kiln::cuda::is_available()).
inline constexpr Device kCUDA{DeviceType::CUDA, 0};

std::ostream& operator<<(std::ostream& os, const Device& d);

}  // namespace kiln
