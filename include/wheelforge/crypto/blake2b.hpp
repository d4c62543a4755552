#pragma once
// BLAKE2b (docs/formats.md, "BLAKE2b"), unkeyed, with a configurable digest length. OpenSSL 3.0
// only offers BLAKE2b-512, while twine sends `blake2_256_digest` (docs/packaging.md, "Uploads"):
// BLAKE2b with a 32-byte output, which is a different function from a truncated BLAKE2b-512
// (the length is hashed in).

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace wf::crypto {

/// Incremental unkeyed BLAKE2b. update() may be called any number of times, then finish()
/// once; the object cannot be used afterwards.
class Blake2b {
 public:
  static constexpr std::size_t kBlockBytes = 128;
  static constexpr std::size_t kMaxDigestBytes = 64;

  /// digest_bytes must be in 1..64; throws std::invalid_argument otherwise (a programming
  /// error, never a consequence of input data).
  explicit Blake2b(std::size_t digest_bytes);

  void update(const void* data, std::size_t size);
  void update(std::string_view bytes) { update(bytes.data(), bytes.size()); }
  /// Returns the raw digest, digest_bytes long.
  [[nodiscard]] std::string finish();

 private:
  void compress(const unsigned char* block, bool last);

  std::array<std::uint64_t, 8> h_{};
  std::array<unsigned char, kBlockBytes> buffer_{};
  std::size_t buffered_ = 0;
  // The byte counter is 128 bits wide in the algorithm; two words keep files above 2^64 bytes
  // correct in principle, at no cost.
  std::uint64_t counter_low_ = 0;
  std::uint64_t counter_high_ = 0;
  std::size_t digest_bytes_;
};

/// Lower-case hex of BLAKE2b with a 32-byte digest (the upload API's `blake2_256_digest`).
[[nodiscard]] std::string blake2b_256_hex(std::string_view bytes);

}  // namespace wf::crypto
