#pragma once
// The decisions around an upload that can be made from the request head alone, before any
// body byte is read: the route, the file name, credentials and the size limit. Pure.

#include <optional>
#include <string>

#include "message.hpp"
#include "wheelforge/snapshot/snapshot.hpp"

namespace wf::http {

struct UploadPlan {
  std::string filename;
  core::Uploader uploader;  ///< who uploads, for the project claim checked again at ingest
};

/// Checks a `PUT /upload/<filename>` head. `content_length` is nullopt for chunked bodies.
/// Errors: invalid (bad or missing file name), unauthorized / forbidden (token), too_large
/// (declared length above max_size), forbidden also when the project is claimed by another
/// uploader.
[[nodiscard]] Result<UploadPlan> plan_upload(const Request& req,
                                             std::optional<std::uint64_t> content_length,
                                             std::uint64_t max_size,
                                             const snapshot::Snapshot& snap);

}  // namespace wf::http
