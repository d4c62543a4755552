#pragma once
// A private key the server signs with (the provenance of the build runner's wheels,
// docs/runner.md "Provenance"), and the self-signed certificate that names it.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "wheelforge/util/result.hpp"

namespace wf::crypto {

/// A P-256 (ECDSA) or RSA private key; copies share it. Immutable, thread-safe.
class SigningKey {
 public:
  /// A new P-256 key.
  [[nodiscard]] static Result<SigningKey> generate();
  /// A PEM private key (PKCS#8, or the traditional EC / RSA forms, unencrypted); Errc::invalid
  /// when the text holds none, an encrypted one, or a key that is neither P-256 nor RSA of at
  /// least 2048 bits.
  [[nodiscard]] static Result<SigningKey> from_pem(std::string_view pem);

  /// Its PKCS#8 PEM form: a secret, for a file only its owner reads.
  [[nodiscard]] std::string private_pem() const;
  /// Its public key, DER SubjectPublicKeyInfo (Certificate::public_key_der compares with it).
  [[nodiscard]] std::string public_key_der() const;
  /// The signature of the SHA-256 of `message`: ECDSA's DER form, or RSA PKCS#1 v1.5
  /// (what Certificate::verify checks).
  [[nodiscard]] Result<std::string> sign(std::string_view message) const;
  /// A DER certificate for this key, signed by itself: subject CN=`common_name`, the subject
  /// alternative name URI `uri` when not empty, code signing its extended key use, valid from
  /// an hour before `now` (seconds since the epoch) for `days`.
  [[nodiscard]] Result<std::string> self_signed_certificate(std::string_view common_name,
                                                            std::string_view uri, std::int64_t now,
                                                            int days) const;

 private:
  explicit SigningKey(std::shared_ptr<void> pkey) : pkey_(std::move(pkey)) {}
  std::shared_ptr<void> pkey_;  ///< an EVP_PKEY
};

}  // namespace wf::crypto
