// PEP 740 attestations (auth/attestation.hpp).

#include "wheelforge/auth/attestation.hpp"

#include <algorithm>
#include <array>

#include "wheelforge/core/filename.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::auth {
namespace {

// Fulcio's certificate extensions (github.com/sigstore/fulcio, docs/oid-info.md).
constexpr std::string_view kIssuerV1 = "1.3.6.1.4.1.57264.1.1";
constexpr std::string_view kIssuerV2 = "1.3.6.1.4.1.57264.1.8";
constexpr std::string_view kBuildConfigUri = "1.3.6.1.4.1.57264.1.18";
constexpr std::string_view kSourceRepositoryUri = "1.3.6.1.4.1.57264.1.12";

// How a claim's value appears in the certificate: as the extension's whole value, or as its
// path (the value without "https://HOST/"; GitLab's claims that name the host compare with the
// value without "https://").
enum class Form : std::uint8_t { exact, path };
struct ClaimExtension {
  std::string_view claim;
  std::string_view oid;
  Form form;
};
constexpr std::array kClaimExtensions{
    // GitHub Actions
    ClaimExtension{"repository", kSourceRepositoryUri, Form::path},
    ClaimExtension{"repository_id", "1.3.6.1.4.1.57264.1.15", Form::exact},
    ClaimExtension{"repository_owner", "1.3.6.1.4.1.57264.1.16", Form::path},
    ClaimExtension{"repository_owner_id", "1.3.6.1.4.1.57264.1.17", Form::exact},
    ClaimExtension{"job_workflow_ref", "1.3.6.1.4.1.57264.1.9", Form::path},
    ClaimExtension{"workflow_ref", kBuildConfigUri, Form::path},
    ClaimExtension{"ref", "1.3.6.1.4.1.57264.1.14", Form::exact},
    ClaimExtension{"sha", "1.3.6.1.4.1.57264.1.13", Form::exact},
    ClaimExtension{"event_name", "1.3.6.1.4.1.57264.1.20", Form::exact},
    ClaimExtension{"runner_environment", "1.3.6.1.4.1.57264.1.11", Form::exact},
    // GitLab CI
    ClaimExtension{"project_path", kSourceRepositoryUri, Form::path},
    ClaimExtension{"project_id", "1.3.6.1.4.1.57264.1.15", Form::exact},
    ClaimExtension{"namespace_path", "1.3.6.1.4.1.57264.1.16", Form::path},
    ClaimExtension{"namespace_id", "1.3.6.1.4.1.57264.1.17", Form::exact},
    ClaimExtension{"ci_config_ref_uri", kBuildConfigUri, Form::path},
    ClaimExtension{"ref_path", "1.3.6.1.4.1.57264.1.14", Form::exact},
};

// "https://HOST/REST" -> "REST"; anything else as it is.
std::string_view path_of(std::string_view uri) {
  if (!uri.starts_with("https://")) return uri;
  const std::string_view rest = uri.substr(8);
  const std::size_t slash = rest.find('/');
  return slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
}

bool claim_holds(Form form, std::string_view in_certificate, std::string_view claim) {
  if (in_certificate == claim) return true;
  if (form == Form::exact) return false;
  return path_of(in_certificate) == claim ||
         (in_certificate.starts_with("https://") && in_certificate.substr(8) == claim);
}

std::optional<std::string> issuer_of(const crypto::Certificate& c) {
  if (auto v2 = c.text_extension(kIssuerV2)) return v2;
  return c.text_extension(kIssuerV1);
}

// Who signed, as PEP 740's publisher object: GitHub and GitLab by the shape of the build
// configuration URI, anything else by its issuer and identity.
render::ProvenancePublisher publisher_of(const crypto::Certificate& c, std::string_view identity) {
  const std::string config = c.text_extension(kBuildConfigUri).value_or("");
  const std::string repository{path_of(c.text_extension(kSourceRepositoryUri).value_or(""))};
  const std::string_view config_path = path_of(config);
  const std::string_view file = config_path.substr(0, config_path.rfind('@'));
  render::ProvenancePublisher p;
  if (const std::size_t at = file.find("/.github/workflows/");
      !repository.empty() && at != std::string_view::npos) {
    p.kind = "GitHub";
    p.fields = {{"repository", repository}, {"workflow", std::string(file.substr(at + 19))}};
  } else if (const std::size_t sep = file.find("//");
             !repository.empty() && sep != std::string_view::npos) {
    p.kind = "GitLab";
    p.fields = {{"repository", repository},
                {"workflow_filepath", std::string(file.substr(sep + 2))}};
  } else {
    p.kind = issuer_of(c).value_or("unknown");
    p.fields = {{"identity", std::string(identity)}};
  }
  return p;
}

Error refused(std::size_t index, std::string_view what) {
  return make_error(Errc::invalid,
                    "attestation " + std::to_string(index + 1) + ": " + std::string(what));
}

}  // namespace

std::string dsse_pae(std::string_view statement) {
  constexpr std::string_view type = "application/vnd.in-toto+json";
  std::string out = "DSSEv1 " + std::to_string(type.size()) + " ";
  out.append(type);
  out += " " + std::to_string(statement.size()) + " ";
  out.append(statement);
  return out;
}

