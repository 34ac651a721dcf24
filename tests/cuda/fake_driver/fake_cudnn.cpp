// A fake cuDNN: a stand-in for libcudnn that the fake-driver tests load through KILN_CUDNN, so
// that convolutions on CUDA tensors go through kiln's cuDNN path on machines without a GPU. It
// does what kiln asks of cuDNN (kiln/cuda/cudnn.h) with plain loops summed in double: 2-D
// cross-correlation with padding, stride, dilation and groups, forward and both gradients,
// float32 and float64, strided 4-d tensors, on the fake driver's device memory
// (fake_memory.h). Its heuristic offers one algorithm (0) without workspace. Calls run at once,
// or are recorded when their stream captures a CUDA graph (fake_stream.h).
#include <cstddef>
#include <cstdint>
#include <functional>
#include <type_traits>
#include <vector>

#include "fake_memory.h"
#include "fake_stream.h"
#include "kiln/cuda/cudnn.h"

using namespace kiln::cuda::cudnn;
using kiln::cuda::fake::host_address;

namespace {

constexpr Status kBadParam = 2000;

}  // namespace

// The handles behind cudnn.h's opaque types.
struct kiln::cuda::cudnn::cudnnContext {
  void* stream = nullptr;
};
struct kiln::cuda::cudnn::cudnnTensorStruct {
  int type = -1;
  int64_t size[4] = {}, stride[4] = {};
};
struct kiln::cuda::cudnn::cudnnFilterStruct {
  int type = -1;
  int64_t size[4] = {};  // [OC, C/G, kh, kw], dense
};
struct kiln::cuda::cudnn::cudnnConvolutionStruct {
  int64_t pad[2] = {}, stride[2] = {1, 1}, dilation[2] = {1, 1};
  int64_t groups = 1;
  int mode = -1, type = -1;
};

namespace {

// The geometry of one call, read off its descriptors.
struct Conv {
  cudnnTensorStruct x, y;
  cudnnFilterStruct w;
  cudnnConvolutionStruct c;
  bool valid() const {
    const int64_t G = c.groups;
    return c.mode == kCrossCorrelation && x.type == y.type && x.type == w.type && x.type == c.type &&
           (x.type == kFloat || x.type == kDouble) && G >= 1 && x.size[1] == w.size[1] * G &&
           w.size[0] % G == 0 && y.size[0] == x.size[0] && y.size[1] == w.size[0];
  }
  // The offset of x element (n, ch, h, w), of y element (n, o, oh, ow), of w element.
  int64_t xi(int64_t n, int64_t ch, int64_t h, int64_t w_) const {
    return n * x.stride[0] + ch * x.stride[1] + h * x.stride[2] + w_ * x.stride[3];
  }
  int64_t yi(int64_t n, int64_t o, int64_t oh, int64_t ow) const {
    return n * y.stride[0] + o * y.stride[1] + oh * y.stride[2] + ow * y.stride[3];
  }
  int64_t wi(int64_t o, int64_t c_, int64_t i, int64_t j) const {
    return ((o * w.size[1] + c_) * w.size[2] + i) * w.size[3] + j;
  }
  // Calls f(n, o, oh, ow, ch, c, i, j, h, w) for every tap that reads an input element.
  template <class F>
  void each_tap(F&& f) const {
    const int64_t N = x.size[0], OC = w.size[0], Cg = w.size[1], kh = w.size[2], kw = w.size[3];
    const int64_t OCg = OC / c.groups;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t o = 0; o < OC; ++o)
        for (int64_t oh = 0; oh < y.size[2]; ++oh)
          for (int64_t ow = 0; ow < y.size[3]; ++ow)
            for (int64_t ci = 0; ci < Cg; ++ci)
              for (int64_t i = 0; i < kh; ++i)
                for (int64_t j = 0; j < kw; ++j) {
                  const int64_t h = oh * c.stride[0] - c.pad[0] + i * c.dilation[0];
                  const int64_t w_ = ow * c.stride[1] - c.pad[1] + j * c.dilation[1];
                  if (h < 0 || h >= x.size[2] || w_ < 0 || w_ >= x.size[3]) continue;
                  f(n, o, oh, ow, (o / OCg) * Cg + ci, ci, i, j, h, w_);
                }
  }
};

