#include "wheelforge/crypto/blake2b.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "wheelforge/util/strings.hpp"

namespace wf::crypto {
namespace {

// The SHA-512 initialisation vector, as BLAKE2b prescribes (docs/formats.md, "BLAKE2b").
constexpr std::array<std::uint64_t, 8> kIv = {
    0x6a09e667f3bcc908ULL, 0xbb67ae8584caa73bULL, 0x3c6ef372fe94f82bULL, 0xa54ff53a5f1d36f1ULL,
    0x510e527fade682d1ULL, 0x9b05688c2b3e6c1fULL, 0x1f83d9abfb41bd6bULL, 0x5be0cd19137e2179ULL};

// Message word schedule (SIGMA: docs/formats.md, "BLAKE2b"); rounds 10 and 11 reuse rows 0
// and 1.
constexpr std::array<std::array<std::uint8_t, 16>, 10> kSigma = {{
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
    {11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4},
    {7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8},
    {9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13},
    {2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9},
    {12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11},
    {13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10},
    {6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5},
    {10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0},
}};

constexpr int kRounds = 12;

constexpr std::uint64_t rotr(std::uint64_t x, unsigned n) {
  return (x >> n) | (x << (64U - n));
}

// Little-endian regardless of the host, since BLAKE2b defines words that way.
std::uint64_t load_le64(const unsigned char* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8U) | p[i];
  return v;
}

void mix(std::array<std::uint64_t, 16>& v, std::size_t a, std::size_t b, std::size_t c,
         std::size_t d, std::uint64_t x, std::uint64_t y) {
  v[a] = v[a] + v[b] + x;
  v[d] = rotr(v[d] ^ v[a], 32);
  v[c] = v[c] + v[d];
  v[b] = rotr(v[b] ^ v[c], 24);
  v[a] = v[a] + v[b] + y;
  v[d] = rotr(v[d] ^ v[a], 16);
  v[c] = v[c] + v[d];
  v[b] = rotr(v[b] ^ v[c], 63);
}

}  // namespace

Blake2b::Blake2b(std::size_t digest_bytes) : digest_bytes_(digest_bytes) {
  if (digest_bytes == 0 || digest_bytes > kMaxDigestBytes) {
    throw std::invalid_argument("BLAKE2b digest length must be 1..64 bytes");
  }
  h_ = kIv;
  // Parameter block word 0: digest length, key length 0, fanout 1, depth 1.
  h_[0] ^= 0x01010000ULL ^ static_cast<std::uint64_t>(digest_bytes);
}

void Blake2b::compress(const unsigned char* block, bool last) {
  std::array<std::uint64_t, 16> m{};
  for (std::size_t i = 0; i < 16; ++i) m[i] = load_le64(block + 8 * i);

  std::array<std::uint64_t, 16> v{};
  std::copy(h_.begin(), h_.end(), v.begin());
  std::copy(kIv.begin(), kIv.end(), v.begin() + 8);
  v[12] ^= counter_low_;
  v[13] ^= counter_high_;
  if (last) v[14] = ~v[14];

  for (int round = 0; round < kRounds; ++round) {
    const auto& s = kSigma[static_cast<std::size_t>(round % 10)];
    mix(v, 0, 4, 8, 12, m[s[0]], m[s[1]]);
    mix(v, 1, 5, 9, 13, m[s[2]], m[s[3]]);
    mix(v, 2, 6, 10, 14, m[s[4]], m[s[5]]);
    mix(v, 3, 7, 11, 15, m[s[6]], m[s[7]]);
    mix(v, 0, 5, 10, 15, m[s[8]], m[s[9]]);
    mix(v, 1, 6, 11, 12, m[s[10]], m[s[11]]);
    mix(v, 2, 7, 8, 13, m[s[12]], m[s[13]]);
    mix(v, 3, 4, 9, 14, m[s[14]], m[s[15]]);
  }
  for (std::size_t i = 0; i < 8; ++i) h_[i] ^= v[i] ^ v[i + 8];
}

void Blake2b::update(const void* data, std::size_t size) {
  const auto* in = static_cast<const unsigned char*>(data);
  while (size > 0) {
    // A full buffer is compressed only once more input arrives: the final block must be
    // compressed with the "last" flag, and only finish() knows which block that is.
    if (buffered_ == kBlockBytes) {
      counter_low_ += kBlockBytes;
      if (counter_low_ < kBlockBytes) ++counter_high_;
      compress(buffer_.data(), false);
      buffered_ = 0;
    }
    const std::size_t take = std::min(size, kBlockBytes - buffered_);
    std::memcpy(buffer_.data() + buffered_, in, take);
    buffered_ += take;
    in += take;
    size -= take;
  }
}

std::string Blake2b::finish() {
  counter_low_ += buffered_;
  if (counter_low_ < buffered_) ++counter_high_;
  std::fill(buffer_.begin() + static_cast<std::ptrdiff_t>(buffered_), buffer_.end(), 0);
  compress(buffer_.data(), true);

  std::string out(digest_bytes_, '\0');
  for (std::size_t i = 0; i < digest_bytes_; ++i) {
    out[i] = static_cast<char>((h_[i / 8] >> (8 * (i % 8))) & 0xffU);
  }
  return out;
}

std::string blake2b_256_hex(std::string_view bytes) {
  Blake2b h(32);
  h.update(bytes);
  return hex_encode(h.finish());
}

}  // namespace wf::crypto
