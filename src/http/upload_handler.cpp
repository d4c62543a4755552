#include "upload_handler.hpp"

#include "wheelforge/auth/tokens.hpp"
#include "wheelforge/core/filename.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::http {

Result<UploadPlan> plan_upload(const Request& req, std::optional<std::uint64_t> content_length,
                               std::uint64_t max_size, const snapshot::Snapshot& snap) {
  // Credentials first: an anonymous client learns nothing about names or limits.
  auto token = auth::token_from_authorization(req.header("authorization"));
  if (!token) return token.error();
  const auto& seg = req.segments;  // seg[0] == "upload"
  if (seg.size() < 2 || (seg.size() == 2 && seg[1].empty())) {
    if (auto granted = auth::authorize(snap.tokens(), *token, catalog::Scope::upload); !granted) {
      return granted.error();
    }
    return make_error(Errc::invalid,
                      "missing file name: PUT the file to /upload/<filename> "
                      "(curl -T file.whl URL/upload/ adds it)");
  }
  if (seg.size() > 2) {
    return make_error(Errc::invalid, "invalid file name: it must not contain '/'");
  }
  auto name = core::parse_dist_filename(seg[1]);
  auto granted =
      auth::authorize(snap.tokens(), *token, catalog::Scope::upload,
                      name ? std::optional<std::string_view>(name->normalized_name) : std::nullopt);
  if (!granted) return granted.error();
  if (!name) return make_error(Errc::invalid, "invalid file name: " + name.error().message);
  const core::Uploader uploader = auth::uploader_of(**granted);
  // Refused before the body is read; the catalog decides again when the file is recorded.
  const auto* project = snap.find_project(name->normalized_name);
  if (core::decide_upload(project ? std::optional(project->claim) : std::nullopt, uploader,
                          name->normalized_name) == core::ClaimDecision::forbidden) {
    return make_error(Errc::forbidden, core::not_owner_message(name->normalized_name));
  }
  if (content_length && *content_length > max_size) {
    return body_too_large("upload", *content_length, max_size);
  }
  return UploadPlan{seg[1], uploader};
}

}  // namespace wf::http
