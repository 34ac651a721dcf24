// A C++ wrapper over kiln_rt.h (header-only, so it needs nothing of kiln but libkiln_rt.so):
// RAII handles, exceptions instead of NULL.
//
//   kiln_rt::Model model("fashion.kiln");
//   std::vector<float> pixels(batch * 784);
//   kiln_rt::Outputs out = model.run({kiln_rt::Model::input(pixels.data(), {batch, 1, 28, 28})});
//   const float* logits = out.data<float>(0);
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kiln_rt.h"

namespace kiln_rt {

// What kiln_rt_last_error() said.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// An input: borrowed data and its shape (kept here, so a braced list of sizes is enough).
struct Input {
  const void* data = nullptr;
  kiln_rt_dtype dtype = KILN_RT_FLOAT32;
  std::vector<int64_t> shape;
};

class Outputs {
 public:
  explicit Outputs(kiln_rt_outputs* handle) : handle_(handle, kiln_rt_outputs_free) {}
  size_t size() const { return kiln_rt_outputs_count(handle_.get()); }
  const kiln_rt_tensor& operator[](size_t i) const {
    const kiln_rt_tensor* t = kiln_rt_outputs_get(handle_.get(), i);
    if (!t) throw Error("kiln_rt: output " + std::to_string(i) + " out of range");
    return *t;
  }
  template <class T>
  const T* data(size_t i) const {
    return static_cast<const T*>((*this)[i].data);
  }
  std::vector<int64_t> shape(size_t i) const {
    const kiln_rt_tensor& t = (*this)[i];
    return std::vector<int64_t>(t.shape, t.shape + t.rank);
  }

 private:
  std::unique_ptr<kiln_rt_outputs, void (*)(kiln_rt_outputs*)> handle_;
};

// kiln_rt_set_num_threads: the threads each run's kernels use (while no run is in progress).
inline void set_num_threads(int n) {
  if (kiln_rt_set_num_threads(n) != 0) throw Error(kiln_rt_last_error());
}
inline int num_threads() {
  return kiln_rt_num_threads();
}

class Model {
 public:
  explicit Model(const std::string& dir) : handle_(kiln_rt_load(dir.c_str()), kiln_rt_free) {
    if (!handle_) throw Error(kiln_rt_last_error());
  }

  static Input input(const float* data, std::vector<int64_t> shape) {
    return {data, KILN_RT_FLOAT32, std::move(shape)};
  }
  static Input input(const int64_t* data, std::vector<int64_t> shape) {
    return {data, KILN_RT_INT64, std::move(shape)};
  }

  // Thread-safe: one Model may run on several threads at once.
  Outputs run(const std::vector<Input>& inputs) const {
    std::vector<kiln_rt_tensor> raw = c_inputs(inputs);
    kiln_rt_outputs* out = kiln_rt_run(handle_.get(), raw.data(), raw.size());
    if (!out) throw Error(kiln_rt_last_error());
    return Outputs(out);
  }

  // kiln_rt_run_on_device: a GPU model on device pointers; returns once the work is queued
  // on `stream` (a CUstream or cudaStream_t; null: the default stream).
  Outputs run_on_device(const std::vector<Input>& inputs, void* stream = nullptr) const {
    std::vector<kiln_rt_tensor> raw = c_inputs(inputs);
    kiln_rt_outputs* out = kiln_rt_run_on_device(handle_.get(), raw.data(), raw.size(), stream);
    if (!out) throw Error(kiln_rt_last_error());
    return Outputs(out);
  }
  // "cpu" or "cuda".
  std::string device() const { return kiln_rt_device(handle_.get()); }

  size_t input_count() const { return kiln_rt_input_count(handle_.get()); }
  size_t output_count() const { return kiln_rt_output_count(handle_.get()); }
  std::string input_name(size_t i) const { return checked(kiln_rt_input_name(handle_.get(), i)); }
  std::string input_signature(size_t i) const {
    return checked(kiln_rt_input_signature(handle_.get(), i));
  }
  std::string output_name(size_t i) const { return checked(kiln_rt_output_name(handle_.get(), i)); }
  std::string output_signature(size_t i) const {
    return checked(kiln_rt_output_signature(handle_.get(), i));
  }
  std::string manifest() const { return kiln_rt_manifest(handle_.get()); }

 private:
  static std::vector<kiln_rt_tensor> c_inputs(const std::vector<Input>& inputs) {
    std::vector<kiln_rt_tensor> raw;
    for (const Input& in : inputs)
      raw.push_back({const_cast<void*>(in.data), in.dtype, static_cast<int32_t>(in.shape.size()),
                     in.shape.data()});
    return raw;
  }
  static std::string checked(const char* s) {
    if (!s) throw Error("kiln_rt: index out of range");
    return s;
  }
  std::unique_ptr<kiln_rt_model, void (*)(kiln_rt_model*)> handle_;
};

}  // namespace kiln_rt
