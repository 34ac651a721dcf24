// SHA-256 (FIPS 180-4), so the runtime can verify an exported artifact's files against the
// digests in its manifest without depending on a crypto library.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace kiln {

// Incremental SHA-256: feed bytes with update() in any split, then read digest() once.
class Sha256 {
 public:
  // Fastest: the CPU's SHA instructions where it has them (x86 SHA-NI: about 5x the
  // portable code), else the portable code. Portable: always the portable code (tests
  // compare the two).
  enum class Implementation { Fastest, Portable };
  explicit Sha256(Implementation implementation = Implementation::Fastest);
  // Whether Fastest uses the CPU's SHA instructions on this machine.
  static bool hardware_available();

  // Appends bytes to the message. Throws kiln::Error after digest() has finished the hash.
  void update(const void* data, size_t size);

  // Pads the message and returns its 32-byte digest. Calling it again returns the same
  // digest; the object accepts no more update()s.
  std::array<uint8_t, 32> digest();

 private:
  // Runs the compression function over `count` consecutive 64-byte blocks.
  void compress(const uint8_t* blocks, size_t count);

  bool hardware_ = false;
  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> pending_;  // a partial block waiting for more bytes
  size_t pending_size_ = 0;
  uint64_t message_bytes_ = 0;
  bool finished_ = false;
  std::array<uint8_t, 32> digest_{};
};

// The digest of `size` bytes as 64 lowercase hex characters (the form `sha256sum` prints).
std::string sha256_hex(const void* data, size_t size);

// The digest of a file's contents as 64 lowercase hex characters, read in 1 MiB chunks so
// large weight files never sit in memory whole. Throws kiln::Error naming the path and the
// system's reason when the file cannot be opened or read.
std::string sha256_file_hex(const std::string& path);

}  // namespace kiln
