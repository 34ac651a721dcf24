// Tests for the IDX reader and the Fashion-MNIST loader: files written at test time
// (gzip via zlib) for every format and error path, plus the real dataset when installed.
#include "kiln/data/idx.h"

#include <gtest/gtest.h>

#include "test_util.h"
#include <unistd.h>
#include <zlib.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "kiln/kiln.h"

namespace kiln::data {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

// The IDX encoding of `values` (stored big-endian) with the given type code and dims.
template <class T>
Bytes idx_bytes(uint8_t type, std::vector<uint32_t> dims, const std::vector<T>& values) {
  Bytes out = {0, 0, type, static_cast<uint8_t>(dims.size())};
  for (uint32_t d : dims)
    for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<uint8_t>(d >> s));
  for (T v : values) {
    uint8_t raw[sizeof(T)];
    std::memcpy(raw, &v, sizeof(T));
    for (size_t i = sizeof(T); i-- > 0;) out.push_back(raw[i]);  // little-endian host -> BE
  }
  return out;
}

Bytes gzip_bytes(const Bytes& plain) {
  uLongf cap = compressBound(plain.size()) + 64;
  Bytes out(cap);
  z_stream zs{};
  EXPECT_EQ(deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);  // +16: gzip
  zs.next_in = const_cast<Bytes::value_type*>(plain.data());
  zs.avail_in = static_cast<uInt>(plain.size());
  zs.next_out = out.data();
  zs.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

class IdxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static std::atomic<int> counter{0};
    dir_ = fs::temp_directory_path() /
           ("kiln_idx_test_" + std::to_string(getpid()) + "_" + std::to_string(counter++));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const Bytes& bytes) {
    std::string path = (dir_ / name).string();
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
    return path;
  }
  std::string write_gz(const std::string& name, const Bytes& plain) {
    return write(name, gzip_bytes(plain));
  }

  // Writes a Fashion-MNIST-named pair for `split` holding `n` images and the given labels.
  void write_fashion(const std::string& split, std::vector<uint32_t> image_dims,
                     const Bytes& pixels, std::vector<uint32_t> label_dims, const Bytes& labels) {
    write_gz(split + "-images-idx3-ubyte.gz", idx_bytes<uint8_t>(0x08, image_dims, pixels));
    write_gz(split + "-labels-idx1-ubyte.gz", idx_bytes<uint8_t>(0x08, label_dims, labels));
  }

  fs::path dir_;
};

#define EXPECT_HAS(haystack, needle) \
  EXPECT_NE((haystack).find(needle), std::string::npos) << (haystack)

TEST_F(IdxTest, ReadsGzipUbyteAsInt32ByDefault) {
  Bytes values = {0, 1, 2, 127, 128, 255};
  std::string path = write_gz("a-idx2-ubyte.gz", idx_bytes<uint8_t>(0x08, {2, 3}, values));
  Tensor t = read_idx(path);
  EXPECT_EQ(t.dtype(), kInt32);
  EXPECT_EQ(t.shape(), Shape({2, 3}));
  EXPECT_EQ(t.to_vector<int32_t>(), (std::vector<int32_t>{0, 1, 2, 127, 128, 255}));

  IdxArray raw = read_idx_array(path);
  EXPECT_EQ(raw.type, IdxType::UInt8);
  EXPECT_EQ(raw.dims, Shape({2, 3}));
  EXPECT_EQ(raw.bytes, values);
}

TEST_F(IdxTest, ConvertsToRequestedDtypeWithoutScaling) {
  std::string path = write_gz("l.gz", idx_bytes<uint8_t>(0x08, {4}, Bytes{9, 0, 255, 3}));
  Tensor as_long = read_idx(path, kInt64);
  EXPECT_EQ(as_long.dtype(), kInt64);
  EXPECT_EQ(as_long.to_vector<int64_t>(), (std::vector<int64_t>{9, 0, 255, 3}));
  Tensor as_float = read_idx(path, kFloat32);
  EXPECT_EQ(as_float.to_vector<float>(), (std::vector<float>{9, 0, 255, 3}));
}