Status certificate_matches_publisher(const crypto::Certificate& certificate,
                                     const catalog::PublisherRecord& publisher,
                                     std::string_view issuer_url) {
  const std::string name = "trusted publisher #" + std::to_string(publisher.id);
  const auto issuer = issuer_of(certificate);
  if (!issuer || *issuer != issuer_url) {
    return make_error(Errc::invalid, "its certificate was issued for a job of " +
                                         issuer.value_or("no OIDC issuer") + ", not of " + name +
                                         "'s issuer " + std::string(issuer_url));
  }
  std::size_t compared = 0;
  for (const auto& [claim, value] : publisher.claims) {
    for (const ClaimExtension& ce : kClaimExtensions) {
      if (ce.claim != claim) continue;
      ++compared;
      const auto in_certificate = certificate.text_extension(ce.oid);
      if (!in_certificate || !claim_holds(ce.form, *in_certificate, value)) {
        return make_error(Errc::invalid, "its certificate does not match " + name +
                                             ": the publisher requires " + claim + "=" + value +
                                             ", the certificate says " +
                                             in_certificate.value_or("nothing") + " (extension " +
                                             std::string(ce.oid) + ")");
      }
    }
  }
  if (compared == 0) {
    return make_error(Errc::invalid, name +
                                         " requires no claim that a signing certificate "
                                         "carries (such as repository or project_path), so "
                                         "no certificate can be matched to it");
  }
  return ok_status();
}

Result<VerifiedAttestations> verify_attestations(std::string_view json,
                                                 const crypto::TrustStore& roots,
                                                 const AttestationCheck& check) {
  auto objects = render::parse_attestations(json);
  if (!objects) return objects.error();
  VerifiedAttestations out;
  const std::string file_key = core::canonical_file_key(check.filename);
  for (std::size_t i = 0; i < objects->size(); ++i) {
    const render::AttestationObject& a = (*objects)[i];
    auto certificate = crypto::Certificate::from_der(a.certificate);
    if (!certificate) {
      return refused(i, "verification_material.certificate: " + certificate.error().message);
    }
    if (auto chained = roots.verify(*certificate, {}, check.now); !chained) {
      return refused(i, chained.error().message);
    }
    if (!certificate->for_code_signing()) {
      return refused(i, "its certificate is not for code signing (extended key usage)");
    }
    if (!certificate->verify(dsse_pae(a.statement), a.signature)) {
      return refused(i, "the signature does not verify with its certificate's key");
    }
    auto statement = render::parse_intoto_statement(a.statement);
    if (!statement) return refused(i, statement.error().message);
    if (statement->subjects.size() != 1) {
      return refused(i, "the statement has " + std::to_string(statement->subjects.size()) +
                            " subjects, not one");
    }
    const render::StatementSubject& subject = statement->subjects.front();
    if (subject.name != check.filename && core::canonical_file_key(subject.name) != file_key) {
      return refused(i, "the statement is about " + subject.name + ", not " + check.filename);
    }
    if (to_lower(subject.sha256) != check.sha256) {
      return refused(i, "the statement's sha256 (" + subject.sha256 + ") is not the file's (" +
                            check.sha256 + ")");
    }
    if (statement->predicate_type != kPublishPredicate &&
        statement->predicate_type != kSlsaPredicate) {
      return refused(i, "predicate type " + statement->predicate_type + " is not one of " +
                            std::string(kPublishPredicate) + ", " + std::string(kSlsaPredicate));
    }
    if (check.publisher != nullptr) {
      if (auto matches = certificate_matches_publisher(*certificate, *check.publisher,
                                                       check.publisher_issuer_url);
          !matches) {
        return refused(i, matches.error().message);
      }
    }
    const std::string identity = certificate->describe();
    if (i == 0) {
      out.identity = identity;
      out.publisher = publisher_of(*certificate, identity);
    } else if (identity != out.identity) {
      return refused(i, "signed by " + identity + ", attestation 1 by " + out.identity +
                            ": one upload's attestations have one signer");
    }
    out.attestations.push_back(a.json);
  }
  return out;
}

Result<BuildSigner> BuildSigner::make(crypto::SigningKey key, crypto::Certificate certificate) {
  if (certificate.public_key_der() != key.public_key_der()) {
    return make_error(Errc::invalid,
                      "the certificate " + certificate.describe() + " is not for this private key");
  }
  if (!certificate.for_code_signing()) {
    return make_error(Errc::invalid, "the certificate " + certificate.describe() +
                                         " is not for code signing (extended key usage)");
  }
  return BuildSigner(std::move(key), std::move(certificate));
}

Result<std::string> BuildSigner::provenance(const render::BuildFacts& facts,
                                            std::string_view filename,
                                            std::string_view sha256) const {
  const std::string statement = render::build_statement(facts, filename, sha256);
  auto signature = key_.sign(dsse_pae(statement));
  if (!signature) return signature.error();
  const std::string attestation =
      render::attestation_object(certificate_.der(), statement, *signature);
  return render::render_provenance(render::build_publisher(facts),
                                   std::span<const std::string>(&attestation, 1));
}

}  // namespace wf::auth
