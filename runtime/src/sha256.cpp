// SHA-256 as FIPS 180-4 defines it: big-endian words, 64 rounds per 64-byte block, and the
// message padded with 0x80, zeros and its 64-bit bit length.
#include "kiln/sha256.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <system_error>
#include <vector>

#include "kiln/cpu_features.h"
#include "kiln/error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace kiln {

namespace {

// The first 32 bits of the fractional parts of the cube roots of the first 64 primes.
constexpr std::array<uint32_t, 64> kRoundConstants = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

// The first 32 bits of the fractional parts of the square roots of the first 8 primes.
constexpr std::array<uint32_t, 8> kInitialState = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};

constexpr size_t kBlockSize = 64;

// Written with shifts rather than a cast so it reads unaligned input on any host byte
// order; compilers turn it into one load and a byte swap.
inline uint32_t load_be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

inline void store_be32(uint32_t v, uint8_t* p) {
  p[0] = static_cast<uint8_t>(v >> 24);
  p[1] = static_cast<uint8_t>(v >> 16);
  p[2] = static_cast<uint8_t>(v >> 8);
  p[3] = static_cast<uint8_t>(v);
}

std::string to_hex(const std::array<uint8_t, 32>& bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex(2 * bytes.size(), '0');
  for (size_t i = 0; i < bytes.size(); ++i) {
    hex[2 * i] = kDigits[bytes[i] >> 4];
    hex[2 * i + 1] = kDigits[bytes[i] & 0xf];
  }
  return hex;
}

#if defined(__x86_64__) || defined(__i386__)
// The compression function on x86's SHA extensions. sha256rnds2 runs two rounds on the state
// held as ABEF and CDGH; sha256msg1/msg2 compute the message schedule four words at a time:
// W[t] = sigma1(W[t-2]) + W[t-7] + sigma0(W[t-15]) + W[t-16].
__attribute__((target("sha,sse4.1"))) void compress_sha_ni(std::array<uint32_t, 8>& state,
                                                           const uint8_t* blocks, size_t count) {
  const __m128i byte_swap = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
  // state[0..3] = a b c d and state[4..7] = e f g h, as little-endian lanes.
  __m128i dcba = _mm_loadu_si128(reinterpret_cast<const __m128i*>(&state[0]));
  __m128i hgfe = _mm_loadu_si128(reinterpret_cast<const __m128i*>(&state[4]));
  __m128i cdab = _mm_shuffle_epi32(dcba, 0xB1);
  __m128i efgh = _mm_shuffle_epi32(hgfe, 0x1B);
  __m128i abef = _mm_alignr_epi8(cdab, efgh, 8);
  __m128i cdgh = _mm_blend_epi16(efgh, cdab, 0xF0);
  for (; count > 0; --count, blocks += kBlockSize) {
    const __m128i abef_start = abef, cdgh_start = cdgh;
    __m128i w[4];  // the schedule's words 4i..4i+3 in w[i % 4]
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) {
      if (i < 4) {
        w[i] = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blocks + 16 * i)),
                                byte_swap);
      } else {
        __m128i t = _mm_sha256msg1_epu32(w[i % 4], w[(i - 3) % 4]);
        t = _mm_add_epi32(t, _mm_alignr_epi8(w[(i - 1) % 4], w[(i - 2) % 4], 4));
        w[i % 4] = _mm_sha256msg2_epu32(t, w[(i - 1) % 4]);
      }
      __m128i k = _mm_loadu_si128(reinterpret_cast<const __m128i*>(&kRoundConstants[4 * i]));
      __m128i wk = _mm_add_epi32(w[i % 4], k);
      cdgh = _mm_sha256rnds2_epu32(cdgh, abef, wk);
      abef = _mm_sha256rnds2_epu32(abef, cdgh, _mm_shuffle_epi32(wk, 0x0E));
    }
    abef = _mm_add_epi32(abef, abef_start);
    cdgh = _mm_add_epi32(cdgh, cdgh_start);
  }
  __m128i feba = _mm_shuffle_epi32(abef, 0x1B);
  __m128i dchg = _mm_shuffle_epi32(cdgh, 0xB1);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(&state[0]), _mm_blend_epi16(feba, dchg, 0xF0));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(&state[4]), _mm_alignr_epi8(dchg, feba, 8));
}

bool detect_sha_ni() {
  return host_has_cpu_feature("sha").value_or(false) &&
         host_has_cpu_feature("sse4.1").value_or(false);
}
#else
void compress_sha_ni(std::array<uint32_t, 8>&, const uint8_t*, size_t) {}
bool detect_sha_ni() {
  return false;
}
#endif

}  // namespace

bool Sha256::hardware_available() {
  static const bool available = detect_sha_ni();
  return available;
}

Sha256::Sha256(Implementation implementation)
    : hardware_(implementation == Implementation::Fastest && hardware_available()),
      state_(kInitialState) {}