TEST_F(IdxTest, ReadsUncompressedFiles) {
  std::string path = write("plain-idx1-ubyte", idx_bytes<uint8_t>(0x08, {3}, Bytes{7, 8, 9}));
  EXPECT_EQ(read_idx(path).to_vector<int32_t>(), (std::vector<int32_t>{7, 8, 9}));
}

TEST_F(IdxTest, DecodesBigEndianMultiByteTypes) {
  std::string i8 =
      write_gz("i8.gz", idx_bytes<int8_t>(0x09, {3}, std::vector<int8_t>{-128, -1, 127}));
  EXPECT_EQ(read_idx(i8).to_vector<int32_t>(), (std::vector<int32_t>{-128, -1, 127}));

  std::string i16 =
      write_gz("i16.gz", idx_bytes<int16_t>(0x0B, {3}, std::vector<int16_t>{-32768, -2, 1000}));
  EXPECT_EQ(read_idx(i16).to_vector<int32_t>(), (std::vector<int32_t>{-32768, -2, 1000}));

  std::string i32 = write_gz(
      "i32.gz", idx_bytes<int32_t>(0x0C, {1, 3}, std::vector<int32_t>{-70000, 0x01020304, 5}));
  Tensor t32 = read_idx(i32, kInt64);
  EXPECT_EQ(t32.shape(), Shape({1, 3}));
  EXPECT_EQ(t32.to_vector<int64_t>(), (std::vector<int64_t>{-70000, 0x01020304, 5}));

  std::string f32 =
      write_gz("f32.gz", idx_bytes<float>(0x0D, {2}, std::vector<float>{1.5f, -0.25f}));
  Tensor tf = read_idx(f32);
  EXPECT_EQ(tf.dtype(), kFloat32);
  EXPECT_EQ(tf.to_vector<float>(), (std::vector<float>{1.5f, -0.25f}));

  std::string f64 =
      write_gz("f64.gz", idx_bytes<double>(0x0E, {2}, std::vector<double>{1e300, -3.125}));
  Tensor td = read_idx(f64);
  EXPECT_EQ(td.dtype(), kFloat64);
  EXPECT_EQ(td.to_vector<double>(), (std::vector<double>{1e300, -3.125}));
}

TEST_F(IdxTest, EmptyDimReadsAsEmptyTensor) {
  std::string path = write_gz("e.gz", idx_bytes<uint8_t>(0x08, {0, 28}, Bytes{}));
  Tensor t = read_idx(path);
  EXPECT_EQ(t.shape(), Shape({0, 28}));
}

TEST_F(IdxTest, RefusesLossyOrUnsupportedDtypes) {
  std::string f32 = write_gz("f.gz", idx_bytes<float>(0x0D, {1}, std::vector<float>{0.5f}));
  std::string msg = error_of([&] { read_idx(f32, kInt64); });
  EXPECT_HAS(msg, "holds float32 values, which cannot be read as int64");
  EXPECT_HAS(msg, "Fix: read it as float32 or float64");

  std::string u8 = write_gz("u.gz", idx_bytes<uint8_t>(0x08, {1}, Bytes{1}));
  msg = error_of([&] { read_idx(u8, kBool); });
  EXPECT_HAS(msg, "expected dtype int32, int64, float32 or float64, got bool");
}

TEST_F(IdxTest, MissingFileNamesThePath) {
  std::string path = (dir_ / "nope-idx1-ubyte.gz").string();
  std::string msg = error_of([&] { read_idx(path); });
  EXPECT_HAS(msg, "[read_idx] cannot open '" + path + "': no such file");
  EXPECT_HAS(msg, "Fix:");

  msg = error_of([&] { read_idx(dir_.string()); });
  EXPECT_HAS(msg, "is a folder, expected an IDX file");
}

