// conv2d through cuDNN (conv_cudnn.h): descriptors for the call's tensors, the heuristic's
// first algorithm that succeeds within the workspace limit, one cuDNN call on the current
// stream.
#include "conv_cudnn.h"

#include <array>
#include <atomic>
#include <climits>
#include <string>

#include "device_context.h"
#include "kiln/cuda/caching_allocator.h"
#include "kiln/cuda/conv_kernels.h"
#include "kiln/cuda/cudnn.h"
#include "kiln/cuda/fused_kernels.h"
#include "kiln/cuda/gemm.h"
#include "kiln/cuda/stream.h"
#include "kiln/error.h"

namespace kiln::cuda {

namespace {

std::atomic<bool> g_cudnn_enabled{true};

// The most workspace an algorithm may ask for; the heuristic's next choice otherwise.
constexpr size_t kWorkspaceLimit = size_t{1} << 30;
constexpr int kMaxDevices = 64;

void check(cudnn::Status status, const char* call) {
  KILN_CHECK(status == cudnn::kSuccess, "[conv2d] cuDNN's ", call, " failed with ",
             cudnn::status_name(status),
             ". Fix: check nvidia-smi; an earlier kernel may have failed (rerun with "
             "CUDA_LAUNCH_BLOCKING=1 to find it), or turn cuDNN off with "
             "kiln::cuda::set_cudnn_enabled(false) (or KILN_CUDNN=0) to convolve without it.");
}

// This thread's cuDNN handle on each GPU (a handle is bound to one stream at a time, so threads
// do not share one), or why none could be made. Handles live until the process ends: destroying
// them at thread exit could run after the driver is gone.
struct ThreadHandle {
  cudnn::Handle handle = nullptr;
  std::string failure;
  bool tried = false;
};

// A GPU's handle for this thread, or null with the reason in `why`.
cudnn::Handle handle_for(int device, std::string* why) {
  thread_local std::array<ThreadHandle, kMaxDevices> handles;
  if (device >= kMaxDevices) {
    if (why) *why = "kiln's cuDNN handles cover GPUs 0 to 63";
    return nullptr;
  }
  ThreadHandle& h = handles[static_cast<size_t>(device)];
  if (!h.tried) {
    h.tried = true;
    const cudnn::Loaded& library = cudnn::loaded();
    if (!library.api) {
      h.failure = library.unavailable_reason;
    } else {
      use_device(device);
      const cudnn::Status s = library.api->cudnnCreate(&h.handle);
      if (s != cudnn::kSuccess) {
        h.handle = nullptr;
        h.failure = library.library + ": cudnnCreate failed with " + cudnn::status_name(s);
      }
    }
  }
  if (!h.handle && why) *why = h.failure;
  return h.handle;
}

int data_type(DType dtype) { return dtype == kFloat64 ? cudnn::kDouble : cudnn::kFloat; }

// The descriptors of one call, destroyed with it.
struct Descriptors {
  const cudnn::Api& api;
  cudnn::TensorDesc x = nullptr, y = nullptr;
  cudnn::FilterDesc w = nullptr;
  cudnn::ConvDesc conv = nullptr;
  ~Descriptors() {
    if (conv) api.cudnnDestroyConvolutionDescriptor(conv);
    if (w) api.cudnnDestroyFilterDescriptor(w);
    for (cudnn::TensorDesc t : {x, y})
      if (t) api.cudnnDestroyTensorDescriptor(t);
  }
};

// Whether every size and stride fits cuDNN's int.
bool fits_int(const Tensor& t) {
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.size(d) > INT_MAX || t.stride(d) > INT_MAX) return false;
  return t.numel() <= INT_MAX;
}

cudnn::TensorDesc tensor_desc(const cudnn::Api& api, const Tensor& t) {
  cudnn::TensorDesc d = nullptr;
  check(api.cudnnCreateTensorDescriptor(&d), "cudnnCreateTensorDescriptor");
  int sizes[4], strides[4];
  for (int i = 0; i < 4; ++i) {
    sizes[i] = static_cast<int>(t.size(i));
    strides[i] = static_cast<int>(t.stride(i));
  }
  const cudnn::Status s = api.cudnnSetTensorNdDescriptor(d, data_type(t.dtype()), 4, sizes, strides);
  if (s != cudnn::kSuccess) api.cudnnDestroyTensorDescriptor(d);
  check(s, "cudnnSetTensorNdDescriptor");
  return d;
}

// The descriptors for x, w, y (the forward's output, or the gradient flowing into it) and the
// convolution; false when cuDNN cannot describe them (sizes beyond int).
bool describe(Descriptors& g, const Tensor& x, const Tensor& w, const Tensor& y,
              const ops::Conv2dAttrs& a) {
  if (!fits_int(x) || !fits_int(w) || !fits_int(y)) return false;
  const cudnn::Api& api = g.api;
  g.x = tensor_desc(api, x);
  g.y = tensor_desc(api, y);
  check(api.cudnnCreateFilterDescriptor(&g.w), "cudnnCreateFilterDescriptor");
  const int filter[4] = {static_cast<int>(w.size(0)), static_cast<int>(w.size(1)),
                         static_cast<int>(w.size(2)), static_cast<int>(w.size(3))};
  check(api.cudnnSetFilterNdDescriptor(g.w, data_type(w.dtype()), cudnn::kNCHW, 4, filter),
        "cudnnSetFilterNdDescriptor");
  check(api.cudnnCreateConvolutionDescriptor(&g.conv), "cudnnCreateConvolutionDescriptor");
  check(api.cudnnSetConvolution2dDescriptor(
            g.conv, static_cast<int>(a.padding[0]), static_cast<int>(a.padding[1]),
            static_cast<int>(a.stride[0]), static_cast<int>(a.stride[1]),
            static_cast<int>(a.dilation[0]), static_cast<int>(a.dilation[1]),
            cudnn::kCrossCorrelation, data_type(x.dtype())),
        "cudnnSetConvolution2dDescriptor");
  check(api.cudnnSetConvolutionGroupCount(g.conv, static_cast<int>(a.groups)),
        "cudnnSetConvolutionGroupCount");
  // float32 stays exact unless TF32 was asked for (set_allow_tf32, as for GEMMs).
  const int math = x.dtype() == kFloat32 && allow_tf32() ? cudnn::kDefaultMath : cudnn::kFmaMath;
  check(api.cudnnSetConvolutionMathType(g.conv, math), "cudnnSetConvolutionMathType");
  return true;
}

// The first of the heuristic's algorithms that cuDNN can run here within the workspace limit,
// or -1 (then the caller convolves without cuDNN). `query` fills up to 8 results.
template <class Query>
int choose_algorithm(const char* what, Query&& query) {
  cudnn::AlgoPerf results[8] = {};
  int returned = 0;
  const cudnn::Status s = query(8, &returned, results);
  if (cudnn::not_supported(s)) return -1;
  check(s, what);
  for (int i = 0; i < returned; ++i)
    if (results[i].status == cudnn::kSuccess && results[i].memory <= kWorkspaceLimit)
      return results[i].algo;
  return -1;
}

// Runs `call(handle, workspace, bytes, alpha, beta)` on the current stream with a workspace of
// `bytes` from the caching allocator, freed in stream order after it.
template <class Call>
void run_on_stream(cudnn::Handle handle, const cudnn::Api& api, const Tensor& like, size_t bytes,
                   Call&& call) {
  // The handle is this thread's (handle_for): binding it to the stream races no other thread.
  const int device = like.device().index;
  const Stream stream = current_stream(device);
  check(api.cudnnSetStream(handle, static_cast<cudnn::Stream>(stream.handle())), "cudnnSetStream");
  CachingAllocator& allocator = device_allocator(device);
  void* workspace = bytes ? allocator.allocate(bytes, stream.id()) : nullptr;
  const float one32 = 1, zero32 = 0;
  const double one64 = 1, zero64 = 0;
  const bool wide = like.dtype() == kFloat64;
  detail::count_library_call();
  try {
    call(workspace, bytes, wide ? static_cast<const void*>(&one64) : &one32,
         wide ? static_cast<const void*>(&zero64) : &zero32);
  } catch (...) {
    if (workspace) allocator.deallocate(workspace);
    throw;
  }
  if (workspace) allocator.deallocate(workspace);
}

// The handle and API for a call on `t`'s GPU, or null when cuDNN is not to be used.
cudnn::Handle usable(const Tensor& t) {
  if (!cudnn_enabled() || (t.dtype() != kFloat32 && t.dtype() != kFloat64)) return nullptr;
  return handle_for(t.device().index, nullptr);
}

enum class Pass { Forward, InputGrad, WeightGrad };

// One pass over the forward convolution's tensors x ⋆ w = y: the forward writes y, the input
// gradient x (from y's gradient and w), the weight gradient w (from y's gradient and x).
bool convolve(Pass pass, const Tensor& x, const Tensor& w, const Tensor& y, const ops::Conv2dAttrs& a) {
  const cudnn::Handle handle = usable(x);
  if (!handle) return false;
  const cudnn::Api& api = *cudnn::loaded().api;
  Descriptors g{api};
  if (!describe(g, x, w, y, a)) return false;
  auto query = [&](int n, int* returned, cudnn::AlgoPerf* results) {
    switch (pass) {
      case Pass::Forward:
        return api.cudnnGetConvolutionForwardAlgorithm_v7(handle, g.x, g.w, g.conv, g.y, n, returned, results);
      case Pass::InputGrad:
        return api.cudnnGetConvolutionBackwardDataAlgorithm_v7(handle, g.w, g.y, g.conv, g.x, n, returned,
                                                               results);
      case Pass::WeightGrad:
        break;
    }
    return api.cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle, g.x, g.y, g.conv, g.w, n, returned, results);
  };
  const int algo = choose_algorithm("the algorithm heuristic (_v7)", query);
  if (algo < 0) return false;
  size_t bytes = 0;
  switch (pass) {
    case Pass::Forward:
      check(api.cudnnGetConvolutionForwardWorkspaceSize(handle, g.x, g.w, g.conv, g.y, algo, &bytes),
            "cudnnGetConvolutionForwardWorkspaceSize");
      break;
    case Pass::InputGrad:
      check(api.cudnnGetConvolutionBackwardDataWorkspaceSize(handle, g.w, g.y, g.conv, g.x, algo, &bytes),
            "cudnnGetConvolutionBackwardDataWorkspaceSize");
      break;
    case Pass::WeightGrad:
      check(api.cudnnGetConvolutionBackwardFilterWorkspaceSize(handle, g.x, g.y, g.conv, g.w, algo, &bytes),
            "cudnnGetConvolutionBackwardFilterWorkspaceSize");
      break;
  }
  run_on_stream(handle, api, x, bytes, [&](void* ws, size_t n, const void* one, const void* zero) {
    switch (pass) {
      case Pass::Forward:
        check(api.cudnnConvolutionForward(handle, one, g.x, x.raw_data(), g.w, w.raw_data(), g.conv, algo, ws,
                                          n, zero, g.y, y.raw_data()),
              "cudnnConvolutionForward");
        break;
      case Pass::InputGrad:
        check(api.cudnnConvolutionBackwardData(handle, one, g.w, w.raw_data(), g.y, y.raw_data(), g.conv, algo,
                                               ws, n, zero, g.x, x.raw_data()),
              "cudnnConvolutionBackwardData");
        break;
      case Pass::WeightGrad:
        check(api.cudnnConvolutionBackwardFilter(handle, one, g.x, x.raw_data(), g.y, y.raw_data(), g.conv,
                                                 algo, ws, n, zero, g.w, w.raw_data()),
              "cudnnConvolutionBackwardFilter");
        break;
    }
  });
  return true;
}

}  // namespace

void set_cudnn_enabled(bool enabled) {
  g_cudnn_enabled.store(enabled, std::memory_order_relaxed);
}

bool cudnn_enabled() {
  return g_cudnn_enabled.load(std::memory_order_relaxed);
}

std::string cudnn_unavailable_reason(int device) {
  if (!cudnn_enabled()) return "cuDNN is off (kiln::cuda::set_cudnn_enabled(false))";
  std::string why;
  return handle_for(device, &why) ? "" : why;
}

bool cudnn_conv2d(const Tensor& x, const Tensor& w, const Tensor& out, const ops::Conv2dAttrs& a) {
  return convolve(Pass::Forward, x, w, out, a);
}

bool cudnn_conv2d_input_grad(const Tensor& grad, const Tensor& w, const Tensor& gx,
                             const ops::Conv2dAttrs& a) {
  return convolve(Pass::InputGrad, gx, w, grad, a);
}

bool cudnn_conv2d_weight_grad(const Tensor& grad, const Tensor& x, const Tensor& gw,
                              const ops::Conv2dAttrs& a) {
  return convolve(Pass::WeightGrad, x, gw, grad, a);
}

}  // namespace kiln::cuda