double scalar(const void* p, int type) {
  return type == kDouble ? *static_cast<const double*>(p) : *static_cast<const float*>(p);
}

// out = alpha * sums + beta * out over `count` elements at `index(k)`.
template <class T>
void store(T* out, const std::vector<double>& sums, double alpha, double beta,
           const std::function<int64_t(size_t)>& index) {
  for (size_t k = 0; k < sums.size(); ++k) {
    T& o = out[index(k)];
    o = static_cast<T>(alpha * sums[k] + (beta != 0 ? beta * static_cast<double>(o) : 0.0));
  }
}

enum class Pass { Forward, Data, Filter };

template <class T>
void convolve(Pass pass, const Conv& g, const void* a_dev, const void* b_dev, void* out_dev,
              double alpha, double beta) {
  const int64_t N = g.x.size[0], C = g.x.size[1], H = g.x.size[2], W = g.x.size[3];
  const int64_t OC = g.w.size[0], OH = g.y.size[2], OW = g.y.size[3];
  if (pass == Pass::Forward) {  // a: x, b: w, out: y
    const T* x = host_address<const T>(a_dev);
    const T* w = host_address<const T>(b_dev);
    std::vector<double> sums(static_cast<size_t>(N * OC * OH * OW));
    g.each_tap([&](int64_t n, int64_t o, int64_t oh, int64_t ow, int64_t ch, int64_t ci, int64_t i,
                   int64_t j, int64_t h, int64_t w_) {
      sums[static_cast<size_t>(((n * OC + o) * OH + oh) * OW + ow)] +=
          static_cast<double>(x[g.xi(n, ch, h, w_)]) * static_cast<double>(w[g.wi(o, ci, i, j)]);
    });
    store(host_address<T>(out_dev), sums, alpha, beta, [&](size_t k) {
      const int64_t e = static_cast<int64_t>(k);
      return g.yi(e / (OC * OH * OW), (e / (OH * OW)) % OC, (e / OW) % OH, e % OW);
    });
  } else if (pass == Pass::Data) {  // a: w, b: dy, out: dx
    const T* w = host_address<const T>(a_dev);
    const T* dy = host_address<const T>(b_dev);
    std::vector<double> sums(static_cast<size_t>(N * C * H * W));
    g.each_tap([&](int64_t n, int64_t o, int64_t oh, int64_t ow, int64_t ch, int64_t ci, int64_t i,
                   int64_t j, int64_t h, int64_t w_) {
      sums[static_cast<size_t>(((n * C + ch) * H + h) * W + w_)] +=
          static_cast<double>(dy[g.yi(n, o, oh, ow)]) * static_cast<double>(w[g.wi(o, ci, i, j)]);
    });
    store(host_address<T>(out_dev), sums, alpha, beta, [&](size_t k) {
      const int64_t e = static_cast<int64_t>(k);
      return g.xi(e / (C * H * W), (e / (H * W)) % C, (e / W) % H, e % W);
    });
  } else {  // a: x, b: dy, out: dw
    const T* x = host_address<const T>(a_dev);
    const T* dy = host_address<const T>(b_dev);
    std::vector<double> sums(static_cast<size_t>(OC * g.w.size[1] * g.w.size[2] * g.w.size[3]));
    g.each_tap([&](int64_t n, int64_t o, int64_t oh, int64_t ow, int64_t ch, int64_t ci, int64_t i,
                   int64_t j, int64_t h, int64_t w_) {
      sums[static_cast<size_t>(g.wi(o, ci, i, j))] +=
          static_cast<double>(dy[g.yi(n, o, oh, ow)]) * static_cast<double>(x[g.xi(n, ch, h, w_)]);
    });
    store(host_address<T>(out_dev), sums, alpha, beta, [](size_t k) { return static_cast<int64_t>(k); });
  }
}

