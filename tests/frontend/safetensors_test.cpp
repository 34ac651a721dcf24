// Tests for the safetensors reader and writer: round trips of every dtype, the exact bytes
// of a small file, interop with files of the Python package, every rejection of a corrupt
// or hostile file, and the atomicity of writes.
#include "kiln/serialize/safetensors.h"

#include <gtest/gtest.h>

#include "test_util.h"
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "kiln/kiln.h"
#include "kiln/serialize/json.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

#define EXPECT_HAS(haystack, needle) \
  EXPECT_NE((haystack).find(needle), std::string::npos) << (haystack)

// The bytes of a contiguous copy of `t`, row-major.
Bytes bytes_of(const Tensor& t) {
  Tensor c = t.contiguous();
  Bytes out(c.nbytes());
  if (!out.empty()) std::memcpy(out.data(), c.raw_data(), out.size());
  return out;
}

void append_le64(Bytes& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

// A file: the 8-byte length (of `header`, or `length` when given), the header, the data.
Bytes file_bytes(const std::string& header, const Bytes& data = {},
                 std::optional<uint64_t> length = std::nullopt) {
  Bytes out;
  append_le64(out, length.value_or(header.size()));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

Bytes read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

std::string test_data(const std::string& rel) {
  const char* dir = std::getenv("KILN_TEST_DATA");
  return std::string(dir ? dir : "tests/data") + "/" + rel;
}

class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static std::atomic<int> counter{0};
    dir_ = fs::temp_directory_path() /
           ("kiln_safetensors_test_" + std::to_string(getpid()) + "_" + std::to_string(counter++));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::string write(const std::string& name, const Bytes& bytes) {
    std::string p = path(name);
    std::ofstream f(p, std::ios::binary);
    f.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
    return p;
  }
  // Names in the directory (temp files included).
  std::vector<std::string> listing() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_))
      names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }
  // Writes `bytes` and expects load_safetensors to fail naming the file and `fragment`.
  void expect_rejected(const Bytes& bytes, const std::string& fragment) {
    std::string p = write("hostile.safetensors", bytes);
    std::string msg = error_of([&] { load_safetensors(p); });
    EXPECT_HAS(msg, fragment);
    EXPECT_HAS(msg, "[load_safetensors] '" + p + "'");
    // The in-memory reader applies the same checks.
    std::string mem = error_of([&] { load_safetensors_bytes(bytes.data(), bytes.size(), "mem"); });
    EXPECT_HAS(mem, fragment);
  }

  fs::path dir_;
};

// ---- round trips ----

TEST_F(SafetensorsTest, RoundTripsEveryDType) {
  float inf = std::numeric_limits<float>::infinity();
  NamedTensors tensors = {
      {"f32", Tensor::from_vector<float>({1.5f, -0.0f, inf, 3e-42f, -7.25f, 1e30f}, {2, 3})},
      {"f64", Tensor::from_vector<double>({M_PI, -1e-310, 1e308}, {3})},
      {"i32",
       Tensor::from_vector<int32_t>({std::numeric_limits<int32_t>::min(), -1, 0, 42}, {4, 1})},
      {"i64", Tensor::from_vector<int64_t>({std::numeric_limits<int64_t>::max(), -5}, {2})},
      {"bool", Tensor::from_vector<bool>({true, false, false, true, true}, {5})},
      {"f16",
       Tensor::from_vector<Half>({Half(0.1f), Half(-65504.f), Half(6e-8f), Half(inf)}, {2, 2})},
      {"bf16",
       Tensor::from_vector<BFloat16>({BFloat16(1.0f), BFloat16(-3.14f), BFloat16(1e38f)}, {3})},
  };
  std::string p = path("all.safetensors");
  save_safetensors(p, tensors);
  SafetensorsFile f = load_safetensors(p);
  ASSERT_EQ(f.tensors.size(), tensors.size());
  EXPECT_TRUE(f.metadata.empty());
  for (size_t i = 0; i < tensors.size(); ++i) {
    SCOPED_TRACE(tensors[i].first);
    EXPECT_EQ(f.tensors[i].first, tensors[i].first);  // header order is the caller's order
    const Tensor& got = f.tensors[i].second;
    EXPECT_EQ(got.dtype(), tensors[i].second.dtype());
    EXPECT_EQ(got.shape(), tensors[i].second.shape());
    EXPECT_TRUE(got.is_contiguous());
    EXPECT_EQ(bytes_of(got), bytes_of(tensors[i].second));  // bit-exact, NaN/inf/-0 included
  }
  EXPECT_EQ(f.find("bool")->to_vector<bool>(), (std::vector<bool>{true, false, false, true, true}));
  EXPECT_EQ(f.find("nope"), nullptr);
  // A NaN payload survives too (compared as bits above for inf; here explicitly).
  Tensor nan = Tensor::from_vector<float>({std::nanf("")}, {1});
  save_safetensors(p, {{"nan", nan}});
  EXPECT_EQ(bytes_of(load_safetensors(p).tensors[0].second), bytes_of(nan));
}

