#pragma once
// The JSON of PEP 740 attestations (docs/publishing.md, "Attestations"): the attestation
// objects an upload carries, the in-toto statement each one signs, and the provenance object
// served for a file. Pure: no I/O, no cryptography (auth/attestation.hpp verifies).

#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "wheelforge/util/result.hpp"

namespace wf::render {

/// One attestation object, its base64 fields decoded.
struct AttestationObject {
  std::string certificate;  ///< verification_material.certificate: DER
  std::string statement;    ///< envelope.statement: the in-toto statement's bytes
  std::string signature;    ///< envelope.signature
  std::string json;         ///< the whole object, compact: what is stored and served
};

/// An upload's attestations: a JSON array of PEP 740 attestation objects (version 1,
/// verification_material with certificate and transparency_entries, envelope with statement
/// and signature). Errc::invalid naming the first object and key that is wrong, or an empty array.
[[nodiscard]] Result<std::vector<AttestationObject>> parse_attestations(std::string_view json);

struct StatementSubject {
  std::string name;
  std::string sha256;  ///< digest.sha256 as written; "" when it has none
};

/// An in-toto v1 statement: its subjects and predicate type.
struct InTotoStatement {
  std::vector<StatementSubject> subjects;
  std::string predicate_type;
};

/// Errc::invalid unless `json` is an in-toto statement ("_type":
/// "https://in-toto.io/Statement/v1", a subject list, a predicateType).
[[nodiscard]] Result<InTotoStatement> parse_intoto_statement(std::string_view json);

/// Who published a file's attestations: PEP 740's publisher object (a kind, then its fields).
struct ProvenancePublisher {
  std::string kind;  ///< "GitHub", "GitLab", or the certificate's issuer
  std::vector<std::pair<std::string, std::string>> fields;
};

/// The provenance object: {"version": 1, "attestation_bundles": [{"publisher": {...},
/// "attestations": [...]}]}, the attestations as stored (AttestationObject::json).
[[nodiscard]] std::string render_provenance(const ProvenancePublisher& publisher,
                                            std::span<const std::string> attestations);

}  // namespace wf::render