Status run(Pass pass, cudnnContext* handle, const Conv& g, const void* alpha, const void* beta,
           const void* a, const void* b, void* out) {
  if (!handle || !g.valid() || !alpha || !beta) return kBadParam;
  const double alpha_value = scalar(alpha, g.x.type), beta_value = scalar(beta, g.x.type);
  const bool wide = g.x.type == kDouble;
  kiln::cuda::fake::on_stream(handle->stream, [=] {
    if (wide)
      convolve<double>(pass, g, a, b, out, alpha_value, beta_value);
    else
      convolve<float>(pass, g, a, b, out, alpha_value, beta_value);
  });
  return kSuccess;
}

Status one_algorithm(const Conv& g, int requested, int* returned, AlgoPerf* results) {
  if (!returned || !results || requested < 1) return kBadParam;
  if (!g.valid()) return kNotSupported;
  results[0] = AlgoPerf{};
  *returned = 1;
  return kSuccess;
}

}  // namespace

#define KILN_FAKE_EXPORT extern "C" __attribute__((visibility("default")))

KILN_FAKE_EXPORT size_t cudnnGetVersion() { return 91900; }
KILN_FAKE_EXPORT const char* cudnnGetErrorString(Status s) {
  switch (s) {
    case kSuccess: return "CUDNN_STATUS_SUCCESS";
    case kBadParam: return "CUDNN_STATUS_BAD_PARAM";
    case kNotSupported: return "CUDNN_STATUS_NOT_SUPPORTED";
    default: return "CUDNN_STATUS_INTERNAL_ERROR";
  }
}
KILN_FAKE_EXPORT Status cudnnCreate(Handle* h) {
  if (!h) return kBadParam;
  *h = new cudnnContext;
  return kSuccess;
}
KILN_FAKE_EXPORT Status cudnnDestroy(Handle h) {
  delete h;
  return kSuccess;
}
KILN_FAKE_EXPORT Status cudnnSetStream(Handle h, Stream s) {
  if (!h) return kBadParam;
  h->stream = s;
  return kSuccess;
}
KILN_FAKE_EXPORT Status cudnnCreateTensorDescriptor(TensorDesc* d) {
  if (!d) return kBadParam;
  *d = new cudnnTensorStruct;
  return kSuccess;
}
KILN_FAKE_EXPORT Status cudnnDestroyTensorDescriptor(TensorDesc d) {
  delete d;
  return kSuccess;
}
KILN_FAKE_EXPORT Status cudnnSetTensorNdDescriptor(TensorDesc d, int type, int dims, const int* sizes,
                                                   const int* strides) {
  if (!d || dims != 4 || !sizes || !strides) return kBadParam;
  d->type = type;
  for (int i = 0; i < 4; ++i) {
    if (sizes[i] <= 0 || strides[i] <= 0) return kBadParam;  // as cuDNN: no empty tensors
    d->size[i] = sizes[i];
    d->stride[i] = strides[i];
  }
  return kSuccess;
}
KILN_FAKE_EXPORT Status cudnnCreateFilterDescriptor(FilterDesc* d) {
  if (!d) return kBadParam;
  *d = new cudnnFilterStruct;
  return kSuccess;
}
KILN_FAKE_EXPORT Status cudnnDestroyFilterDescriptor(FilterDesc d) {
  delete d;
  return kSuccess;
}
KILN_FAKE_EXPORT Status cudnnSetFilterNdDescriptor(FilterDesc d, int type, int format, int dims,
                                                   const int* sizes) {
  if (!d || format != kNCHW || dims != 4 || !sizes) return kBadParam;
  d->type = type;
  for (int i = 0; i < 4; ++i) {
    if (sizes[i] <= 0) return kBadParam;
    d->size[i] = sizes[i];
  }
  return kSuccess;
}
KILN_FAKE_EXPORT Status cudnnCreateConvolutionDescriptor(ConvDesc* d) {
  if (!d) return kBadParam;
  *d = new cudnnConvolutionStruct;
  return kSuccess;
}
KILN_FAKE_EXPORT Status cudnnDestroyConvolutionDescriptor(ConvDesc d) {
  delete d;
  return kSuccess;
}
KILN_FAKE_EXPORT Status cudnnSetConvolution2dDescriptor(ConvDesc d, int pad_h, int pad_w, int stride_h,
                                                        int stride_w, int dilation_h, int dilation_w,
                                                        int mode, int type) {
  if (!d || pad_h < 0 || pad_w < 0 || stride_h < 1 || stride_w < 1 || dilation_h < 1 || dilation_w < 1)
    return kBadParam;
  d->pad[0] = pad_h, d->pad[1] = pad_w;
  d->stride[0] = stride_h, d->stride[1] = stride_w;
  d->dilation[0] = dilation_h, d->dilation[1] = dilation_w;
  d->mode = mode, d->type = type;
  return kSuccess;
}
KILN_FAKE_EXPORT Status cudnnSetConvolutionGroupCount(ConvDesc d, int groups) {
  if (!d || groups < 1) return kBadParam;
  d->groups = groups;
  return kSuccess;
}
KILN_FAKE_EXPORT Status cudnnSetConvolutionMathType(ConvDesc d, int math) {
  return d && (math == kDefaultMath || math == kFmaMath || math == 1 || math == 2) ? kSuccess : kBadParam;
}

