#pragma once
// Project claims: which uploader may add files to which project. Pure functions shared by the
// catalog (which decides inside its write transaction) and the HTTP layer (which refuses an
// upload early, before its body is read).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "wheelforge/core/records.hpp"

namespace wf::core {

/// Who is uploading. Local commands (`wheelforge ingest`, the build runner) and admin tokens
/// act as admins.
struct Uploader {
  bool admin = true;
  std::int64_t token_id = 0;                 ///< when !admin
  std::optional<std::string> token_project;  ///< the project an admin limited the token to
};

enum class ClaimDecision {
  allowed,    ///< upload; the claim stays as it is
  claim,      ///< upload, and record claim_for(uploader) as the project's claim
  forbidden,  ///< the project belongs to someone else
};

/// Decides an upload to `project` (normalized), whose current claim is `existing` (nullopt:
/// the project does not exist yet). The first uploader of a project claims it; an unclaimed
/// project (one older than claims) goes to the next token that uploads to it. Admins upload
/// everywhere, and so do tokens an admin limited to the project; other tokens only to projects
/// they claimed.
[[nodiscard]] ClaimDecision decide_upload(const std::optional<ProjectClaim>& existing,
                                          const Uploader& uploader, std::string_view project);

/// The claim an upload by `uploader` records.
[[nodiscard]] ProjectClaim claim_for(const Uploader& uploader);

/// The 403 message for an upload to a project claimed by someone else.
[[nodiscard]] std::string not_owner_message(std::string_view project);

/// "unclaimed", "admin" or "token:<id>", as the CLI and the admin API show a claim.
[[nodiscard]] std::string claim_text(const ProjectClaim& claim);

}  // namespace wf::core
