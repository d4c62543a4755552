#pragma once
// Public keys and signature verification for JWTs (trusted publishing, auth/oidc.hpp):
// RS256 (RSASSA-PKCS1-v1_5 with SHA-256) and ES256 (ECDSA P-256 with SHA-256).

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>

namespace wf::crypto {

enum class SignatureAlg : std::uint8_t { rs256, es256 };

/// A public key; copies share it. Immutable, thread-safe.
class PublicKey {
 public:
  /// An RSA key from its modulus and exponent (big-endian bytes); nullopt when they are not one.
  [[nodiscard]] static std::optional<PublicKey> rsa(std::string_view n, std::string_view e);
  /// A P-256 key from its coordinates (32 big-endian bytes each); nullopt when they are not a
  /// point of the curve.
  [[nodiscard]] static std::optional<PublicKey> p256(std::string_view x, std::string_view y);

  /// The algorithm this key verifies.
  [[nodiscard]] SignatureAlg alg() const { return alg_; }
  /// True when `signature` signs `input` under this key's algorithm: PKCS#1 v1.5 bytes for
  /// RS256; for ES256 the JWS form, r and s as 32 bytes each.
  [[nodiscard]] bool verify(std::string_view input, std::string_view signature) const;

 private:
  PublicKey(SignatureAlg alg, std::shared_ptr<void> pkey) : alg_(alg), pkey_(std::move(pkey)) {}
  SignatureAlg alg_;
  std::shared_ptr<void> pkey_;  ///< an EVP_PKEY
};

}  // namespace wf::crypto