TEST_F(SafetensorsTest, ZeroDimAndEmptyTensors) {
  NamedTensors tensors = {
      {"scalar", Tensor::scalar(2.5, kFloat64)},
      {"empty", Tensor::empty({0}, kFloat32)},
      {"empty2d", Tensor::empty({3, 0, 2}, kInt64)},
      {"scalar_bool", Tensor::scalar(true, kBool)},
  };
  std::string p = path("small.safetensors");
  save_safetensors(p, tensors);
  SafetensorsFile f = load_safetensors(p);
  ASSERT_EQ(f.tensors.size(), 4u);
  EXPECT_EQ(f.tensors[0].second.dim(), 0);
  EXPECT_EQ(f.tensors[0].second.item<double>(), 2.5);
  EXPECT_EQ(f.tensors[1].second.shape(), Shape({0}));
  EXPECT_EQ(f.tensors[2].second.shape(), Shape({3, 0, 2}));
  EXPECT_EQ(f.tensors[2].second.dtype(), kInt64);
  EXPECT_EQ(f.tensors[3].second.item<bool>(), true);
  // Only tensors: no file at all holds no tensors and no metadata.
  save_safetensors(p, {});
  SafetensorsFile none = load_safetensors(p);
  EXPECT_TRUE(none.tensors.empty());
  EXPECT_EQ(read_file(p), file_bytes("{}      "));
}

