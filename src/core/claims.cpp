#include "wheelforge/core/claims.hpp"

namespace wf::core {

ClaimDecision decide_upload(const std::optional<ProjectClaim>& existing, const Uploader& uploader,
                            std::string_view project) {
  if (!existing) return ClaimDecision::claim;
  if (existing->kind == ClaimKind::unclaimed) {
    // Admins leave an old project as it is; the next token to upload claims it.
    return uploader.admin ? ClaimDecision::allowed : ClaimDecision::claim;
  }
  if (uploader.admin) return ClaimDecision::allowed;
  if (uploader.token_project && *uploader.token_project == project) return ClaimDecision::allowed;
  if (existing->kind == ClaimKind::token && existing->token_id == uploader.token_id) {
    return ClaimDecision::allowed;
  }
  return ClaimDecision::forbidden;
}

ProjectClaim claim_for(const Uploader& uploader) {
  if (uploader.admin) return ProjectClaim{ClaimKind::admin, 0};
  return ProjectClaim{ClaimKind::token, uploader.token_id};
}

std::string not_owner_message(std::string_view project) {
  std::string p(project);
  return "project '" + p +
         "' is claimed by another uploader: use the token that claimed it, a token limited to '" +
         p + "' (wheelforge token create --scope upload --project " + p +
         "), or ask an admin to hand it over (wheelforge project claim " + p + " --token ID)";
}

std::string claim_text(const ProjectClaim& claim) {
  switch (claim.kind) {
    case ClaimKind::unclaimed:
      return "unclaimed";
    case ClaimKind::admin:
      return "admin";
    case ClaimKind::token:
      return "token:" + std::to_string(claim.token_id);
  }
  return "unclaimed";
}

}  // namespace wf::core
