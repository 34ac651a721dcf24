// SHA-256: the FIPS 180-4 / NIST example vectors, incremental updates at every split point,
// files read in chunks, and the errors for misuse and unreadable files.
#include "kiln/sha256.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "test_util.h"

namespace kiln {
namespace {

std::string hex_of(const std::string& s) {
  return sha256_hex(s.data(), s.size());
}

std::string to_hex(const std::array<uint8_t, 32>& bytes) {
  std::string hex;
  char buf[3];
  for (uint8_t b : bytes) {
    std::snprintf(buf, sizeof buf, "%02x", b);
    hex += buf;
  }
  return hex;
}

// A scratch path unique to this process and test, removed when the test ends.
class TempPath {
 public:
  explicit TempPath(const std::string& name)
      : path_(std::filesystem::path(::testing::TempDir()) /
              ("kiln_sha256_" + std::to_string(::getpid()) + "_" + name)) {}
  ~TempPath() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string str() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

TEST(Sha256, NistVectors) {
  EXPECT_EQ(hex_of(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(hex_of("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  // 448 bits: the padding's length field no longer fits in the message's block.
  EXPECT_EQ(hex_of("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(hex_of("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmno"
                   "ijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu"),
            "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
}

TEST(Sha256, OneMillionA) {
  const std::string expected = "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0";
  EXPECT_EQ(hex_of(std::string(1000000, 'a')), expected);
  // The same message fed in pieces that are not a multiple of the block size.
  Sha256 hash;
  const std::string piece(999, 'a');
  size_t fed = 0;
  while (fed < 1000000) {
    size_t n = std::min(piece.size(), 1000000 - fed);
    hash.update(piece.data(), n);
    fed += n;
  }
  EXPECT_EQ(to_hex(hash.digest()), expected);
}

TEST(Sha256, IncrementalUpdatesMatchOneShotAtEverySplit) {
  std::vector<uint8_t> message(131);
  for (size_t i = 0; i < message.size(); ++i) message[i] = static_cast<uint8_t>(i * 37 + 11);
  const std::string expected = sha256_hex(message.data(), message.size());
  for (size_t split = 0; split < message.size(); ++split) {
    Sha256 hash;
    hash.update(message.data(), split);
    hash.update(message.data() + split, message.size() - split);
    EXPECT_EQ(to_hex(hash.digest()), expected) << "split at " << split;
  }
  // Byte by byte: every update lands in a partial block.
  Sha256 bytewise;
  for (uint8_t b : message) bytewise.update(&b, 1);
  EXPECT_EQ(to_hex(bytewise.digest()), expected);
}

TEST(Sha256, DigestIsStableAndEndsTheMessage) {
  Sha256 hash;
  hash.update("abc", 3);
  auto first = hash.digest();
  EXPECT_EQ(hash.digest(), first);
  EXPECT_EQ(to_hex(first), hex_of("abc"));
  expect_error([&] { hash.update("d", 1); },
               {"[Sha256::update]", "after digest()", "Fix: construct a new kiln::Sha256"});
  // An empty update after digest() is still misuse.
  expect_error([&] { hash.update(nullptr, 0); }, {"[Sha256::update]", "after digest()"});
}

TEST(Sha256, NullDataWithNonzeroSizeIsAnError) {
  Sha256 hash;
  hash.update(nullptr, 0);
  expect_error([&] { hash.update(nullptr, 5); },
               {"[Sha256::update]", "expected a pointer to 5 bytes", "found nullptr", "Fix:"});
}

TEST(Sha256, FileDigestEqualsBytesDigest) {
  // Larger than one 1 MiB read chunk, and not a multiple of it or of the block size.
  std::string bytes((size_t{1} << 20) + 12345, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>((i * 131) >> 3);
  TempPath file("big.bin");
  write_file(file.str(), bytes);
  EXPECT_EQ(sha256_file_hex(file.str()), hex_of(bytes));

  TempPath empty("empty.bin");
  write_file(empty.str(), "");
  EXPECT_EQ(sha256_file_hex(empty.str()),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(Sha256, MissingFileNamesPathAndReason) {
  TempPath missing("does_not_exist.bin");
  expect_error([&] { sha256_file_hex(missing.str()); },
               {"[sha256_file_hex]", "expected a readable file", missing.str(), "cannot be opened",
                "No such file or directory", "Fix: check the path"});
}

TEST(Sha256, UnreadableFileNamesPathAndReason) {
  // Opening a directory for reading succeeds on Linux; reading it fails with EISDIR.
  TempPath dir("a_directory");
  std::filesystem::create_directory(dir.str());
  expect_error(
      [&] { sha256_file_hex(dir.str()); },
      {"[sha256_file_hex]", dir.str(), "reading failed after 0 bytes", "Is a directory", "Fix:"});
}

// The CPU's SHA instructions (where present) and the portable code agree on the NIST
// vectors and on every length from 0 to 300 bytes of varied data, hashed in uneven pieces.
TEST(Sha256, HardwareAndPortableAgree) {
  std::cout << "SHA instructions on this machine: " << (Sha256::hardware_available() ? "yes" : "no")
            << "\n";
  auto digest_of = [](Sha256::Implementation impl, const std::string& s, size_t piece) {
    Sha256 hash(impl);
    for (size_t at = 0; at < s.size(); at += piece)
      hash.update(s.data() + at, std::min(piece, s.size() - at));
    return to_hex(hash.digest());
  };
  for (auto impl : {Sha256::Implementation::Fastest, Sha256::Implementation::Portable}) {
    EXPECT_EQ(digest_of(impl, "abc", 1),
              "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    EXPECT_EQ(digest_of(impl, std::string(1000000, 'a'), 4099),
              "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  }
  std::string data;
  for (int i = 0; i < 300; ++i) data.push_back(static_cast<char>((i * 131 + 7) % 251));
  for (size_t n = 0; n <= data.size(); ++n) {
    std::string s = data.substr(0, n);
    EXPECT_EQ(digest_of(Sha256::Implementation::Fastest, s, 37),
              digest_of(Sha256::Implementation::Portable, s, 64))
        << n << " bytes";
  }
}

}  // namespace
}  // namespace kiln
