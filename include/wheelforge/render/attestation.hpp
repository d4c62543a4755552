#pragma once
// The JSON of PEP 740 attestations (docs/publishing.md, "Attestations"): the attestation
// objects an upload carries, the in-toto statement each one signs, and the provenance object
// served for a file. Pure: no I/O, no cryptography (auth/attestation.hpp verifies).

#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "wheelforge/catalog/jobs.hpp"
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

/// How the build runner made a wheel: what the provenance of its wheels states
/// (docs/runner.md, "Provenance"). No secret: the source's URL is without credentials.
struct BuildFacts {
  std::string builder;  ///< who built it: the server's URL (runDetails.builder.id)
  std::string recipe;
  std::string project;
  std::string version;
  std::string python;  ///< the cell
  std::string torch;
  std::string cuda;
  std::string arch_list;    ///< the recipe's arch_value ("" when it has none)
  std::string source_kind;  ///< "git", "path" or "index-sdist"
  std::string source_uri;   ///< "git+URL@REF", the directory, or the sdist's file name
  /// The source's digest, as in-toto's DigestSet names it: {"gitCommit", SHA} or {"sha256",
  /// HEX}; empty for a directory.
  std::pair<std::string, std::string> source_digest;
  catalog::Toolchain toolchain;
  catalog::Provenance container;  ///< the image (and its digest) the build ran in, if any
  std::int64_t build_id = 0;
  std::int64_t job_id = 0;
  std::string runner;      ///< the runner that ran the job (build::Runner::id())
  std::string started_at;  ///< RFC 3339, UTC
};

/// The build type of the runner's SLSA provenance (buildDefinition.buildType).
inline constexpr std::string_view kRunnerBuildType = "urn:wheelforge:runner-build:v1";

/// The in-toto v1 statement of a wheel the runner built: one subject (`filename`, `sha256`),
/// predicate SLSA provenance v1 (buildDefinition with the recipe, cell and source;
/// runDetails with the builder, toolchain and job). Compact JSON: the bytes that are signed.
[[nodiscard]] std::string build_statement(const BuildFacts& facts, std::string_view filename,
                                          std::string_view sha256);

/// A PEP 740 attestation object (compact JSON) for a statement signed by `certificate_der`'s
/// key; no transparency log entries.
[[nodiscard]] std::string attestation_object(std::string_view certificate_der,
                                             std::string_view statement,
                                             std::string_view signature);

/// The publisher of the runner's wheels: kind "wheelforge", with the builder, recipe, build and
/// job.
[[nodiscard]] ProvenancePublisher build_publisher(const BuildFacts& facts);

}  // namespace wf::render
