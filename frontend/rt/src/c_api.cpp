// The C ABI of kiln_rt (kiln_rt.h): handles over rt::LoadedModel, exceptions turned into NULL
// plus a per-thread message.
#include <exception>
#include <new>
#include <string>
#include <vector>

#include "kiln/cuda/device.h"
#include "kiln/dtype.h"
#include "kiln/thread_pool.h"
#include "kiln_rt.h"
#include "loaded_model.h"

static_assert(KILN_RT_BOOL == static_cast<int>(kiln::DType::Bool) &&
                  KILN_RT_INT32 == static_cast<int>(kiln::DType::Int32) &&
                  KILN_RT_INT64 == static_cast<int>(kiln::DType::Int64) &&
                  KILN_RT_FLOAT16 == static_cast<int>(kiln::DType::Float16) &&
                  KILN_RT_BFLOAT16 == static_cast<int>(kiln::DType::BFloat16) &&
                  KILN_RT_FLOAT32 == static_cast<int>(kiln::DType::Float32) &&
                  KILN_RT_FLOAT64 == static_cast<int>(kiln::DType::Float64),
              "kiln_rt_dtype mirrors kiln::DType");

struct kiln_rt_model {
  kiln::rt::LoadedModel model;
  explicit kiln_rt_model(const std::string& dir) : model(dir) {}
};

struct kiln_rt_outputs {
  std::vector<kiln::Tensor> tensors;
  std::vector<std::vector<int64_t>> shapes;
  std::vector<kiln_rt_tensor> views;
};

namespace {

thread_local std::string last_error;

// Runs `body`; on an exception records its message and returns `failed`.
template <class T, class F>
T guarded(T failed, F&& body) {
  try {
    last_error.clear();
    return body();
  } catch (const std::bad_alloc&) {
    last_error = "[kiln_rt] out of memory.";
  } catch (const std::exception& e) {
    last_error = e.what();
  } catch (...) {
    last_error = "[kiln_rt] unknown failure.";
  }
  return failed;
}

// The caller's inputs as tensors over their memory: host memory for kiln_rt_run
// (`on_device` false), GPU 0's for kiln_rt_run_on_device. `who` names the entry point.
std::vector<kiln::Tensor> wrap_inputs(const kiln_rt_model& model, const kiln_rt_tensor* inputs,
                                      size_t input_count, bool on_device, const char* who) {
  KILN_CHECK(inputs != nullptr || input_count == 0, "[kiln_rt] ", who,
             ": expected an array of inputs, got NULL.");
  const kiln::Device gpu = model.model.device();
  std::vector<kiln::Tensor> tensors;
  for (size_t i = 0; i < input_count; ++i) {
    const kiln_rt_tensor& t = inputs[i];
    KILN_CHECK(
        t.dtype >= KILN_RT_BOOL && t.dtype <= KILN_RT_FLOAT64 && t.rank >= 0 && t.rank <= 64 &&
            (t.rank == 0 || t.shape != nullptr),
        "[kiln_rt] ", who, ": input ", i, " is malformed (dtype ", t.dtype, ", rank ", t.rank,
        "). Fix: fill kiln_rt_tensor with a kiln_rt_dtype value, the rank and rank sizes.");
    std::vector<int64_t> shape(t.shape, t.shape + t.rank);
    int64_t elements = 1;
    for (int64_t d : shape) {
      KILN_CHECK(d >= 0, "[kiln_rt] ", who, ": input ", i, " has a negative size ", d, ".");
      elements = kiln::size_mul(elements, d, "[kiln_rt] an input's element count");
    }
    KILN_CHECK(t.data != nullptr || elements == 0, "[kiln_rt] ", who, ": input ", i,
               " has no data (NULL). Fix: point kiln_rt_tensor.data at the elements.");
    // A GPU model asks the driver where the data lives: a device pointer read as host memory
    // (or the reverse) would crash or read garbage.
    if (gpu.is_cuda() && elements > 0) {
      const int device = kiln::cuda::device_of_pointer(t.data);
      if (on_device)
        KILN_CHECK(device == gpu.index, "[kiln_rt] ", who, ": input ", i, "'s data is ",
                   device < 0 ? std::string("host memory") : "memory of cuda:" + std::to_string(device),
                   ", expected memory of ", gpu,
                   ". Fix: pass a device pointer on that GPU, or host data to kiln_rt_run.");
      else
        KILN_CHECK(device < 0, "[kiln_rt] ", who, ": input ", i, "'s data is memory of cuda:",
                   device, ", expected host memory. Fix: pass device pointers to "
                   "kiln_rt_run_on_device, or copy the data to the host.");
    }
    tensors.push_back(kiln::Tensor::from_blob(
        t.data, kiln::IntList(shape.data(), shape.size()), static_cast<kiln::DType>(t.dtype), {},
        {}, on_device ? gpu : kiln::kCPU));
  }
  return tensors;
}

// Outputs handed to the caller: the tensors, and views of them in the C layout.
kiln_rt_outputs* make_outputs(std::vector<kiln::Tensor> tensors) {
  auto out = std::make_unique<kiln_rt_outputs>();
  out->tensors = std::move(tensors);
  for (const kiln::Tensor& t : out->tensors)
    out->shapes.emplace_back(t.sizes().begin(), t.sizes().end());
  for (size_t i = 0; i < out->tensors.size(); ++i) {
    const kiln::Tensor& t = out->tensors[i];
    out->views.push_back({t.raw_data(), static_cast<kiln_rt_dtype>(t.dtype()),
                          static_cast<int32_t>(t.dim()), out->shapes[i].data()});
  }
  return out.release();
}

}  // namespace