TEST_F(SafetensorsTest, NonContiguousInputsAreStoredContiguous) {
  Tensor base = Tensor::from_vector<float>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {3, 4});
  Tensor transposed = base.t();                                    // [4, 3], strides (1, 4)
  Tensor strided = base.slice(1, 0, 4, 2);                         // [3, 2], every other column
  Tensor expanded = Tensor::scalar(7.0, kFloat64).expand({2, 3});  // stride 0
  Tensor bf = base.to(kBFloat16).t();                              // storage-only dtype, transposed
  ASSERT_FALSE(transposed.is_contiguous());
  ASSERT_FALSE(strided.is_contiguous());
  std::string p = path("views.safetensors");
  save_safetensors(p, {{"t", transposed}, {"s", strided}, {"e", expanded}, {"bf", bf}});
  SafetensorsFile f = load_safetensors(p);
  EXPECT_EQ(f.find("t")->shape(), Shape({4, 3}));
  EXPECT_EQ(f.find("t")->to_vector<float>(), transposed.to_vector<float>());
  EXPECT_EQ(f.find("t")->to_vector<float>(),
            (std::vector<float>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
  EXPECT_EQ(f.find("s")->to_vector<float>(), (std::vector<float>{0, 2, 4, 6, 8, 10}));
  EXPECT_EQ(f.find("e")->to_vector<double>(), std::vector<double>(6, 7.0));
  EXPECT_EQ(bytes_of(*f.find("bf")), bytes_of(bf));
  // A tensor that requires grad is saved by value.
  Tensor w = Tensor::from_vector<float>({1, 2}, {2});
  w.set_requires_grad(true);
  save_safetensors(p, {{"w", w}});
  EXPECT_EQ(load_safetensors(p).tensors[0].second.to_vector<float>(), (std::vector<float>{1, 2}));
  EXPECT_FALSE(load_safetensors(p).tensors[0].second.requires_grad());
}

TEST_F(SafetensorsTest, MetadataRoundTrips) {
  std::map<std::string, std::string> meta = {
      {"format", "pt"},
      {"config", R"({"d_in": 784, "name": "mlp"})"},  // JSON inside a string
      {"unicode \xC3\xA9", "tab\tnewline\n\x01quote\"backslash\\"},
      {"empty", ""},
  };
  std::string p = path("meta.safetensors");
  save_safetensors(p, {{"x", Tensor::from_vector<float>({1}, {1})}}, meta);
  EXPECT_EQ(load_safetensors(p).metadata, meta);
  // Without metadata there is no "__metadata__" entry at all (as in the Python writer).
  save_safetensors(p, {{"x", Tensor::from_vector<float>({1}, {1})}});
  Bytes b = read_file(p);
  EXPECT_EQ(std::string(b.begin(), b.end()).find("__metadata__"), std::string::npos);
}

// The exact bytes of a small file, derived by hand from the format:
//   header = {"__metadata__":{"k":"v"},"x":{"dtype":"I32","shape":[2],"data_offsets":[0,8]},
//             "y":{"dtype":"BOOL","shape":[],"data_offsets":[8,9]}}
// is 132 bytes; padded with 4 spaces to 136 = 0x88, a multiple of 8. Data: int32 1 and -1
// little-endian, then the bool byte.
TEST_F(SafetensorsTest, WritesExactBytes) {
  Bytes expected = {0x88, 0, 0, 0, 0, 0, 0, 0};
  std::string header =
      "{\"__metadata__\":{\"k\":\"v\"},"
      "\"x\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[0,8]},"
      "\"y\":{\"dtype\":\"BOOL\",\"shape\":[],\"data_offsets\":[8,9]}}    ";
  ASSERT_EQ(header.size(), 136u);
  expected.insert(expected.end(), header.begin(), header.end());
  for (uint8_t b : {0x01, 0x00, 0x00, 0x00, 0xFF, 0xFF, 0xFF, 0xFF, 0x01}) expected.push_back(b);

  NamedTensors tensors = {{"x", Tensor::from_vector<int32_t>({1, -1}, {2})},
                          {"y", Tensor::scalar(true, kBool)}};
  std::map<std::string, std::string> meta = {{"k", "v"}};
  EXPECT_EQ(safetensors_bytes(tensors, meta), expected);
  std::string p = path("exact.safetensors");
  save_safetensors(p, tensors, meta);
  EXPECT_EQ(read_file(p), expected);
}

// The header keeps the caller's order while the buffer is ordered by element size, so
// every tensor is aligned to its element size within the file.
TEST_F(SafetensorsTest, AlignsDataByElementSize) {
  NamedTensors tensors = {{"flag", Tensor::from_vector<bool>({true, false, true}, {3})},
                          {"h", Tensor::from_vector<Half>({Half(1.f)}, {1})},
                          {"d", Tensor::from_vector<double>({1.0, 2.0}, {2})},
                          {"i", Tensor::from_vector<int32_t>({5}, {1})}};
  Bytes b = safetensors_bytes(tensors);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(b[i]) << (8 * i);
  EXPECT_EQ(n % 8, 0u);
  json::Value header =
      json::parse(std::string(b.begin() + 8, b.begin() + 8 + static_cast<long>(n)));
  const json::Object& obj = header.as_object();
  ASSERT_EQ(obj.size(), 4u);
  std::vector<std::string> names;
  for (size_t i = 0; i < obj.size(); ++i) {
    const auto& [name, info] = obj[i];
    names.push_back(name);
    int64_t begin = info.find("data_offsets")->as_array()[0].as_int();
    EXPECT_EQ(begin % static_cast<int64_t>(tensors[i].second.element_size()), 0) << name;
  }
  EXPECT_EQ(names, (std::vector<std::string>{"flag", "h", "d", "i"}));
  // Buffer order: d (8), i (4), h (2), flag (1).
  EXPECT_EQ(obj[2].second.find("data_offsets")->as_array()[0].as_int(), 0);   // d
  EXPECT_EQ(obj[3].second.find("data_offsets")->as_array()[0].as_int(), 16);  // i
  EXPECT_EQ(obj[1].second.find("data_offsets")->as_array()[0].as_int(), 20);  // h
  EXPECT_EQ(obj[0].second.find("data_offsets")->as_array()[0].as_int(), 22);  // flag
  SafetensorsFile f = load_safetensors_bytes(b.data(), b.size());
  EXPECT_EQ(f.tensors[0].first, "flag");
  EXPECT_EQ(f.find("d")->to_vector<double>(), (std::vector<double>{1.0, 2.0}));
}

TEST_F(SafetensorsTest, WriterRejectsBadInput) {
  Tensor x = Tensor::from_vector<float>({1}, {1});
  EXPECT_HAS(error_of([&] {
               safetensors_bytes({{"a", x}, {"b", x}, {"a", x}});
             }),
             "expected unique tensor names, got \"a\" twice (entries 0 and 2)");
  EXPECT_HAS(error_of([&] { safetensors_bytes({{"__metadata__", x}}); }), "is reserved");
  EXPECT_HAS(error_of([&] { safetensors_bytes({{"u", Tensor()}}); }), "tensor \"u\" is undefined");
  EXPECT_HAS(error_of([&] { safetensors_bytes({{"bad\xFF", x}}); }), "is not valid UTF-8");
  EXPECT_HAS(error_of([&] {
               safetensors_bytes({{"x", x}}, {{"k", "\xC0\x80"}});
             }),
             "metadata entries must be UTF-8 text");
  EXPECT_HAS(error_of([&] { save_safetensors("", {{"x", x}}); }), "expected a file path");
  EXPECT_HAS(error_of([&] { save_safetensors(path("") + "/", {{"x", x}}); }), "names a directory");
}

// ---- interop with the Python package ----

// tests/data/safetensors/reference_numpy.safetensors was written by safetensors 0.8.0 from
// numpy arrays (make_reference.py); every value is checked.
TEST_F(SafetensorsTest, ReadsFileWrittenByPython) {
  SafetensorsFile f = load_safetensors(test_data("safetensors/reference_numpy.safetensors"));
  std::map<std::string, std::string> meta = {{"framework", "numpy"},
                                             {"description", "kiln reference"},
                                             {"unicode", "\xC3\xBCn\xC3\xAF \"q\""}};
  EXPECT_EQ(f.metadata, meta);
  // The Python writer orders entries by decreasing dtype alignment, then by name.
  std::vector<std::string> names;
  for (const auto& [n, t] : f.tensors) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"empty", "i64", "f64", "empty2d", "f32", "scalar",
                                             "i32", "bf16", "f16", "b"}));
  auto get = [&](const std::string& name, DType dtype, Shape shape) {
    const Tensor* t = f.find(name);
    EXPECT_NE(t, nullptr) << name;
    if (!t) return Tensor();
    EXPECT_EQ(t->dtype(), dtype) << name;
    EXPECT_EQ(t->shape(), shape) << name;
    return *t;
  };
  EXPECT_EQ(get("f32", kFloat32, {2, 3}).to_vector<float>(),
            (std::vector<float>{-0.5f, -0.25f, 0.f, 0.25f, 0.5f, 0.75f}));
  EXPECT_EQ(get("f64", kFloat64, {4}).to_vector<double>(),
            (std::vector<double>{3.141592653589793, -2.718281828459045, 1e-310, 1e300}));
  EXPECT_EQ(get("i32", kInt32, {3}).to_vector<int32_t>(),
            (std::vector<int32_t>{std::numeric_limits<int32_t>::min(), 0,
                                  std::numeric_limits<int32_t>::max()}));
  EXPECT_EQ(get("i64", kInt64, {2, 1}).to_vector<int64_t>(),
            (std::vector<int64_t>{-(int64_t{1} << 62), (int64_t{1} << 62) + 1}));
  EXPECT_EQ(get("b", kBool, {5}).to_vector<bool>(),
            (std::vector<bool>{true, false, false, true, true}));
  // float16 0.1 is 0.0999755859375; 2^-24 is the smallest subnormal.
  Tensor f16 = get("f16", kFloat16, {2, 2});
  const Half* h = f16.data_ptr<Half>();
  EXPECT_EQ(static_cast<float>(h[0]), 0.0999755859375f);
  EXPECT_EQ(static_cast<float>(h[1]), -1.5f);
  EXPECT_EQ(static_cast<float>(h[2]), 65504.f);
  EXPECT_EQ(static_cast<float>(h[3]), std::ldexp(1.f, -24));
  EXPECT_EQ(h[0].bits, 0x2E66);
  Tensor bf16 = get("bf16", kBFloat16, {3});
  const BFloat16* b = bf16.data_ptr<BFloat16>();
  EXPECT_EQ(static_cast<float>(b[0]), 1.f);
  EXPECT_EQ(static_cast<float>(b[1]), -2.5f);
  EXPECT_EQ(static_cast<float>(b[2]), 3.140625f);
  EXPECT_EQ(get("scalar", kFloat32, {}).item<float>(), 7.25f);
  EXPECT_EQ(get("empty", kInt64, {0}).numel(), 0);
  EXPECT_EQ(get("empty2d", kFloat32, {3, 0}).numel(), 0);
}

