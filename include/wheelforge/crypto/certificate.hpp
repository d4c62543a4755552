#pragma once
// X.509 certificates for attestations (docs/publishing.md, "Attestations"): a signing
// certificate's identity (its Fulcio-style claim extensions and subject alternative names), its
// signature over a message, and its chain to the trust roots an operator configured.

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "wheelforge/util/result.hpp"

namespace wf::crypto {

/// One certificate; copies share it. Immutable, thread-safe.
class Certificate {
 public:
  /// A DER certificate; Errc::invalid when the bytes are not one (or have bytes after it).
  [[nodiscard]] static Result<Certificate> from_der(std::string_view der);
  /// Every certificate of a PEM text, in order; Errc::invalid when it holds none or a block
  /// that is not one.
  [[nodiscard]] static Result<std::vector<Certificate>> from_pem(std::string_view pem);

  /// The value of the extension `oid` (dotted, "1.3.6.1.4.1.57264.1.8") when its contents are a
  /// DER UTF8String (Fulcio's claims from .1.8 on); for the older Fulcio claims (.1.1 to .1.6),
  /// whose contents are the raw text, that text. nullopt when the certificate lacks it.
  [[nodiscard]] std::optional<std::string> text_extension(std::string_view oid) const;
  /// The URIs and the e-mail addresses among its subject alternative names.
  [[nodiscard]] std::vector<std::string> san_uris() const;
  [[nodiscard]] std::vector<std::string> san_emails() const;
  /// Its subject, one line ("CN=..., O=...").
  [[nodiscard]] std::string subject() const;
  /// Who it names, for messages: its first SAN URI, else its first e-mail, else its subject.
  [[nodiscard]] std::string describe() const;
  /// Seconds since the epoch.
  [[nodiscard]] std::int64_t not_before() const;
  [[nodiscard]] std::int64_t not_after() const;
  /// Its DER bytes, and its PEM text.
  [[nodiscard]] std::string der() const;
  [[nodiscard]] std::string pem() const;
  /// Its public key, DER SubjectPublicKeyInfo.
  [[nodiscard]] std::string public_key_der() const;
  /// True when its extended key usage includes code signing.
  [[nodiscard]] bool for_code_signing() const;
  /// True when `signature` (ECDSA's DER form, or RSA PKCS#1 v1.5) signs the SHA-256 of `message`
  /// under its public key.
  [[nodiscard]] bool verify(std::string_view message, std::string_view signature) const;

 private:
  friend class TrustStore;
  explicit Certificate(std::shared_ptr<void> x509) : x509_(std::move(x509)) {}
  std::shared_ptr<void> x509_;  ///< an X509
};

/// The certificates an operator trusts (a PEM bundle: roots and their intermediate CAs).
/// Immutable, thread-safe.
class TrustStore {
 public:
  /// Errc::invalid when `pem` holds no certificate, or a block that is not one.
  [[nodiscard]] static Result<TrustStore> from_pem(std::string_view pem);
  [[nodiscard]] std::size_t size() const { return certificates_.size(); }

  /// Ok when `leaf` chains, through `intermediates` and this store's certificates, to a
  /// self-signed certificate of this store, with every certificate of the chain valid at `at`
  /// (seconds since the epoch). Errc::unauthorized naming what failed otherwise.
  [[nodiscard]] Status verify(const Certificate& leaf, std::span<const Certificate> intermediates,
                              std::int64_t at) const;

 private:
  std::vector<Certificate> certificates_;
};

}  // namespace wf::crypto
