// Helpers for the export tests: scratch directories, files to damage, and kiln_rt results
// as tensors for comparison with eager and compiled results.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/kiln.h"
#include "kiln_rt.hpp"

namespace kiln::export_test {

namespace fs = std::filesystem;

// A directory under ::testing::TempDir() named after the test and this process (so tests
// and concurrent runs never share one), absent on construction, removed on destruction.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& name) {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string test = info ? std::string(info->test_suite_name()) + "." + info->name() : "suite";
    base_ = fs::path(::testing::TempDir()) /
            ("kiln_export_" + std::to_string(::getpid()) + "_" + test + "_" + name);
    fs::remove_all(base_);
    fs::create_directories(base_);
  }
  ~ScratchDir() {
    std::error_code ignored;
    fs::remove_all(base_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  // A path inside the scratch directory (not created).
  std::string path(const std::string& name) const { return (base_ / name).string(); }
  const fs::path& base() const { return base_; }

 private:
  fs::path base_;
};

inline std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

inline void write_text(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// The names of the entries of `dir`, sorted.
inline std::vector<std::string> list_dir(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// A kiln_rt output as a tensor (copied, so it outlives the Outputs).
inline Tensor to_tensor(const kiln_rt_tensor& t) {
  std::vector<int64_t> shape(t.shape, t.shape + t.rank);
  return Tensor::from_blob(t.data, shape, static_cast<DType>(t.dtype)).clone();
}

// Runs `model` through kiln_rt on float32 or int64 inputs, as a deployed program would.
inline std::vector<Tensor> run_rt(const kiln_rt::Model& model, const std::vector<Tensor>& inputs) {
  std::vector<kiln_rt::Input> raw;
  for (const Tensor& x : inputs) {
    std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
    raw.push_back({x.raw_data(), static_cast<kiln_rt_dtype>(x.dtype()), shape});
  }
  kiln_rt::Outputs out = model.run(raw);
  std::vector<Tensor> result;
  for (size_t i = 0; i < out.size(); ++i) result.push_back(to_tensor(out[i]));
  return result;
}

// The message kiln_rt gave when loading `dir` failed, or a marker no check will find.
inline std::string load_error(const std::string& dir) {
  try {
    kiln_rt::Model model(dir);
  } catch (const kiln_rt::Error& e) {
    return e.what();
  }
  return "<kiln_rt loaded the artifact>";
}

// Expects `msg` to contain every part.
inline void expect_parts(const std::string& msg, std::initializer_list<std::string_view> parts) {
  for (std::string_view p : parts)
    EXPECT_NE(msg.find(p), std::string::npos) << "missing \"" << p << "\" in: " << msg;
}

}  // namespace kiln::export_test