TEST_F(IdxTest, BadMagicNumber) {
  Bytes bytes = idx_bytes<uint8_t>(0x08, {2}, Bytes{1, 2});
  bytes[0] = 0x01;
  std::string msg = error_of([&] { read_idx(write_gz("m1.gz", bytes)); });
  EXPECT_HAS(msg, "is not an IDX file");
  EXPECT_HAS(msg, "found 0x01000801");

  bytes = idx_bytes<uint8_t>(0x07, {2}, Bytes{1, 2});  // unknown type code
  msg = error_of([&] { read_idx(write_gz("m2.gz", bytes)); });
  EXPECT_HAS(msg, "found 0x00000701");

  bytes = {0, 0, 0x08, 0};  // zero dims
  msg = error_of([&] { read_idx(write_gz("m3.gz", bytes)); });
  EXPECT_HAS(msg, "found 0x00000800");
  EXPECT_HAS(msg, "Fix: pass an IDX file");

  // A text file passed by mistake.
  msg = error_of([&] { read_idx(write("notes.txt", Bytes{'h', 'e', 'l', 'l', 'o'})); });
  EXPECT_HAS(msg, "is not an IDX file");
}

TEST_F(IdxTest, TruncatedFiles) {
  // Shorter than the magic number.
  std::string msg = error_of([&] { read_idx(write_gz("t1.gz", Bytes{0, 0})); });
  EXPECT_HAS(msg, "is truncated: expected a 4-byte magic number, found only 2 bytes");

  // Magic announces 3 dims, only one is there.
  Bytes dims_cut = idx_bytes<uint8_t>(0x08, {5}, Bytes{});
  dims_cut[3] = 3;
  msg = error_of([&] { read_idx(write_gz("t2.gz", dims_cut)); });
  EXPECT_HAS(msg, "announces 3 dims (12 bytes), found only 4 bytes of dims");

  // Complete gzip stream, but fewer data bytes than the dims need.
  Bytes data_cut = idx_bytes<int16_t>(0x0B, {2, 3}, std::vector<int16_t>{1, 2, 3});
  msg = error_of([&] { read_idx(write_gz("t3.gz", data_cut)); });
  EXPECT_HAS(msg, "is truncated: dims [2, 3] of int16 need 12 bytes of data, found only 6");
  EXPECT_HAS(msg, "Fix: the file is damaged");

  // The same for an uncompressed file.
  msg = error_of([&] { read_idx(write("t4", data_cut)); });
  EXPECT_HAS(msg, "need 12 bytes of data, found only 6");
}

TEST_F(IdxTest, TruncatedGzipStream) {
  std::vector<uint8_t> pixels(4000);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>(i * 7919 % 251);
  Bytes gz = gzip_bytes(idx_bytes<uint8_t>(0x08, {4000}, pixels));
  Bytes half(gz.begin(), gz.begin() + static_cast<ptrdiff_t>(gz.size() / 2));
  std::string msg = error_of([&] { read_idx(write("half.gz", half)); });
  EXPECT_HAS(msg, "is truncated: its gzip stream ends early");

  // All data present, only the 8-byte trailer (CRC + length) lost.
  Bytes no_trailer(gz.begin(), gz.end() - 8);
  msg = error_of([&] { read_idx(write("trailer.gz", no_trailer)); });
  EXPECT_HAS(msg, "is truncated: its gzip stream ends early");
}

TEST_F(IdxTest, CorruptGzipData) {
  Bytes gz = gzip_bytes(idx_bytes<uint8_t>(0x08, {64}, Bytes(64, 42)));
  // A wrong CRC: the data inflates fine, the checksum at the end does not match.
  Bytes bad_crc = gz;
  bad_crc[bad_crc.size() - 8] ^= 0xFF;
  std::string msg = error_of([&] { read_idx(write("crc.gz", bad_crc)); });
  EXPECT_HAS(msg, "corrupt gzip data");
  EXPECT_HAS(msg, "incorrect data check");
  EXPECT_HAS(msg, "Fix: the file is damaged");

  // A deflate block header with the reserved block type 3 (byte 10 follows the 10-byte
  // gzip header).
  Bytes bad_block = gz;
  bad_block[10] = 0xFF;
  msg = error_of([&] { read_idx(write("block.gz", bad_block)); });
  EXPECT_HAS(msg, "corrupt gzip data while reading the magic number");
  EXPECT_HAS(msg, "invalid block type");
}