// The heuristics and workspace queries: x/dy/dx are tensors, w/dw the filter.
KILN_FAKE_EXPORT Status cudnnGetConvolutionForwardAlgorithm_v7(Handle h, TensorDesc x, FilterDesc w, ConvDesc c,
                                                               TensorDesc y, int requested, int* returned,
                                                               AlgoPerf* results) {
  if (!h || !x || !w || !c || !y) return kBadParam;
  return one_algorithm(Conv{*x, *y, *w, *c}, requested, returned, results);
}
KILN_FAKE_EXPORT Status cudnnGetConvolutionBackwardDataAlgorithm_v7(Handle h, FilterDesc w, TensorDesc dy,
                                                                    ConvDesc c, TensorDesc dx, int requested,
                                                                    int* returned, AlgoPerf* results) {
  if (!h || !w || !dy || !c || !dx) return kBadParam;
  return one_algorithm(Conv{*dx, *dy, *w, *c}, requested, returned, results);
}
KILN_FAKE_EXPORT Status cudnnGetConvolutionBackwardFilterAlgorithm_v7(Handle h, TensorDesc x, TensorDesc dy,
                                                                      ConvDesc c, FilterDesc dw, int requested,
                                                                      int* returned, AlgoPerf* results) {
  if (!h || !x || !dy || !c || !dw) return kBadParam;
  return one_algorithm(Conv{*x, *dy, *dw, *c}, requested, returned, results);
}
KILN_FAKE_EXPORT Status cudnnGetConvolutionForwardWorkspaceSize(Handle, TensorDesc, FilterDesc, ConvDesc,
                                                                TensorDesc, int algo, size_t* bytes) {
  if (!bytes || algo != 0) return kBadParam;
  *bytes = 0;
  return kSuccess;
}
KILN_FAKE_EXPORT Status cudnnGetConvolutionBackwardDataWorkspaceSize(Handle, FilterDesc, TensorDesc, ConvDesc,
                                                                     TensorDesc, int algo, size_t* bytes) {
  if (!bytes || algo != 0) return kBadParam;
  *bytes = 0;
  return kSuccess;
}
KILN_FAKE_EXPORT Status cudnnGetConvolutionBackwardFilterWorkspaceSize(Handle, TensorDesc, TensorDesc, ConvDesc,
                                                                       FilterDesc, int algo, size_t* bytes) {
  if (!bytes || algo != 0) return kBadParam;
  *bytes = 0;
  return kSuccess;
}