// Given the tensors in the same order, kiln lays the file out exactly as the Python writer
// did: same header entries and offsets, byte-identical data. (Only the order of metadata
// keys may differ: the Rust writer keeps them in a hash map.)
TEST_F(SafetensorsTest, WritesSameLayoutAsPython) {
  std::string ref = test_data("safetensors/reference_numpy.safetensors");
  Bytes original = read_file(ref);
  SafetensorsFile f = load_safetensors(ref);
  Bytes mine = safetensors_bytes(f.tensors, f.metadata);
  ASSERT_EQ(mine.size(), original.size());
  EXPECT_TRUE(std::equal(mine.begin(), mine.begin() + 8, original.begin()));  // header length
  uint64_t n = original[0] | (uint64_t{original[1]} << 8);
  auto header = [&](const Bytes& b) {
    json::Value v = json::parse(std::string(b.begin() + 8, b.begin() + 8 + static_cast<long>(n)));
    json::Object& obj = v.as_object();
    EXPECT_EQ(obj.front().first, "__metadata__");
    obj.erase(obj.begin());
    return v;
  };
  EXPECT_EQ(json::dump(header(mine)), json::dump(header(original)));
  EXPECT_TRUE(std::equal(mine.begin() + 8 + static_cast<long>(n), mine.end(),
                         original.begin() + 8 + static_cast<long>(n)));
}