TEST_F(IdxTest, TrailingBytesAreRefused) {
  Bytes bytes = idx_bytes<uint8_t>(0x08, {2}, Bytes{1, 2});
  bytes.push_back(3);
  std::string msg = error_of([&] { read_idx(write_gz("x.gz", bytes)); });
  EXPECT_HAS(msg, "holds more bytes than its dims [2] of ubyte describe (2 bytes of data)");
}

TEST_F(IdxTest, ImplausibleDimsAreRefusedBeforeAllocating) {
  Bytes bytes = idx_bytes<uint8_t>(0x08, {0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu}, Bytes{});
  std::string msg = error_of([&] { read_idx(write_gz("huge.gz", bytes)); });
  EXPECT_HAS(msg, "has implausible dims [4294967295, 4294967295, 4294967295]");

  // Found by fuzzing: a zero dim made the array empty, and the absurd sizes beside it were
  // accepted, although no tensor can be laid out with them.
  Bytes empty = idx_bytes<uint8_t>(0x08, {0, 0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu}, Bytes{});
  msg = error_of([&] { read_idx_array(write_gz("empty_huge.gz", empty)); });
  EXPECT_HAS(msg, "has implausible dims [0, 4294967295, 4294967295, 4294967295] (its non-zero "
                  "sizes describe more than 1 TiB of ubyte data)");

  // Large but plausible dims on a tiny file: reported as truncated, not as out of memory.
  Bytes big = idx_bytes<float>(0x0D, {1u << 30}, std::vector<float>{1.0f});
  msg = error_of([&] { read_idx(write_gz("big.gz", big)); });
  EXPECT_HAS(msg, "need 4294967296 bytes of data, found only 4");
}

// ---- Fashion-MNIST ----

Bytes test_pixels(size_t images) {
  Bytes p(images * 784);
  for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<uint8_t>(i % 256);
  return p;
}

TEST_F(IdxTest, LoadsFashionMnistLayoutFromAnyFolder) {
  write_fashion("t10k", {3, 28, 28}, test_pixels(3), {3}, Bytes{9, 0, 4});
  FashionMnist ds = load_fashion_mnist(dir_.string(), Split::Test);
  EXPECT_EQ(ds.images.dtype(), kFloat32);
  EXPECT_EQ(ds.images.shape(), Shape({3, 1, 28, 28}));
  EXPECT_EQ(ds.labels.dtype(), kInt64);
  EXPECT_EQ(ds.labels.to_vector<int64_t>(), (std::vector<int64_t>{9, 0, 4}));
  std::vector<float> px = ds.images.to_vector<float>();
  EXPECT_EQ(px[0], 0.0f);
  EXPECT_EQ(px[255], 1.0f);
  EXPECT_FLOAT_EQ(px[2 * 784 + 100], static_cast<float>((2 * 784 + 100) % 256) / 255.0f);
}

TEST_F(IdxTest, LoadsUncompressedFashionMnistFiles) {
  write("train-images-idx3-ubyte", idx_bytes<uint8_t>(0x08, {1, 28, 28}, test_pixels(1)));
  write("train-labels-idx1-ubyte", idx_bytes<uint8_t>(0x08, {1}, Bytes{7}));
  FashionMnist ds = load_fashion_mnist(dir_.string(), Split::Train);
  EXPECT_EQ(ds.labels.to_vector<int64_t>(), (std::vector<int64_t>{7}));
}