extern "C" {

kiln_rt_model* kiln_rt_load(const char* dir) {
  return guarded<kiln_rt_model*>(nullptr, [&] {
    KILN_CHECK(dir != nullptr, "[kiln_rt] kiln_rt_load: expected a directory, got NULL.");
    return new kiln_rt_model(dir);
  });
}

void kiln_rt_free(kiln_rt_model* model) {
  delete model;
}

kiln_rt_outputs* kiln_rt_run(kiln_rt_model* model, const kiln_rt_tensor* inputs,
                             size_t input_count) {
  return guarded<kiln_rt_outputs*>(nullptr, [&] {
    KILN_CHECK(model != nullptr, "[kiln_rt] kiln_rt_run: expected a model, got NULL.");
    return make_outputs(
        model->model.run(wrap_inputs(*model, inputs, input_count, false, "kiln_rt_run")));
  });
}

kiln_rt_outputs* kiln_rt_run_on_device(kiln_rt_model* model, const kiln_rt_tensor* inputs,
                                       size_t input_count, void* stream) {
  return guarded<kiln_rt_outputs*>(nullptr, [&] {
    const char* who = "kiln_rt_run_on_device";
    KILN_CHECK(model != nullptr, "[kiln_rt] ", who, ": expected a model, got NULL.");
    return make_outputs(model->model.run_on_device(
        wrap_inputs(*model, inputs, input_count, true, who), stream));
  });
}

const char* kiln_rt_device(const kiln_rt_model* model) {
  if (!model) return nullptr;
  return model->model.device().is_cuda() ? "cuda" : "cpu";
}

size_t kiln_rt_outputs_count(const kiln_rt_outputs* outputs) {
  return outputs ? outputs->views.size() : 0;
}

const kiln_rt_tensor* kiln_rt_outputs_get(const kiln_rt_outputs* outputs, size_t index) {
  return outputs && index < outputs->views.size() ? &outputs->views[index] : nullptr;
}

void kiln_rt_outputs_free(kiln_rt_outputs* outputs) {
  delete outputs;
}

const char* kiln_rt_last_error(void) {
  return last_error.c_str();
}

size_t kiln_rt_input_count(const kiln_rt_model* model) {
  return model ? model->model.manifest().inputs.size() : 0;
}

size_t kiln_rt_output_count(const kiln_rt_model* model) {
  return model ? model->model.manifest().outputs.size() : 0;
}

const char* kiln_rt_input_name(const kiln_rt_model* model, size_t index) {
  if (!model || index >= model->model.manifest().inputs.size()) return nullptr;
  return model->model.manifest().inputs[index].name.c_str();
}

const char* kiln_rt_input_signature(const kiln_rt_model* model, size_t index) {
  if (!model || index >= model->model.input_signatures().size()) return nullptr;
  return model->model.input_signatures()[index].c_str();
}

const char* kiln_rt_output_name(const kiln_rt_model* model, size_t index) {
  if (!model || index >= model->model.manifest().outputs.size()) return nullptr;
  return model->model.manifest().outputs[index].name.c_str();
}

const char* kiln_rt_output_signature(const kiln_rt_model* model, size_t index) {
  if (!model || index >= model->model.output_signatures().size()) return nullptr;
  return model->model.output_signatures()[index].c_str();
}

const char* kiln_rt_manifest(const kiln_rt_model* model) {
  return model ? model->model.manifest_text().c_str() : nullptr;
}

int kiln_rt_set_num_threads(int n) {
  return guarded<int>(-1, [&] {
    KILN_CHECK(n >= 1, "[kiln_rt] kiln_rt_set_num_threads: expected at least 1 thread, got ", n,
               ".");
    kiln::set_num_threads(n);
    return 0;
  });
}

int kiln_rt_num_threads(void) {
  return kiln::num_threads();
}

const char* kiln_rt_version(void) {
  return KILN_RT_VERSION;
}

}  // extern "C"
