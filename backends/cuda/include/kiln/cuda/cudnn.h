// cuDNN, NVIDIA's convolution library, loaded at run time like the driver, NVRTC and
// cuBLASLt: kiln never links it. kiln looks for KILN_CUDNN (a path; "0" turns cuDNN off) when
// set, else libcudnn.so.9 and libcudnn.so through the dynamic loader, else lib64/libcudnn.so
// under $CUDA_HOME, $CUDA_PATH and /usr/local/cuda. Without it, convolutions on GPUs run as
// im2col + cuBLASLt (conv_kernels.h). The types and values below are cuDNN 9's own (its
// convolution API of cudnn_cnn.h and cudnn_ops.h); declaring them keeps the toolkit out of the
// build.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace kiln::cuda::cudnn {

using Status = int;  // cudnnStatus_t
using Handle = struct cudnnContext*;
using TensorDesc = struct cudnnTensorStruct*;
using FilterDesc = struct cudnnFilterStruct*;
using ConvDesc = struct cudnnConvolutionStruct*;
using Stream = struct CUstream_st*;

constexpr Status kSuccess = 0;
// CUDNN_STATUS_NOT_SUPPORTED and its refinements (3000-3999): this configuration has no
// algorithm; kiln then convolves without cuDNN.
constexpr Status kNotSupported = 3000;
inline bool not_supported(Status s) { return s >= 3000 && s < 4000; }

// cudnnDataType_t
constexpr int kFloat = 0, kDouble = 1;
// cudnnTensorFormat_t
constexpr int kNCHW = 0;
// cudnnConvolutionMode_t: kiln's conv2d, as PyTorch's, does not flip the filter.
constexpr int kCrossCorrelation = 1;
// cudnnMathType_t: FMA keeps float32 exact (no TF32 tensor cores); DEFAULT allows TF32.
constexpr int kDefaultMath = 0, kFmaMath = 3;

// cudnnConvolution{Fwd,BwdData,BwdFilter}AlgoPerf_t share this layout.
struct AlgoPerf {
  int algo;
  Status status;
  float time;
  size_t memory;
  int determinism;
  int math_type;
  int reserved[3];
};

// The entry points kiln calls, resolved by name.
struct Api {
  size_t (*cudnnGetVersion)();
  const char* (*cudnnGetErrorString)(Status status);
  Status (*cudnnCreate)(Handle* handle);
  Status (*cudnnDestroy)(Handle handle);
  Status (*cudnnSetStream)(Handle handle, Stream stream);
  Status (*cudnnCreateTensorDescriptor)(TensorDesc* desc);
  Status (*cudnnDestroyTensorDescriptor)(TensorDesc desc);
  Status (*cudnnSetTensorNdDescriptor)(TensorDesc desc, int data_type, int dims, const int* sizes,
                                       const int* strides);
  Status (*cudnnCreateFilterDescriptor)(FilterDesc* desc);
  Status (*cudnnDestroyFilterDescriptor)(FilterDesc desc);
  Status (*cudnnSetFilterNdDescriptor)(FilterDesc desc, int data_type, int format, int dims,
                                       const int* sizes);
  Status (*cudnnCreateConvolutionDescriptor)(ConvDesc* desc);
  Status (*cudnnDestroyConvolutionDescriptor)(ConvDesc desc);
  Status (*cudnnSetConvolution2dDescriptor)(ConvDesc desc, int pad_h, int pad_w, int stride_h,
                                            int stride_w, int dilation_h, int dilation_w,
                                            int mode, int compute_type);
  Status (*cudnnSetConvolutionGroupCount)(ConvDesc desc, int groups);
  Status (*cudnnSetConvolutionMathType)(ConvDesc desc, int math_type);
  Status (*cudnnGetConvolutionForwardAlgorithm_v7)(Handle handle, TensorDesc x, FilterDesc w,
                                                   ConvDesc conv, TensorDesc y, int requested,
                                                   int* returned, AlgoPerf* results);
  Status (*cudnnGetConvolutionForwardWorkspaceSize)(Handle handle, TensorDesc x, FilterDesc w,
                                                    ConvDesc conv, TensorDesc y, int algo,
                                                    size_t* bytes);
  Status (*cudnnConvolutionForward)(Handle handle, const void* alpha, TensorDesc x_desc,
                                    const void* x, FilterDesc w_desc, const void* w,
                                    ConvDesc conv, int algo, void* workspace, size_t workspace_bytes,
                                    const void* beta, TensorDesc y_desc, void* y);
  Status (*cudnnGetConvolutionBackwardDataAlgorithm_v7)(Handle handle, FilterDesc w,
                                                        TensorDesc dy, ConvDesc conv,
                                                        TensorDesc dx, int requested,
                                                        int* returned, AlgoPerf* results);
  Status (*cudnnGetConvolutionBackwardDataWorkspaceSize)(Handle handle, FilterDesc w,
                                                         TensorDesc dy, ConvDesc conv,
                                                         TensorDesc dx, int algo, size_t* bytes);
  Status (*cudnnConvolutionBackwardData)(Handle handle, const void* alpha, FilterDesc w_desc,
                                         const void* w, TensorDesc dy_desc, const void* dy,
                                         ConvDesc conv, int algo, void* workspace,
                                         size_t workspace_bytes, const void* beta,
                                         TensorDesc dx_desc, void* dx);
  Status (*cudnnGetConvolutionBackwardFilterAlgorithm_v7)(Handle handle, TensorDesc x,
                                                          TensorDesc dy, ConvDesc conv,
                                                          FilterDesc dw, int requested,
                                                          int* returned, AlgoPerf* results);
  Status (*cudnnGetConvolutionBackwardFilterWorkspaceSize)(Handle handle, TensorDesc x,
                                                           TensorDesc dy, ConvDesc conv,
                                                           FilterDesc dw, int algo, size_t* bytes);
  Status (*cudnnConvolutionBackwardFilter)(Handle handle, const void* alpha, TensorDesc x_desc,
                                           const void* x, TensorDesc dy_desc, const void* dy,
                                           ConvDesc conv, int algo, void* workspace,
                                           size_t workspace_bytes, const void* beta,
                                           FilterDesc dw_desc, void* dw);
};

// The outcome of loading cuDNN: the API, or why not in words a user can act on.
struct Loaded {
  std::unique_ptr<Api> api;  // null when unavailable
  std::string library;
  size_t version = 0;  // cudnnGetVersion: 91900 for 9.19.0
  std::string unavailable_reason;
};

// Opens `explicit_path` alone when not empty ("0": none, cuDNN is off), else searches as above.
// Never throws; each call loads afresh (tests check the reasons with it).
Loaded load(const std::string& explicit_path);
// The process's cuDNN: load(KILN_CUDNN or ""), once, on first use.
const Loaded& loaded();

// "CUDNN_STATUS_NOT_SUPPORTED", or "cudnnStatus_t 3000" when the library cannot name it.
std::string status_name(Status status);

}  // namespace kiln::cuda::cudnn
