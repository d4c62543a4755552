#pragma once
// The decisions around an upload that can be made from the request head alone, before any
// body byte is read: the file name, credentials, the form's boundary and the size limit.
// Pure. What happens once the body has arrived is the upload routes' handlers' (Route table).

#include <cstdint>
#include <optional>
#include <string>

#include "wheelforge/handlers/message.hpp"
#include "wheelforge/snapshot/snapshot.hpp"

namespace wf::handlers {

struct UploadPlan {
  std::string filename;     ///< the distribution file (for attestations: the one they are for)
  core::Uploader uploader;  ///< who uploads, for the project claim checked again at ingest
  catalog::Actor actor;     ///< who uploads, for the file's uploader and the audit trail
  /// `PUT /upload/<filename>.attestations`: the body is the file's attestations (a JSON array
  /// of PEP 740 attestation objects), added to the stored file (docs/publishing.md).
  bool attestations = false;
};

/// The suffix of the attestations companion of a PUT upload, and the largest body it takes.
inline constexpr std::string_view kAttestationsSuffix = ".attestations";
inline constexpr std::uint64_t kMaxAttestationsBody = 1U << 20U;

/// Checks a `PUT /upload/<filename>` head. `content_length` is nullopt for chunked bodies.
/// Errors: invalid (bad or missing file name), unauthorized / forbidden (token), too_large
/// (declared length above max_size), forbidden also when the project is claimed by another
/// uploader.
[[nodiscard]] Result<UploadPlan> plan_upload(const Request& req,
                                             std::optional<std::uint64_t> content_length,
                                             std::uint64_t max_size,
                                             const snapshot::Snapshot& snap);

/// The form overhead a twine upload adds around the file (metadata fields, descriptions): a
/// form may be this much larger than the file limit.
inline constexpr std::uint64_t kFormOverhead = 4U << 20U;

/// Checks a `POST /legacy/` head whose credentials were checked already: the multipart
/// boundary of its Content-Type, and a declared length within max_file_size + kFormOverhead.
/// Errors: invalid (not multipart/form-data, no boundary), too_large.
[[nodiscard]] Result<std::string> plan_form(const Request& req,
                                            std::optional<std::uint64_t> content_length,
                                            std::uint64_t max_file_size);

}  // namespace wf::handlers
