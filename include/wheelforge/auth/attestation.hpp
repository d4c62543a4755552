#pragma once
// PEP 740 attestations (docs/publishing.md, "Attestations"): the offline verification of the
// attestations an upload carries against the operator's trust roots, the file it comes with,
// and the trusted publisher whose token uploads it. No I/O.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "wheelforge/catalog/catalog.hpp"
#include "wheelforge/crypto/certificate.hpp"
#include "wheelforge/crypto/signing_key.hpp"
#include "wheelforge/render/attestation.hpp"
#include "wheelforge/util/result.hpp"

namespace wf::auth {

/// The predicate types accepted (PyPI's publish attestation and SLSA provenance v1).
inline constexpr std::string_view kPublishPredicate =
    "https://docs.pypi.org/attestations/publish/v1";
inline constexpr std::string_view kSlsaPredicate = "https://slsa.dev/provenance/v1";

/// What an upload's attestations are checked against.
struct AttestationCheck {
  std::string filename;  ///< the file's name as uploaded
  std::string sha256;    ///< the file's sha256, lower-case hex
  std::int64_t now = 0;  ///< seconds since the epoch: every certificate must be valid then
  /// The trusted publisher whose minted token uploads the file, and its issuer's URL; nullptr
  /// for any other token.
  const catalog::PublisherRecord* publisher = nullptr;
  std::string publisher_issuer_url;
};

/// Attestations that passed.
struct VerifiedAttestations {
  std::vector<std::string> attestations;  ///< the objects as stored and served (compact JSON)
  render::ProvenancePublisher publisher;  ///< who signed, as the certificates say
  std::string identity;                   ///< the signing certificate's identity (its SAN)
};

/// Verifies `json` (the `attestations` form field: a JSON array of attestation objects). Each
/// one's certificate must chain to `roots` and be valid at `check.now` with code signing among
/// its uses; its signature must sign the DSSE envelope of its statement; the statement must be
/// an in-toto v1 statement with one subject naming the file and its sha256, of a predicate type
/// above. All must name one signer, and that signer must be `check.publisher` where there is one
/// (certificate_matches_publisher). Errc::invalid naming the attestation and what failed.
[[nodiscard]] Result<VerifiedAttestations> verify_attestations(std::string_view json,
                                                               const crypto::TrustStore& roots,
                                                               const AttestationCheck& check);

/// Ok when `certificate` was issued for a CI job that `publisher` accepts: its OIDC issuer
/// extension is `issuer_url`, and each of the publisher's claims that a Fulcio-style
/// certificate carries (repository, repository_owner, job_workflow_ref, workflow_ref, ref, sha,
/// project_path, namespace_path, ci_config_ref_uri, ref_path, ...) has the claim's value there.
/// Errc::invalid naming the first mismatch, or the publisher's having no such claim.
[[nodiscard]] Status certificate_matches_publisher(const crypto::Certificate& certificate,
                                                   const catalog::PublisherRecord& publisher,
                                                   std::string_view issuer_url);

/// The DSSE pre-authentication encoding of an in-toto statement: what its signature signs.
[[nodiscard]] std::string dsse_pae(std::string_view statement);

/// What signs the provenance of the build runner's own wheels (docs/runner.md, "Provenance"):
/// the server's key and its certificate. Immutable, thread-safe.
class BuildSigner {
 public:
  /// Errc::invalid when `certificate` is not for `key` or not for code signing.
  [[nodiscard]] static Result<BuildSigner> make(crypto::SigningKey key,
                                                crypto::Certificate certificate);
  [[nodiscard]] const crypto::Certificate& certificate() const { return certificate_; }
  /// The provenance object of the wheel `filename` (`sha256`, lower-case hex) made as `facts`
  /// say: one attestation (render::build_statement), signed with the key, that
  /// verify_attestations accepts against a trust store holding the certificate (or its CA).
  [[nodiscard]] Result<std::string> provenance(const render::BuildFacts& facts,
                                               std::string_view filename,
                                               std::string_view sha256) const;

 private:
  BuildSigner(crypto::SigningKey key, crypto::Certificate certificate)
      : key_(std::move(key)), certificate_(std::move(certificate)) {}
  crypto::SigningKey key_;
  crypto::Certificate certificate_;
};

}  // namespace wf::auth
