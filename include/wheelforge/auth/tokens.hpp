#pragma once
// API tokens: generation, hashing at rest, credentials parsing and scope checks.
// Tokens are 256-bit random strings; only their sha256 is stored, so a leaked database does
// not leak usable tokens. Pure functions apart from generate_token() (reads the CSPRNG).

#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "wheelforge/catalog/catalog.hpp"
#include "wheelforge/util/result.hpp"

namespace wf::auth {

/// A new token: "wf_" followed by 43 URL-safe base64 characters (32 random bytes).
[[nodiscard]] std::string generate_token();

/// The form stored in the catalog: lower-case hex sha256 of the token.
[[nodiscard]] std::string hash_token(std::string_view token);

/// Extracts the token from an Authorization header value:
/// `Basic base64(__token__:TOKEN)` (what twine, pip URLs and .netrc send: docs/clients.md) or
/// `Bearer TOKEN`.
/// Returns nullopt for an empty header; Errc::unauthorized with a message for a malformed
/// header or a Basic user other than __token__.
[[nodiscard]] Result<std::optional<std::string>> token_from_authorization(std::string_view header);

/// Tokens by hash, for constant-time-per-request lookups on the network thread.
class TokenIndex {
 public:
  TokenIndex() = default;
  explicit TokenIndex(std::vector<catalog::TokenRecord> tokens);

  /// The non-revoked token record matching this token, if any.
  [[nodiscard]] const catalog::TokenRecord* find(std::string_view token) const;

 private:
  std::unordered_map<std::string, catalog::TokenRecord> by_hash_;
};

/// True when `granted` includes `needed` (admin > upload > read).
[[nodiscard]] bool scope_includes(catalog::Scope granted, catalog::Scope needed);

/// Checks a request's token against the scope it needs and, for project-limited tokens, the
/// project it touches. Errc::unauthorized when the token is missing or unknown,
/// Errc::forbidden when it lacks the scope or is limited to another project.
[[nodiscard]] Result<const catalog::TokenRecord*> authorize(
    const TokenIndex& tokens, const std::optional<std::string>& token, catalog::Scope needed,
    std::optional<std::string_view> project = std::nullopt);

/// The uploader a token acts as for project claims: admins as admins, others by token id.
[[nodiscard]] core::Uploader uploader_of(const catalog::TokenRecord& token);

}  // namespace wf::auth
