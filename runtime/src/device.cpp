// Device parsing and printing.
#include "kiln/device.h"

#include "kiln/error.h"

namespace kiln {

Device::Device(const std::string& spec) {
  if (spec == "cpu") {
    *this = kCPU;
    return;
  }
  if (spec.rfind("cuda", 0) == 0) {
    int idx = 0;
    if (spec.size() > 4) {
      KILN_CHECK(spec[4] == ':' && spec.size() > 5, "Device: expected \"cpu\", \"cuda\" or \"cuda:N\", got \"", spec, "\".");
      try {
        idx = std::stoi(spec.substr(5));
      } catch (const std::exception&) {
        KILN_FAIL("Device: expected a device index after \"cuda:\", got \"", spec, "\".");
      }
    }
    *this = Device(DeviceType::CUDA, static_cast<int16_t>(idx));
    return;
  }
  KILN_FAIL("Device: expected \"cpu\", \"cuda\" or \"cuda:N\", got \"", spec, "\".");
}

std::string Device::str() const {
  return is_cpu() ? std::string("cpu") : "cuda:" + std::to_string(index);
}

std::ostream& operator<<(std::ostream& os, const Device& d) { return os << d.str(); }

}  // namespace kiln
