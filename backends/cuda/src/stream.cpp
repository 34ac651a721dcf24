// Streams, events and pinned memory (stream.h) over the loaded driver.
#include "kiln/cuda/stream.h"

#include <cstdint>
#include <map>
#include <memory>

#include "device_context.h"
#include "kiln/cuda/driver.h"
#include "kiln/cuda/fused_kernels.h"
#include "kiln/cuda/graph_capture.h"
#include "kiln/error.h"

namespace kiln::cuda {
namespace {

driver::CUstream native(const Stream& s) { return static_cast<driver::CUstream>(s.handle()); }

driver::CUdeviceptr device_address(const void* p) {
  return static_cast<driver::CUdeviceptr>(reinterpret_cast<uintptr_t>(p));
}

// This thread's current stream per GPU; absent: the default stream.
std::map<int, Stream>& current_streams() {
  thread_local std::map<int, Stream> streams;
  return streams;
}

constexpr const char* kCheckGpu = "check nvidia-smi; an earlier kernel may have failed (rerun "
                                  "with CUDA_LAUNCH_BLOCKING=1 to find it).";

}  // namespace

Stream Stream::create(int device) {
  const driver::Api& api = use_device(device);
  driver::CUstream s = nullptr;
  driver::check(api, api.cuStreamCreate(&s, driver::kStreamNonBlocking), "cuStreamCreate",
                kCheckGpu);
  // Destroyed on its own GPU when the last copy goes; the driver lets queued work finish.
  std::shared_ptr<void> owned(s, [device](void* p) {
    const driver::Api& a = use_device(device);
    a.cuStreamDestroy_v2(static_cast<driver::CUstream>(p));
  });
  return Stream(device, std::move(owned));
}

void Stream::synchronize() const {
  fail_if_capturing(device_, "waiting on the host for a stream (a copy between the host and "
                             "the GPU, item(), or synchronize())");
  const driver::Api& api = use_device(device_);
  driver::check(api, api.cuStreamSynchronize(native(*this)), "cuStreamSynchronize", kCheckGpu);
}

bool Stream::query() const {
  const driver::Api& api = use_device(device_);
  driver::CUresult r = api.cuStreamQuery(native(*this));
  if (r == driver::kNotReady) return false;
  driver::check(api, r, "cuStreamQuery", kCheckGpu);
  return true;
}

Stream current_stream(int device) {
  auto it = current_streams().find(device);
  return it == current_streams().end() ? Stream::default_stream(device) : it->second;
}

void set_current_stream(const Stream& stream) {
  if (stream.is_default())
    current_streams().erase(stream.device());
  else
    current_streams().insert_or_assign(stream.device(), stream);
}

void Event::record(const Stream& stream) {
  const driver::Api& api = use_device(stream.device());
  KILN_CHECK(device_ < 0 || device_ == stream.device(), "[cuda] expected an event to be "
             "recorded on one GPU, found GPU ", device_, " and then GPU ", stream.device(),
             ". Fix: use one Event per GPU.");
  if (!handle_) {
    driver::CUevent e = nullptr;
    driver::check(api, api.cuEventCreate(&e, timing_ ? 0 : driver::kEventDisableTiming),
                  "cuEventCreate", kCheckGpu);
    const int device = stream.device();
    handle_ = std::shared_ptr<void>(e, [device](void* p) {
      const driver::Api& a = use_device(device);
      a.cuEventDestroy_v2(static_cast<driver::CUevent>(p));
    });
    device_ = device;
  }
  driver::check(api, api.cuEventRecord(static_cast<driver::CUevent>(handle_.get()), native(stream)),
                "cuEventRecord", kCheckGpu);
}

void Event::synchronize() const {
  if (!handle_) return;
  const driver::Api& api = use_device(device_);
  driver::check(api, api.cuEventSynchronize(static_cast<driver::CUevent>(handle_.get())),
                "cuEventSynchronize", kCheckGpu);
}

bool Event::query() const {
  if (!handle_) return true;
  const driver::Api& api = use_device(device_);
  driver::CUresult r = api.cuEventQuery(static_cast<driver::CUevent>(handle_.get()));
  if (r == driver::kNotReady) return false;
  driver::check(api, r, "cuEventQuery", kCheckGpu);
  return true;
}

void Event::block(const Stream& stream) const {
  if (!handle_) return;
  const driver::Api& api = use_device(stream.device());
  driver::check(api,
                api.cuStreamWaitEvent(native(stream), static_cast<driver::CUevent>(handle_.get()), 0),
                "cuStreamWaitEvent", kCheckGpu);
}

double Event::elapsed_ms(const Event& end) const {
  KILN_CHECK(timing_ && end.timing_, "[cuda] expected two events made with timing "
             "(kiln::cuda::Event(true)) to time the work between them. Fix: create both with "
             "Event(/*timing=*/true).");
  KILN_CHECK(handle_ && end.handle_, "[cuda] expected both events recorded before timing the "
             "work between them. Fix: record() each on a stream first.");
  const driver::Api& api = use_device(device_);
  float ms = 0;
  driver::check(api,
                api.cuEventElapsedTime(&ms, static_cast<driver::CUevent>(handle_.get()),
                                       static_cast<driver::CUevent>(end.handle_.get())),
                "cuEventElapsedTime", "synchronize the end event first.");
  return ms;
}

PinnedBuffer::PinnedBuffer(size_t bytes) : size_(bytes) {
  const driver::Api& api = use_device(0);
  driver::check(api, api.cuMemHostAlloc(&data_, bytes == 0 ? 1 : bytes, driver::kMemHostAllocPortable),
                "cuMemHostAlloc",
                "pinned memory is locked in RAM: ask for less, or check the memlock limit "
                "(ulimit -l).");
}

PinnedBuffer::~PinnedBuffer() {
  if (!data_) return;
  const driver::Api& api = use_device(0);
  api.cuMemFreeHost(data_);  // nothing to do about a failure while freeing
}

void copy_to_device_async(void* device_dst, const void* host_src, size_t bytes,
                          const Stream& stream) {
  const driver::Api& api = use_device(stream.device());
  driver::check(api, api.cuMemcpyHtoDAsync_v2(device_address(device_dst), host_src, bytes, native(stream)),
                "cuMemcpyHtoDAsync", "check that the destination is memory of this GPU.");
}

void copy_to_host_async(void* host_dst, const void* device_src, size_t bytes,
                        const Stream& stream) {
  const driver::Api& api = use_device(stream.device());
  driver::check(api, api.cuMemcpyDtoHAsync_v2(host_dst, device_address(device_src), bytes, native(stream)),
                "cuMemcpyDtoHAsync", "check that the source is memory of this GPU.");
}

void copy_on_device_async(void* device_dst, const void* device_src, size_t bytes,
                          const Stream& stream) {
  const driver::Api& api = use_device(stream.device());
  detail::count_copy();
  driver::check(api,
                api.cuMemcpyDtoDAsync_v2(device_address(device_dst), device_address(device_src),
                                         bytes, native(stream)),
                "cuMemcpyDtoDAsync", "check that both buffers are memory of this GPU.");
}

void fill_words_async(void* device_dst, uint32_t word, size_t count, const Stream& stream) {
  const driver::Api& api = use_device(stream.device());
  detail::count_copy();
  driver::check(api, api.cuMemsetD32Async(device_address(device_dst), word, count, native(stream)),
                "cuMemsetD32Async",
                "check that the buffer is memory of this GPU and 4-byte aligned.");
}

}  // namespace kiln::cuda
