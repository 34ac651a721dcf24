// kiln_cuda in the runtime. Tensors on GPUs: the runtime's DeviceInterface (kiln/device_interface.h) over kiln_cuda's
// caching allocator and the thread's current stream. Every copy is queued on the current
// stream of the GPU it touches and waited for, so it is ordered after the kernels that wrote
// its source (on that stream) and the host may use the result at once, as PyTorch's
// synchronous .to() and .item() behave.
#include <vector>

#include "kiln/cuda/attention_kernels.h"
#include "kiln/cuda/caching_allocator.h"
#include "kiln/cuda/device.h"
#include "kiln/cuda/conv_kernels.h"
#include "kiln/cuda/elementwise_kernels.h"
#include "kiln/cuda/factory_kernels.h"
#include "kiln/cuda/gemm.h"
#include "kiln/cuda/index_kernels.h"
#include "kiln/cuda/line_kernels.h"
#include "kiln/cuda/loss_kernels.h"
#include "kiln/cuda/norm_kernels.h"
#include "kiln/cuda/pool_kernels.h"
#include "kiln/cuda/reduction_kernels.h"
#include "kiln/cuda/selection_kernels.h"
#include "kiln/cuda/softmax_kernels.h"
#include "kiln/cuda/statistic_kernels.h"
#include "kiln/cuda/stream.h"
#include "kiln/device_interface.h"
#include "kiln/error.h"

namespace kiln::cuda {

namespace {

class CudaTensorMemory final : public DeviceInterface {
 public:
  void* allocate(size_t nbytes, Device device) override {
    return device_allocator(device.index).allocate(nbytes, current_stream(device.index).id());
  }
  void deallocate(void* ptr, Device device) override {
    device_allocator(device.index).deallocate(ptr);
  }
  void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device,
                  size_t nbytes) override {
    if (src_device.is_cpu()) {
      const Stream stream = current_stream(dst_device.index);
      copy_to_device_async(dst, src, nbytes, stream);
      stream.synchronize();
    } else if (dst_device.is_cpu()) {
      const Stream stream = current_stream(src_device.index);
      copy_to_host_async(dst, src, nbytes, stream);
      stream.synchronize();
    } else if (dst_device == src_device) {
      const Stream stream = current_stream(src_device.index);
      copy_on_device_async(dst, src, nbytes, stream);
      stream.synchronize();
    } else {
      // Between two GPUs, through the host: peer access needs both contexts set up for it,
      // and a model moved between GPUs is rare enough not to need it.
      std::vector<char> staging(nbytes);
      copy_bytes(staging.data(), kCPU, src, src_device, nbytes);
      copy_bytes(dst, dst_device, staging.data(), kCPU, nbytes);
    }
  }
};

}  // namespace

void register_backend() {
  static CudaTensorMemory memory;
  kiln::register_device_interface(DeviceType::CUDA, &memory);
  register_elementwise_kernels();
  register_reduction_kernels();
  register_gemm_kernels();
  register_softmax_kernels();
  register_loss_kernels();
  register_statistic_kernels();
  register_factory_kernels();
  register_index_kernels();
  register_line_kernels();
  register_selection_kernels();
  register_norm_kernels();
  register_pool_kernels();
  register_conv_kernels();
  register_attention_kernels();
}

}  // namespace kiln::cuda
