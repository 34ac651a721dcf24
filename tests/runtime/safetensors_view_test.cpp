// view_safetensors_bytes: tensors that view the bytes in place and keep their owner alive,
// with the same checks as a copying load, and a copy where the bytes are misaligned.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "kiln/serialize/safetensors.h"
#include "test_util.h"

namespace kiln {
namespace {

// Bytes of a small file: a float32 [2, 3] and an int64 [2].
std::vector<uint8_t> sample_bytes() {
  Tensor a = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = Tensor::from_vector<int64_t>({7, -8}, {2});
  return safetensors_bytes({{"a", a}, {"b", b}});
}

TEST(SafetensorsView, TensorsViewTheBytesAndKeepTheOwnerAlive) {
  std::vector<uint8_t> bytes = sample_bytes();
  // 64-byte aligned storage, like a mapped file's.
  auto owner =
      std::shared_ptr<uint8_t[]>(new (std::align_val_t(64)) uint8_t[bytes.size()],
                                 [](uint8_t* p) { ::operator delete[](p, std::align_val_t(64)); });
  std::memcpy(owner.get(), bytes.data(), bytes.size());
  std::weak_ptr<uint8_t[]> watch = owner;
  const uint8_t* begin = owner.get();
  SafetensorsFile file = view_safetensors_bytes(owner, begin, bytes.size(), "sample");
  owner.reset();
  EXPECT_FALSE(watch.expired()) << "the tensors keep the bytes alive";
  const Tensor& a = *file.find("a");
  const auto* pa = static_cast<const uint8_t*>(a.raw_data());
  EXPECT_TRUE(pa >= begin && pa < begin + bytes.size()) << "a is a view, not a copy";
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(file.find("b")->to_vector<int64_t>(), (std::vector<int64_t>{7, -8}));
  file.tensors.clear();
  EXPECT_TRUE(watch.expired()) << "the last view released the bytes";
}

TEST(SafetensorsView, MisalignedBytesAreCopiedAndChecksStillApply) {
  std::vector<uint8_t> bytes = sample_bytes();
  std::vector<uint8_t> shifted(bytes.size() + 1);
  std::memcpy(shifted.data() + 1, bytes.data(), bytes.size());
  auto owner = std::make_shared<int>(0);
  SafetensorsFile file = view_safetensors_bytes(owner, shifted.data() + 1, bytes.size(), "odd");
  const auto* pa = static_cast<const uint8_t*>(file.find("a")->raw_data());
  EXPECT_FALSE(pa >= shifted.data() && pa < shifted.data() + shifted.size());
  EXPECT_EQ(file.find("a")->to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  expect_error([&] { view_safetensors_bytes(owner, bytes.data(), bytes.size() - 3, "cut"); },
               {"cut", "truncated"});
}

}  // namespace
}  // namespace kiln
