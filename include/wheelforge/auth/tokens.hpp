#pragma once
// API tokens: generation, hashing at rest, credentials parsing and scope checks.
// Tokens are 256-bit random strings; only their sha256 is stored, so a leaked database does
// not leak usable tokens. Pure functions apart from generate_token() (reads the CSPRNG).

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
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

/// Tokens by hash, for constant-time-per-request lookups on the network thread. Each token
/// has a slot for the time it was last used (note_use: one relaxed atomic store, so that the
/// network thread never waits), which UseRecorder writes to the catalog from a worker.
class TokenIndex {
 public:
  TokenIndex() = default;
  explicit TokenIndex(std::vector<catalog::TokenRecord> tokens);

  /// The non-revoked token record matching this token, if any (expired ones included:
  /// authorize() tells them apart).
  [[nodiscard]] const catalog::TokenRecord* find(std::string_view token) const;
  /// The token with this id, revoked ones included (for "uploaded by" lines), if any.
  [[nodiscard]] const catalog::TokenRecord* find_id(std::int64_t id) const;

  /// Notes that `token` (a record of this index) was used at `now`. Never blocks.
  void note_use(const catalog::TokenRecord& token, Micros now) const;
  /// The uses noted so far: (token id, last time), for tokens used since the index was made.
  [[nodiscard]] std::vector<std::pair<std::int64_t, Micros>> uses() const;
  /// Takes over the uses `prev` noted (the index this one replaces), so that none is lost
  /// between two looks of the UseRecorder. Never blocks.
  void adopt_uses(const TokenIndex& prev) const;

 private:
  std::vector<catalog::TokenRecord> records_;  // by id
  std::unordered_map<std::string, std::size_t> by_hash_;
  std::unique_ptr<std::atomic<Micros>[]> used_;  // one per record
};

/// Writes tokens' last-used times to the catalog, at most once per `interval` per token: a
/// token used all day costs one UPDATE a minute. Not thread-safe: one caller (a worker) at a
/// time.
class UseRecorder {
 public:
  explicit UseRecorder(Micros interval = 60 * 1'000'000LL) : interval_(interval) {}

  /// Which uses flush() writes: those whose token was last written an interval ago or more,
  /// or every one not written yet (when the server stops).
  enum class Due : std::uint8_t { by_interval, all };

  /// Collects the uses `index` noted and writes those due. Blocks on SQLite.
  Status flush(const TokenIndex& index, catalog::Catalog& catalog, Micros now,
               Due due = Due::by_interval);

 private:
  struct Written {
    Micros used = 0;  // the last use written
    Micros at = 0;    // when it was written
  };
  Micros interval_;
  std::unordered_map<std::int64_t, Written> written_;
  std::unordered_map<std::int64_t, Micros> pending_;  // noted, not written yet
};

/// True when `granted` includes `needed` (admin > upload > read).
[[nodiscard]] bool scope_includes(catalog::Scope granted, catalog::Scope needed);

/// Checks a request's token against the scope it needs and, for project-limited tokens, the
/// project it touches. Errc::unauthorized when the token is missing, unknown or expired (the
/// message says it expired, and when), Errc::forbidden when it lacks the scope or is limited
/// to another project. A granted token's use is noted (TokenIndex::note_use).
[[nodiscard]] Result<const catalog::TokenRecord*> authorize(
    const TokenIndex& tokens, const std::optional<std::string>& token, catalog::Scope needed,
    std::optional<std::string_view> project = std::nullopt);

/// The uploader a token acts as for project claims: admins as admins, others by token id.
[[nodiscard]] core::Uploader uploader_of(const catalog::TokenRecord& token);

/// True when `token` may yank and unyank files of `project` (normalized): admins everywhere;
/// upload tokens in the project they claimed (`claim`) or that an admin limited them to.
[[nodiscard]] bool may_yank(const catalog::TokenRecord& token, std::string_view project,
                            const std::optional<core::ProjectClaim>& claim);

/// A token's expiry: a duration from `now` ("90d", "12h", "30m", "2w"; a number of days
/// alone, "90") or a UTC date or time ("2027-01-31", "2027-01-31T12:00:00Z", also without
/// the Z). Errc::invalid naming what is wrong for anything else, a zero duration or a time
/// not after `now`.
[[nodiscard]] Result<Micros> parse_expiry(std::string_view text, Micros now);

/// A point in time to look back to (audit --since): a duration before `now` ("7d", "12h") or
/// a UTC date or time as parse_expiry() takes them. Errc::invalid otherwise.
[[nodiscard]] Result<Micros> parse_since(std::string_view text, Micros now);

}  // namespace wf::auth