void Sha256::compress(const uint8_t* blocks, size_t count) {
  if (hardware_) {
    compress_sha_ni(state_, blocks, count);
    return;
  }
  std::array<uint32_t, 64> w;
  for (; count > 0; --count, blocks += kBlockSize) {
    // The message schedule: 16 words of the block, then 48 mixed from earlier words.
    for (int t = 0; t < 16; ++t) w[t] = load_be32(blocks + 4 * t);
    for (int t = 16; t < 64; ++t) {
      uint32_t s0 = std::rotr(w[t - 15], 7) ^ std::rotr(w[t - 15], 18) ^ (w[t - 15] >> 3);
      uint32_t s1 = std::rotr(w[t - 2], 17) ^ std::rotr(w[t - 2], 19) ^ (w[t - 2] >> 10);
      w[t] = w[t - 16] + s0 + w[t - 7] + s1;
    }
    uint32_t a = state_[0], b = state_[1], c = state_[2], d = state_[3];
    uint32_t e = state_[4], f = state_[5], g = state_[6], h = state_[7];
    for (int t = 0; t < 64; ++t) {
      uint32_t big_sigma1 = std::rotr(e, 6) ^ std::rotr(e, 11) ^ std::rotr(e, 25);
      uint32_t choose = (e & f) ^ (~e & g);
      uint32_t t1 = h + big_sigma1 + choose + kRoundConstants[t] + w[t];
      uint32_t big_sigma0 = std::rotr(a, 2) ^ std::rotr(a, 13) ^ std::rotr(a, 22);
      uint32_t majority = (a & b) ^ (a & c) ^ (b & c);
      uint32_t t2 = big_sigma0 + majority;
      h = g;
      g = f;
      f = e;
      e = d + t1;
      d = c;
      c = b;
      b = a;
      a = t1 + t2;
    }
    state_[0] += a;
    state_[1] += b;
    state_[2] += c;
    state_[3] += d;
    state_[4] += e;
    state_[5] += f;
    state_[6] += g;
    state_[7] += h;
  }
}

void Sha256::update(const void* data, size_t size) {
  KILN_CHECK(!finished_,
             "[Sha256::update] expected update() before digest(), found update() called after "
             "digest() finished the hash. Fix: construct a new kiln::Sha256 for each message.");
  if (size == 0) return;
  KILN_CHECK(data != nullptr, "[Sha256::update] expected a pointer to ", size,
             " bytes, found nullptr. Fix: pass the buffer's data, or size 0.");
  const auto* bytes = static_cast<const uint8_t*>(data);
  message_bytes_ += size;
  // Top up a partial block first; whole blocks are then hashed straight from the input.
  if (pending_size_ > 0) {
    size_t take = std::min(size, kBlockSize - pending_size_);
    std::memcpy(pending_.data() + pending_size_, bytes, take);
    pending_size_ += take;
    bytes += take;
    size -= take;
    if (pending_size_ < kBlockSize) return;
    compress(pending_.data(), 1);
    pending_size_ = 0;
  }
  size_t whole = size / kBlockSize;
  compress(bytes, whole);
  bytes += whole * kBlockSize;
  size -= whole * kBlockSize;
  std::memcpy(pending_.data(), bytes, size);
  pending_size_ = size;
}

std::array<uint8_t, 32> Sha256::digest() {
  if (finished_) return digest_;
  // Padding: a 1 bit, zeros up to 56 bytes into a block, then the length in bits
  // (modulo 2^64, as the standard says), big-endian.
  uint64_t bit_length = message_bytes_ * 8;
  pending_[pending_size_++] = 0x80;
  if (pending_size_ > kBlockSize - 8) {
    std::memset(pending_.data() + pending_size_, 0, kBlockSize - pending_size_);
    compress(pending_.data(), 1);
    pending_size_ = 0;
  }
  std::memset(pending_.data() + pending_size_, 0, kBlockSize - 8 - pending_size_);
  store_be32(static_cast<uint32_t>(bit_length >> 32), pending_.data() + 56);
  store_be32(static_cast<uint32_t>(bit_length), pending_.data() + 60);
  compress(pending_.data(), 1);
  pending_size_ = 0;
  for (size_t i = 0; i < state_.size(); ++i) store_be32(state_[i], digest_.data() + 4 * i);
  finished_ = true;
  return digest_;
}

std::string sha256_hex(const void* data, size_t size) {
  Sha256 hash;
  hash.update(data, size);
  return to_hex(hash.digest());
}

std::string sha256_file_hex(const std::string& path) {
  struct FileCloser {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  std::unique_ptr<std::FILE, FileCloser> file(std::fopen(path.c_str(), "rb"));
  if (!file) {
    std::string reason = std::generic_category().message(errno);
    KILN_FAIL("[sha256_file_hex] expected a readable file, found '", path,
              "' cannot be opened: ", reason, ". Fix: check the path and its permissions.");
  }
  constexpr size_t kChunkSize = size_t{1} << 20;
  std::vector<uint8_t> chunk(kChunkSize);
  Sha256 hash;
  uint64_t total = 0;
  for (;;) {
    size_t got = std::fread(chunk.data(), 1, chunk.size(), file.get());
    int read_errno = errno;
    hash.update(chunk.data(), got);
    total += got;
    if (got == chunk.size()) continue;
    if (std::ferror(file.get())) {
      std::string reason = std::generic_category().message(read_errno);
      KILN_FAIL("[sha256_file_hex] expected to read all of '", path,
                "', found reading failed after ", total, " bytes: ", reason,
                ". Fix: check that the path is a regular file and the disk is readable.");
    }
    break;
  }
  return to_hex(hash.digest());
}

}  // namespace kiln
