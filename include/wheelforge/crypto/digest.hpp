#pragma once
// Message digests and randomness. The only module that touches OpenSSL.

#include <memory>
#include <string>
#include <string_view>

namespace wf::crypto {

/// blake2b_256 is BLAKE2b with a 32-byte digest (the upload API's `blake2_256_digest`),
/// computed by wf::crypto::Blake2b because OpenSSL 3.0 only offers the 64-byte variant.
enum class Algorithm { sha256, md5, blake2b_256 };

/// Incremental digest. update() may be called any number of times, then finish() once.
class Hasher {
 public:
  explicit Hasher(Algorithm algorithm);
  Hasher(Hasher&&) noexcept;
  Hasher& operator=(Hasher&&) noexcept;
  Hasher(const Hasher&) = delete;
  Hasher& operator=(const Hasher&) = delete;
  ~Hasher();

  void update(std::string_view bytes);
  void update(const void* data, std::size_t size);
  /// Returns the raw digest bytes. The Hasher cannot be used afterwards.
  [[nodiscard]] std::string finish();
  /// finish() as lower-case hex.
  [[nodiscard]] std::string finish_hex();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

[[nodiscard]] std::string sha256_hex(std::string_view bytes);
[[nodiscard]] std::string sha256_raw(std::string_view bytes);

/// HMAC-SHA256 of `message` under `key` (RFC 2104): the 32 raw bytes. Signature Version 4
/// (the S3 client's request signing) chains it.
[[nodiscard]] std::string hmac_sha256(std::string_view key, std::string_view message);

/// Cryptographically secure random bytes (RAND_bytes). Throws on RNG failure.
[[nodiscard]] std::string random_bytes(std::size_t n);

/// Compares two strings in time independent of where they differ (lengths may leak).
[[nodiscard]] bool constant_time_equals(std::string_view a, std::string_view b);

}  // namespace wf::crypto
