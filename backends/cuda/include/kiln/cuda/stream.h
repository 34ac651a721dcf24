// Streams, events and pinned host memory: how work is ordered on a GPU and how transfers
// overlap it, in PyTorch's model. Every thread has a current stream per GPU (the default
// stream until set); kiln queues kernels, copies and its device allocator's reuse on it.
//
//   kiln::cuda::Stream side = kiln::cuda::Stream::create();
//   {
//     kiln::cuda::StreamGuard on(side);          // this thread's current stream on GPU 0
//     module.launch("fused_0", buffers, dims);    // queued on `side`
//   }
//   kiln::cuda::Event done;
//   done.record(side);
//   done.synchronize();
//
// Without a GPU, everything that would reach the driver throws kiln::Error naming why
// (kiln::cuda::unavailable_reason); default streams and an unrecorded Event need no GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

namespace kiln::cuda {

class Stream {
 public:
  // GPU `device`'s default stream (the legacy stream 0, which waits for and is waited on by
  // every blocking stream).
  static Stream default_stream(int device = 0) { return Stream(device, nullptr); }
  // A new stream on GPU `device` that does not wait for the default stream; destroyed when the
  // last copy of it goes.
  static Stream create(int device = 0);
  // A stream made elsewhere (a CUstream, or the CUDA runtime's cudaStream_t, from the caller,
  // PyTorch, ...) that kiln queues work on but never destroys: the owner keeps it alive while
  // kiln's work on it may still be queued. Null: GPU `device`'s default stream.
  static Stream wrap(void* handle, int device = 0) {
    return handle ? Stream(device, std::shared_ptr<void>(handle, [](void*) {}))
                  : default_stream(device);
  }

  int device() const { return device_; }
  // The driver's CUstream (null for the default stream).
  void* handle() const { return handle_ ? handle_.get() : nullptr; }
  // The id kiln's device allocator keys its per-stream pools with (caching_allocator.h).
  uint64_t id() const { return reinterpret_cast<uint64_t>(handle()); }
  bool is_default() const { return handle() == nullptr; }

  // Waits until everything queued on the stream has run.
  void synchronize() const;
  // True when everything queued on the stream has run.
  bool query() const;

  friend bool operator==(const Stream& a, const Stream& b) {
    return a.device_ == b.device_ && a.handle() == b.handle();
  }

 private:
  Stream(int device, std::shared_ptr<void> handle) : device_(device), handle_(std::move(handle)) {}
  int device_ = 0;
  std::shared_ptr<void> handle_;  // null: the default stream
};

// This thread's current stream on GPU `device` (its default stream until set).
Stream current_stream(int device = 0);
// Makes `stream` this thread's current stream on its GPU.
void set_current_stream(const Stream& stream);

// Makes `stream` current for a scope and restores the previous one after.
class StreamGuard {
 public:
  explicit StreamGuard(const Stream& stream)
      : previous_(current_stream(stream.device())) {
    set_current_stream(stream);
  }
  ~StreamGuard() { set_current_stream(previous_); }
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  Stream previous_;
};

// A marker in a stream's work: to wait for (on the host or on another stream) and, with
// `timing`, to time the work between two of them.
class Event {
 public:
  explicit Event(bool timing = false) : timing_(timing) {}

  // Marks the work queued on `stream` so far (creates the event on first use).
  void record(const Stream& stream);
  // Waits on the host until the recorded work has run; an unrecorded event has nothing to
  // wait for.
  void synchronize() const;
  // True when the recorded work has run (or nothing was recorded).
  bool query() const;
  // Makes `stream` wait (on the GPU, not the host) for the recorded work.
  void block(const Stream& stream) const;
  // Milliseconds between this event and `end`, both recorded with timing and synchronized.
  double elapsed_ms(const Event& end) const;

 private:
  bool timing_;
  int device_ = -1;
  std::shared_ptr<void> handle_;  // created by the first record
};

// Page-locked host memory: copies from and to it run asynchronously, on a stream, at the
// link's full bandwidth (pageable memory is staged through a driver buffer).
class PinnedBuffer {
 public:
  explicit PinnedBuffer(size_t bytes);
  ~PinnedBuffer();
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  void* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

// Queues a copy on `stream`; returns at once. With pageable host memory the driver copies
// synchronously instead; from PinnedBuffer memory the copy overlaps other work. The host
// memory must stay valid until the stream has run the copy.
void copy_to_device_async(void* device_dst, const void* host_src, size_t bytes,
                          const Stream& stream);
void copy_to_host_async(void* host_dst, const void* device_src, size_t bytes,
                        const Stream& stream);
// Queues a copy between two buffers of the stream's GPU.
void copy_on_device_async(void* device_dst, const void* device_src, size_t bytes,
                          const Stream& stream);
// Queues filling `count` 32-bit words at `device_dst` with `word` (a float's bits, say).
void fill_words_async(void* device_dst, uint32_t word, size_t count, const Stream& stream);

}  // namespace kiln::cuda