TEST_F(IdxTest, MissingFashionMnistSaysHowToGetIt) {
  std::string missing = (dir_ / "no-such-folder").string();
  std::string msg = error_of([&] { load_fashion_mnist(missing, Split::Train); });
  EXPECT_HAS(msg,
             "Fashion-MNIST file not found: expected '" + missing + "/train-images-idx3-ubyte.gz'");
  EXPECT_HAS(msg, "the folder does not exist");
  EXPECT_HAS(msg, "apt-get install dataset-fashion-mnist");
  EXPECT_HAS(msg, "KILN_FASHION_MNIST_DIR");

  // Images present, labels missing.
  write_gz("t10k-images-idx3-ubyte.gz", idx_bytes<uint8_t>(0x08, {1, 28, 28}, test_pixels(1)));
  msg = error_of([&] { load_fashion_mnist(dir_.string(), Split::Test); });
  EXPECT_HAS(msg, "t10k-labels-idx1-ubyte.gz");
  EXPECT_EQ(msg.find("folder does not exist"), std::string::npos) << msg;
}

TEST_F(IdxTest, FashionMnistWrongDims) {
  write_fashion("t10k", {2, 28, 27}, Bytes(2 * 28 * 27), {2}, Bytes{1, 2});
  std::string msg = error_of([&] { load_fashion_mnist(dir_.string(), Split::Test); });
  EXPECT_HAS(msg, "expected ubyte images of dims [N, 28, 28], got ubyte [2, 28, 27]");

  write_fashion("t10k", {2, 28, 28}, test_pixels(2), {2, 1}, Bytes{1, 2});
  msg = error_of([&] { load_fashion_mnist(dir_.string(), Split::Test); });
  EXPECT_HAS(msg, "expected ubyte labels of dims [N], got ubyte [2, 1]");

  // Images and labels swapped.
  write_gz("train-images-idx3-ubyte.gz", idx_bytes<uint8_t>(0x08, {2}, Bytes{1, 2}));
  write_gz("train-labels-idx1-ubyte.gz", idx_bytes<uint8_t>(0x08, {2, 28, 28}, test_pixels(2)));
  msg = error_of([&] { load_fashion_mnist(dir_.string(), Split::Train); });
  EXPECT_HAS(msg, "got ubyte [2]");
  EXPECT_HAS(msg, "swapped");
}

TEST_F(IdxTest, FashionMnistCountMismatch) {
  write_fashion("train", {3, 28, 28}, test_pixels(3), {2}, Bytes{1, 2});
  std::string msg = error_of([&] { load_fashion_mnist(dir_.string(), Split::Train); });
  EXPECT_HAS(msg, "holds 3 images but");
  EXPECT_HAS(msg, "holds 2 labels; expected one label per image");
}

TEST_F(IdxTest, FashionMnistLabelOutOfRange) {
  write_fashion("train", {2, 28, 28}, test_pixels(2), {2}, Bytes{3, 10});
  std::string msg = error_of([&] { load_fashion_mnist(dir_.string(), Split::Train); });
  EXPECT_HAS(msg, "label 1 is 10, expected a class id in [0, 10)");
}

TEST_F(IdxTest, DefaultDirHonorsEnvironment) {
  const char* old = std::getenv("KILN_FASHION_MNIST_DIR");
  std::string saved = old ? old : "";
  setenv("KILN_FASHION_MNIST_DIR", dir_.c_str(), 1);
  EXPECT_EQ(default_fashion_mnist_dir(), dir_.string());
  write_fashion("t10k", {1, 28, 28}, test_pixels(1), {1}, Bytes{5});
  EXPECT_EQ(load_fashion_mnist(Split::Test).labels.to_vector<int64_t>(), (std::vector<int64_t>{5}));
  setenv("KILN_FASHION_MNIST_DIR", "", 1);
  EXPECT_EQ(default_fashion_mnist_dir(), "/usr/share/datasets/fashion-mnist");
  unsetenv("KILN_FASHION_MNIST_DIR");
  EXPECT_EQ(default_fashion_mnist_dir(), "/usr/share/datasets/fashion-mnist");
  if (old) setenv("KILN_FASHION_MNIST_DIR", saved.c_str(), 1);
}