// What the Python script's --verify mode expects (KILN_EXPECTED in make_reference.py).
NamedTensors kiln_interop_tensors() {
  return {
      {"weight", Tensor::from_vector<float>({-1, -0.5, 0, 0.5, 1, 1.5}, {2, 3})},
      {"bias", Tensor::from_vector<double>({0.1, -2.5, 1e-300}, {3})},
      {"step", Tensor::scalar((int64_t{1} << 40) + 7, kInt64)},
      {"counts",
       Tensor::from_vector<int32_t>({-3, 0, 7, std::numeric_limits<int32_t>::max()}, {2, 2})},
      {"mask", Tensor::from_vector<bool>({true, false, true, true}, {4})},
      {"half", Tensor::from_vector<Half>({Half(1.f), Half(-0.5f), Half(65504.f)}, {3})},
      {"brain", Tensor::from_vector<BFloat16>({BFloat16(1.5f), BFloat16(-3.f)}, {2})},
      {"empty", Tensor::empty({0, 4}, kFloat32)},
  };
}
const std::map<std::string, std::string> kKilnInteropMetadata = {
    {"format", "kiln"}, {"note", "h\xC3\xA9llo \"quoted\"\n\ttab"}};

// tests/data/safetensors/kiln_written.safetensors holds kiln's bytes for these tensors and
// was checked with the Python package (make_reference.py --verify). kiln must keep
// writing exactly those bytes. To regenerate: run this test with
// KILN_SAFETENSORS_GOLDEN_OUT=/path/kiln_written.safetensors and verify it with the script.
TEST_F(SafetensorsTest, WritesFileForPython) {
  NamedTensors tensors = kiln_interop_tensors();
  if (const char* out = std::getenv("KILN_SAFETENSORS_GOLDEN_OUT"))
    save_safetensors(out, tensors, kKilnInteropMetadata);
  std::string p = path("kiln_written.safetensors");
  save_safetensors(p, tensors, kKilnInteropMetadata);
  EXPECT_EQ(read_file(p), read_file(test_data("safetensors/kiln_written.safetensors")));
  SafetensorsFile back = load_safetensors(p);
  EXPECT_EQ(back.metadata, kKilnInteropMetadata);
  ASSERT_EQ(back.tensors.size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i)
    EXPECT_EQ(bytes_of(back.tensors[i].second), bytes_of(tensors[i].second)) << tensors[i].first;
}

// ---- corrupt, truncated and hostile files ----

constexpr const char* kOneF32 = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
const Bytes kEightBytes = {0, 0, 128, 63, 0, 0, 0, 64};  // float32 1.0, 2.0

TEST_F(SafetensorsTest, AcceptsAWellFormedHandWrittenFile) {
  std::string p = write("ok.safetensors", file_bytes(kOneF32, kEightBytes));
  EXPECT_EQ(load_safetensors(p).find("a")->to_vector<float>(), (std::vector<float>{1, 2}));
  // Whitespace after the object (the padding) and an explicit empty metadata are fine.
  std::string padded =
      R"({"__metadata__":{},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}} )";
  p = write("ok2.safetensors", file_bytes(padded + "\n\t ", kEightBytes));
  EXPECT_EQ(load_safetensors(p).tensors.size(), 1u);
}

TEST_F(SafetensorsTest, RejectsBadHeaderLength) {
  expect_rejected({}, "too short to be a safetensors file: expected at least 8 bytes");
  expect_rejected({1, 0, 0}, "got 3");
  expect_rejected(file_bytes(kOneF32, kEightBytes, uint64_t{1} << 62),
                  "header length 4611686018427387904 is larger than the limit of 100000000");
  expect_rejected(file_bytes(kOneF32, kEightBytes, kSafetensorsMaxHeaderBytes + 1),
                  "larger than the limit");
  expect_rejected(file_bytes(kOneF32, {}, 1000),
                  "header length 1000 runs past the end of the file");
  expect_rejected(file_bytes("", {}),
                  "expected the header to start with '{' (a JSON object), got "
                  "an empty header");
  expect_rejected(file_bytes(" {}"), "expected the header to start with '{'");
  expect_rejected(file_bytes("[1]"), "got byte 91");
}