// The convolutions.
KILN_FAKE_EXPORT Status cudnnConvolutionForward(Handle h, const void* alpha, TensorDesc xd, const void* x,
                                                FilterDesc wd, const void* w, ConvDesc c, int algo, void*, size_t,
                                                const void* beta, TensorDesc yd, void* y) {
  if (!xd || !wd || !c || !yd || algo != 0) return kBadParam;
  return run(Pass::Forward, h, Conv{*xd, *yd, *wd, *c}, alpha, beta, x, w, y);
}
KILN_FAKE_EXPORT Status cudnnConvolutionBackwardData(Handle h, const void* alpha, FilterDesc wd, const void* w,
                                                     TensorDesc dyd, const void* dy, ConvDesc c, int algo, void*,
                                                     size_t, const void* beta, TensorDesc dxd, void* dx) {
  if (!wd || !dyd || !c || !dxd || algo != 0) return kBadParam;
  return run(Pass::Data, h, Conv{*dxd, *dyd, *wd, *c}, alpha, beta, w, dy, dx);
}
KILN_FAKE_EXPORT Status cudnnConvolutionBackwardFilter(Handle h, const void* alpha, TensorDesc xd, const void* x,
                                                       TensorDesc dyd, const void* dy, ConvDesc c, int algo, void*,
                                                       size_t, const void* beta, FilterDesc dwd, void* dw) {
  if (!xd || !dyd || !c || !dwd || algo != 0) return kBadParam;
  return run(Pass::Filter, h, Conv{*xd, *dyd, *dwd, *c}, alpha, beta, x, dy, dw);
}

// Every entry point has exactly the signature kiln resolves it with (cudnn.h's Api).
// clang-format off
#define KILN_FAKE_SAME(name) static_assert(std::is_same_v<decltype(&name), decltype(Api::name)>, #name)
KILN_FAKE_SAME(cudnnGetVersion); KILN_FAKE_SAME(cudnnGetErrorString); KILN_FAKE_SAME(cudnnCreate);
KILN_FAKE_SAME(cudnnDestroy); KILN_FAKE_SAME(cudnnSetStream); KILN_FAKE_SAME(cudnnCreateTensorDescriptor);
KILN_FAKE_SAME(cudnnDestroyTensorDescriptor); KILN_FAKE_SAME(cudnnSetTensorNdDescriptor);
KILN_FAKE_SAME(cudnnCreateFilterDescriptor); KILN_FAKE_SAME(cudnnDestroyFilterDescriptor);
KILN_FAKE_SAME(cudnnSetFilterNdDescriptor); KILN_FAKE_SAME(cudnnCreateConvolutionDescriptor);
KILN_FAKE_SAME(cudnnDestroyConvolutionDescriptor); KILN_FAKE_SAME(cudnnSetConvolution2dDescriptor);
KILN_FAKE_SAME(cudnnSetConvolutionGroupCount); KILN_FAKE_SAME(cudnnSetConvolutionMathType);
KILN_FAKE_SAME(cudnnGetConvolutionForwardAlgorithm_v7); KILN_FAKE_SAME(cudnnGetConvolutionForwardWorkspaceSize);
KILN_FAKE_SAME(cudnnConvolutionForward); KILN_FAKE_SAME(cudnnGetConvolutionBackwardDataAlgorithm_v7);
KILN_FAKE_SAME(cudnnGetConvolutionBackwardDataWorkspaceSize); KILN_FAKE_SAME(cudnnConvolutionBackwardData);
KILN_FAKE_SAME(cudnnGetConvolutionBackwardFilterAlgorithm_v7);
KILN_FAKE_SAME(cudnnGetConvolutionBackwardFilterWorkspaceSize); KILN_FAKE_SAME(cudnnConvolutionBackwardFilter);
#undef KILN_FAKE_SAME
// clang-format on