TEST(FashionMnistClasses, NamesInLabelOrder) {
  EXPECT_EQ(fashion_mnist_classes()[0], "T-shirt/top");
  EXPECT_EQ(fashion_mnist_classes()[9], "Ankle boot");
}

// The real dataset (dataset-fashion-mnist or KILN_FASHION_MNIST_DIR). The expected
// values were read independently with Python's gzip module.
TEST(FashionMnistReal, TestSplit) {
  const std::string dir = default_fashion_mnist_dir();
  if (!fs::exists(dir + "/t10k-images-idx3-ubyte.gz") &&
      !fs::exists(dir + "/t10k-images-idx3-ubyte"))
    GTEST_SKIP() << "Fashion-MNIST not installed in " << dir
                 << " (apt-get install dataset-fashion-mnist)";
  FashionMnist ds = load_fashion_mnist(dir, Split::Test);
  ASSERT_EQ(ds.images.shape(), Shape({10000, 1, 28, 28}));
  ASSERT_EQ(ds.labels.shape(), Shape({10000}));
  std::vector<int64_t> labels = ds.labels.to_vector<int64_t>();
  EXPECT_EQ(std::vector<int64_t>(labels.begin(), labels.begin() + 10),
            (std::vector<int64_t>{9, 2, 1, 1, 6, 1, 4, 6, 5, 7}));
  std::vector<int64_t> per_class(10, 0);
  for (int64_t l : labels) {
    ASSERT_TRUE(l >= 0 && l < 10) << l;
    ++per_class[static_cast<size_t>(l)];
  }
  EXPECT_EQ(per_class, std::vector<int64_t>(10, 1000));

  // Every pixel must be exactly byte / 255; the byte sums then match the file's.
  const float* px = ds.images.data_ptr<float>();
  int64_t first_sum = 0, total = 0, inexact = 0;
  for (int64_t i = 0; i < ds.images.numel(); ++i) {
    int64_t byte = std::lround(px[i] * 255.0f);
    inexact += !(byte >= 0 && byte <= 255 && px[i] == static_cast<float>(byte) / 255.0f);
    if (i < 784) first_sum += byte;
    total += byte;
  }
  EXPECT_EQ(inexact, 0);
  EXPECT_EQ(first_sum, 33456);
  EXPECT_EQ(total, 573469082);
  EXPECT_FLOAT_EQ(px[215], 3.0f / 255.0f);             // first non-zero pixel of image 0
  EXPECT_FLOAT_EQ(px[14 * 28 + 14], 110.0f / 255.0f);  // its centre
}

TEST(FashionMnistReal, TrainSplit) {
  const std::string dir = default_fashion_mnist_dir();
  if (!fs::exists(dir + "/train-images-idx3-ubyte.gz") &&
      !fs::exists(dir + "/train-images-idx3-ubyte"))
    GTEST_SKIP() << "Fashion-MNIST not installed in " << dir
                 << " (apt-get install dataset-fashion-mnist)";
  FashionMnist ds = load_fashion_mnist(dir, Split::Train);
  ASSERT_EQ(ds.images.shape(), Shape({60000, 1, 28, 28}));
  std::vector<int64_t> labels = ds.labels.to_vector<int64_t>();
  EXPECT_EQ(std::vector<int64_t>(labels.begin(), labels.begin() + 10),
            (std::vector<int64_t>{9, 0, 0, 3, 0, 2, 7, 2, 5, 5}));
  std::vector<int64_t> per_class(10, 0);
  for (int64_t l : labels) ++per_class[static_cast<size_t>(l)];
  EXPECT_EQ(per_class, std::vector<int64_t>(10, 6000));
  EXPECT_FLOAT_EQ(ds.images.data_ptr<float>()[14 * 28 + 14], 217.0f / 255.0f);
}

}  // namespace
}  // namespace kiln::data