TEST_F(SafetensorsTest, RejectsMalformedJson) {
  expect_rejected(file_bytes("{\"a\":", {}), "the header is not valid JSON");
  expect_rejected(file_bytes("{\"a\":1,}", {}), "expected a string key");
  expect_rejected(file_bytes("{\"\xFF\":1}", {}), "invalid UTF-8");
  expect_rejected(file_bytes("{\"a\xED\xA0\x80\":1}", {}), "encoded surrogate");
  expect_rejected(file_bytes("{} x"), "unexpected characters after the JSON value");
  // Duplicate tensor names: two entries for one name.
  std::string dup = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                    R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})";
  expect_rejected(file_bytes(dup, kEightBytes), "duplicate key \"a\"");
  // Deep nesting and huge value counts stop early instead of exhausting stack or memory.
  std::string deep = "{\"__metadata__\":" + std::string(1000, '[') + std::string(1000, ']') + "}";
  expect_rejected(file_bytes(deep), "nesting deeper than 8 levels");
  std::string many = "{\"a\":{\"dtype\":\"F32\",\"shape\":[";
  for (int i = 0; i < 1'000'000; ++i) many += "0,";
  many += "0],\"data_offsets\":[0,0]}}";
  Bytes many_bytes = file_bytes(many);
  EXPECT_HAS(error_of([&] { load_safetensors_bytes(many_bytes.data(), many_bytes.size(), "m"); }),
             "more than 1000000 values in the document");
}

TEST_F(SafetensorsTest, RejectsMalformedEntries) {
  auto one = [&](const std::string& entry, const Bytes& data = kEightBytes) {
    return file_bytes("{\"a\":" + entry + "}", data);
  };
  expect_rejected(one("5"),
                  "tensor \"a\": expected an object with dtype, shape and data_offsets, "
                  "got an integer");
  expect_rejected(one(R"({"shape":[2],"data_offsets":[0,8]})"),
                  "tensor \"a\": missing field \"dtype\"");
  expect_rejected(one(R"({"dtype":"F32","data_offsets":[0,8]})"), "missing field \"shape\"");
  expect_rejected(one(R"({"dtype":"F32","shape":[2]})"), "missing field \"data_offsets\"");
  expect_rejected(one(R"({"dtype":"F32","shape":[2],"data_offsets":[0,8],"extra":1})"),
                  "unknown field \"extra\"");
  expect_rejected(one(R"({"dtype":7,"shape":[2],"data_offsets":[0,8]})"),
                  "expected dtype to be a string, got an integer");
  expect_rejected(one(R"({"dtype":"F99","shape":[2],"data_offsets":[0,8]})"),
                  "unknown dtype \"F99\" (kiln reads BOOL, I32, I64, F16, BF16, F32, F64)");
  expect_rejected(one(R"({"dtype":"U8","shape":[8],"data_offsets":[0,8]})"),
                  "safetensors dtype \"U8\" has no kiln equivalent");
  expect_rejected(one(R"({"dtype":"f32","shape":[2],"data_offsets":[0,8]})"),
                  "unknown dtype \"f32\"");
  expect_rejected(one(R"({"dtype":"F32","shape":2,"data_offsets":[0,8]})"),
                  "expected shape to be an array, got an integer");
  expect_rejected(one(R"({"dtype":"F32","shape":[-2],"data_offsets":[0,8]})"),
                  "expected shape entries to be non-negative integers, got -2");
  expect_rejected(one(R"({"dtype":"F32","shape":[2.0],"data_offsets":[0,8]})"),
                  "non-negative integers, got 2.0");
  expect_rejected(one(R"({"dtype":"F32","shape":["2"],"data_offsets":[0,8]})"),
                  "non-negative integers, got string");
  expect_rejected(one(R"({"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]})"),
                  "shape [4294967296,4294967296] is too large: the product of its sizes overflows");
  expect_rejected(one(R"({"dtype":"F32","shape":[0,4294967296,4294967296],"data_offsets":[0,0]})"),
                  "is too large: the product of its sizes overflows 64 bits");
  expect_rejected(one(R"({"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,8]})"),
                  "shape [4611686018427387904] of F64 has more bytes than fit in 64 bits");
  expect_rejected(one(R"({"dtype":"F32","shape":[2],"data_offsets":[0]})"),
                  "expected data_offsets to be an array [begin, end], got [0]");
  expect_rejected(one(R"({"dtype":"F32","shape":[2],"data_offsets":{"b":0}})"),
                  "expected data_offsets to be an array [begin, end]");
  expect_rejected(one(R"({"dtype":"F32","shape":[2],"data_offsets":[8,0]})"),
                  "expected data_offsets [begin, end] with 0 <= begin <= end, got [8,0]");
  expect_rejected(one(R"({"dtype":"F32","shape":[2],"data_offsets":[-8,0]})"), "0 <= begin <= end");
  expect_rejected(one(R"({"dtype":"F32","shape":[2],"data_offsets":[0,1e1]})"),
                  "0 <= begin <= end");
  expect_rejected(one(R"({"dtype":"F32","shape":[3],"data_offsets":[0,8]})"),
                  "data_offsets [0,8] span 8 bytes but shape [3] of F32 needs 12");
  // Huge offsets that agree with a huge shape: refused as out of range, nothing allocated.
  expect_rejected(
      one(R"({"dtype":"F32","shape":[1000000000000],"data_offsets":[0,4000000000000]})"),
      "data_offsets [0,4000000000000] are out of range: the data buffer has 8 bytes");
  expect_rejected(one(R"({"dtype":"F32","shape":[2],)"
                      R"("data_offsets":[9223372036854775799,9223372036854775807]})"),
                  "are out of range");
  expect_rejected(file_bytes(R"({"__metadata__":[]})"),
                  "expected \"__metadata__\" to be an object");
  expect_rejected(file_bytes(R"({"__metadata__":{"k":1}})"),
                  "expected metadata value \"k\" to be a string, got an integer");
}

