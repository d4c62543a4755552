// The Integrity API: a file's PEP 740 provenance object, at the URL its simple pages give
// (docs/packaging.md, "Provenance"; docs/http-api.md).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "handlers.hpp"
#include "read.hpp"
#include "wheelforge/core/name.hpp"
#include "wheelforge/core/version.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::handlers {
namespace {

constexpr std::string_view kIntegrityType = "application/vnd.pypi.integrity.v1+json";

// The URL's version names the file's release when it is the stored spelling or a PEP 440
// equal one ("2.8.3+cu128torch2.8" and "2.8.3.0+CU128TORCH2.8").
bool release_matches(std::string_view asked, const std::string& stored) {
  if (asked == stored) return true;
  const auto a = core::Version::parse(asked);
  const auto s = core::Version::parse(stored);
  return a && s && *a == *s;
}

}  // namespace

// /integrity/<project>/<version>/<filename>/provenance
Response handle_provenance(const Request& req, Context& ctx) {
  const snapshot::Snapshot& snap = ctx.snapshot;
  const auto& seg = req.segments;
  if (seg.size() != 5) return not_found("not found");
  const std::string& project = seg[1];
  const std::string& version = seg[2];
  const std::string& name = seg[3];
  const std::string shown = sanitize_for_log(name, 300);
  const core::FileRecord* file = snap.find_file(name);
  const core::FileRecord* damaged = file == nullptr ? snap.find_damaged(name) : nullptr;
  const core::FileRecord* found = file != nullptr ? file : damaged;
  if (found == nullptr) return not_found("no such file: " + shown);
  const bool same_project =
      core::is_valid_project_name(project) && core::normalize_name(project) == found->project;
  if (!same_project || !release_matches(version, found->version)) {
    return not_found(shown + " is not a file of " + sanitize_for_log(project, 100) + " " +
                     sanitize_for_log(version, 100) + ": the file belongs to project " +
                     found->project + " version " + sanitize_for_log(found->version, 100));
  }
  // Like its other URLs, a damaged file's provenance waits for the file to be restored.
  if (damaged != nullptr) {
    return error_response(make_error(Errc::unavailable, damaged_message(name)));
  }
  if (!found->upstream.empty() || found->provenance_sha256.empty()) {
    return not_found(shown + " has no provenance: it was uploaded without attestations");
  }
  // Served like a file's METADATA: the blob, validated by its sha256.
  std::optional<std::uint64_t> size;
  if (found->provenance_size != 0) size = found->provenance_size;
  return blob_response(
      req, ctx,
      BlobAnswer{found->provenance_sha256, size, "\"" + found->provenance_sha256 + "\"",
                 std::string(kIntegrityType), found->filename + ".provenance"});
}

Response handle_build_certificate(const Request& /*req*/, Context& ctx) {
  if (ctx.env.build_certificate.empty()) {
    return not_found(
        "this server signs no build provenance: it runs no build jobs, and [attestations] "
        "signing_key is not set");
  }
  Response r;
  r.status = 200;
  r.set("Content-Type", "application/x-pem-file");
  r.set("Cache-Control", "no-cache");
  r.body = ctx.env.build_certificate;
  return r;
}

}  // namespace wf::handlers
