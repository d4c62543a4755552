#pragma once
// JSON answers of the admin API's token and audit endpoints. Pure functions. A token's secret
// appears in one answer only, the one that creates it.

#include <span>
#include <string>
#include <string_view>

#include "wheelforge/catalog/catalog.hpp"

namespace wf::render {

/// GET /admin/tokens: {"tokens": [{"id", "scope", "project", "description", "created_at",
/// "created_by", "expires_at", "last_used_at", "state"}]}, where state is "active",
/// "expired" (at `now`) or "revoked"; times are ISO 8601 UTC or null. Never a hash or secret.
[[nodiscard]] std::string render_tokens(std::span<const catalog::TokenRecord> tokens, Micros now);

/// A token's fields as render_tokens() lists them, as one object (a revocation's answer).
[[nodiscard]] std::string render_token(const catalog::TokenRecord& token, Micros now);

/// POST /admin/tokens: the token's fields and, under "token", the secret (shown this once).
[[nodiscard]] std::string render_created_token(const catalog::TokenRecord& token,
                                               std::string_view secret, Micros now);

/// GET /admin/audit: {"entries": [{"id", "at", "action", "actor", "token_id",
/// "token_description", "address", "project", "target", "detail"}]}, newest first.
[[nodiscard]] std::string render_audit(std::span<const catalog::AuditRecord> entries);

/// "active", "expired" or "revoked".
[[nodiscard]] std::string_view token_state(const catalog::TokenRecord& token, Micros now);

}  // namespace wf::render