TEST_F(SafetensorsTest, RejectsBadBufferCover) {
  auto two = [&](const std::string& a, const std::string& b, size_t data_size) {
    return file_bytes("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":" + a +
                          "},\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":" + b + "}}",
                      Bytes(data_size, 0));
  };
  expect_rejected(two("[0,4]", "[0,4]", 8), "tensors \"a\" [0, 4) and \"b\" [0, 4) overlap");
  // The header order need not follow the buffer order.
  Bytes swapped = two("[4,8]", "[0,4]", 8);
  EXPECT_EQ(load_safetensors_bytes(swapped.data(), swapped.size()).tensors[0].first, "a");
  expect_rejected(two("[0,4]", "[8,12]", 12),
                  "gap in the data buffer: bytes [4, 8) belong to no tensor (before \"b\")");
  expect_rejected(two("[4,8]", "[8,12]", 12), "bytes [0, 4) belong to no tensor");
  expect_rejected(two("[0,4]", "[4,8]", 12), "4 trailing bytes after the last tensor");
  expect_rejected(file_bytes(kOneF32, Bytes(9, 0)), "1 trailing bytes after the last tensor");
  expect_rejected(
      file_bytes(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", Bytes(9, 0)),
      "5 trailing bytes");
  // An empty tensor placed inside another one overlaps it (as the Python reader judges).
  expect_rejected(file_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                             R"("e":{"dtype":"F32","shape":[0],"data_offsets":[4,4]}})",
                             kEightBytes),
                  "overlap");
  // Truncated data: the header promises 8 bytes, 5 are there.
  expect_rejected(file_bytes(kOneF32, Bytes(5, 0)),
                  "are out of range: the data buffer has 5 bytes");
}

TEST_F(SafetensorsTest, RejectsBoolBytesOtherThanZeroOrOne) {
  expect_rejected(
      file_bytes(R"({"m":{"dtype":"BOOL","shape":[3],"data_offsets":[0,3]}})", {1, 0, 2}),
      "tensor \"m\" (BOOL) holds byte 2 at element 2; booleans must be 0 or 1");
}

TEST_F(SafetensorsTest, RejectsMissingFilesAndDirectories) {
  std::string missing = path("missing.safetensors");
  EXPECT_HAS(error_of([&] { load_safetensors(missing); }),
             "[load_safetensors] cannot open '" + missing + "': No such file or directory");
  EXPECT_HAS(error_of([&] { load_safetensors(dir_.string()); }), "is not a regular file");
}

// Every prefix of a valid file and every single-byte corruption of its header either
// loads or throws kiln::Error: no crash, no other exception (run under ASan for reads).
TEST_F(SafetensorsTest, TruncationsAndCorruptionsNeverCrash) {
  NamedTensors tensors = kiln_interop_tensors();
  Bytes good = safetensors_bytes(tensors, kKilnInteropMetadata);
  for (size_t len = 0; len < good.size(); ++len) {
    EXPECT_THROW(load_safetensors_bytes(good.data(), len, "prefix"), Error) << "length " << len;
  }
  uint64_t n = good[0] | (uint64_t{good[1]} << 8);
  size_t loaded = 0, rejected = 0;
  for (size_t i = 0; i < 8 + n; ++i) {
    for (uint8_t value : {uint8_t{0x00}, uint8_t{0xFF}, uint8_t{'9'}, uint8_t{'"'}, uint8_t{','}}) {
      Bytes bad = good;
      if (bad[i] == value) continue;
      bad[i] = value;
      try {
        load_safetensors_bytes(bad.data(), bad.size(), "corrupt");
        ++loaded;  // e.g. a changed character inside a metadata string
      } catch (const Error&) {
        ++rejected;
      }
    }
  }
  EXPECT_GT(rejected, 1000u);
  EXPECT_GT(loaded, 0u);
}

// ---- atomic writes ----

TEST_F(SafetensorsTest, FailedCreateLeavesNothing) {
  Tensor x = Tensor::from_vector<float>({1, 2}, {2});
  std::string target = path("no_such_dir/model.safetensors");
  EXPECT_HAS(error_of([&] {
               save_safetensors(target, {{"x", x}});
             }),
             "[save_safetensors] cannot create a temporary file in '" + path("no_such_dir") +
                 "' to write '" + target + "': No such file or directory");
  EXPECT_FALSE(fs::exists(target));
  EXPECT_TRUE(listing().empty());
  // A regular file where the directory should be.
  write("file", {1});
  EXPECT_HAS(error_of([&] {
               save_safetensors(path("file/m.safetensors"), {{"x", x}});
             }),
             "Not a directory");
  EXPECT_EQ(listing(), std::vector<std::string>{"file"});
}

TEST_F(SafetensorsTest, ValidationFailureKeepsOldFile) {
  Tensor x = Tensor::from_vector<float>({1, 2}, {2});
  std::string target = path("model.safetensors");
  save_safetensors(target, {{"x", x}});
  Bytes before = read_file(target);
  EXPECT_THROW(save_safetensors(target, {{"x", x}, {"x", x}}), Error);
  EXPECT_EQ(read_file(target), before);
  EXPECT_EQ(listing(), std::vector<std::string>{"model.safetensors"});
}

// The rename fails after the temporary file was written completely: the temp file goes.
TEST_F(SafetensorsTest, FailedRenameRemovesTempFile) {
  fs::create_directories(dir_ / "model.safetensors" / "child");
  std::string msg = error_of([&] {
    save_safetensors(path("model.safetensors"), {{"x", Tensor::from_vector<float>({1}, {1})}});
  });
  EXPECT_HAS(msg, "[save_safetensors] cannot replace '" + path("model.safetensors") + "'");
  EXPECT_EQ(listing(), std::vector<std::string>{"model.safetensors"});
  EXPECT_TRUE(fs::is_directory(dir_ / "model.safetensors" / "child"));
}

// A write that fails halfway (the file-size limit stands in for a full disk): the old
// checkpoint is intact and no temporary file is left behind.
TEST_F(SafetensorsTest, FailedWriteKeepsOldFileAndRemovesTempFile) {
  std::string target = path("model.safetensors");
  save_safetensors(target, {{"old", Tensor::from_vector<float>({1, 2, 3}, {3})}});
  Bytes before = read_file(target);

  struct rlimit saved;
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &saved), 0);
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);  // else exceeding the limit kills us
  struct rlimit small = saved;
  small.rlim_cur = 4096;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string msg = error_of([&] {
    save_safetensors(target, {{"big", Tensor::empty({100000}, kFloat32)}});
  });
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &saved), 0);
  std::signal(SIGXFSZ, old_handler);

  EXPECT_HAS(msg, "[save_safetensors] writing '" + target + "' failed: File too large");
  EXPECT_EQ(read_file(target), before);
  EXPECT_EQ(listing(), std::vector<std::string>{"model.safetensors"});
  EXPECT_EQ(load_safetensors(target).tensors[0].first, "old");
}

TEST_F(SafetensorsTest, OverwritesAtomically) {
  std::string target = path("model.safetensors");
  save_safetensors(target, {{"a", Tensor::from_vector<float>({1}, {1})}});
  save_safetensors(target, {{"b", Tensor::from_vector<double>({2, 3}, {2})}}, {{"v", "2"}});
  SafetensorsFile f = load_safetensors(target);
  ASSERT_EQ(f.tensors.size(), 1u);
  EXPECT_EQ(f.tensors[0].first, "b");
  EXPECT_EQ(f.metadata.at("v"), "2");
  EXPECT_EQ(listing(), std::vector<std::string>{"model.safetensors"});
  // The new file gets ordinary permissions (0666 less the umask), not a temp file's 0600.
  mode_t mask = umask(0);
  umask(mask);
  EXPECT_EQ(static_cast<mode_t>(fs::status(target).permissions()) & 0777, 0666 & ~mask);
}

}  // namespace
}  // namespace kiln
