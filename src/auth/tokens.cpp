#include "wheelforge/auth/tokens.hpp"

#include <algorithm>

#include "wheelforge/crypto/digest.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::auth {

std::string generate_token() {
  return "wf_" + base64url_nopad_encode(crypto::random_bytes(32));
}

std::string hash_token(std::string_view token) {
  return crypto::sha256_hex(token);
}

Result<std::optional<std::string>> token_from_authorization(std::string_view header) {
  header = trim(header);
  if (header.empty()) return std::optional<std::string>();
  const auto space = header.find(' ');
  const std::string_view scheme = header.substr(0, space);
  const std::string_view value =
      space == std::string_view::npos ? std::string_view() : trim(header.substr(space + 1));
  if (iequals(scheme, "Bearer")) {
    if (value.empty()) return make_error(Errc::unauthorized, "empty Bearer token");
    return std::optional<std::string>(std::string(value));
  }
  if (iequals(scheme, "Basic")) {
    const auto decoded = base64_decode(value);
    if (!decoded) return make_error(Errc::unauthorized, "malformed Basic credentials");
    const auto colon = decoded->find(':');
    if (colon == std::string::npos) {
      return make_error(Errc::unauthorized, "malformed Basic credentials");
    }
    if (decoded->substr(0, colon) != "__token__") {
      return make_error(Errc::unauthorized,
                        "use __token__ as the user name and an API token as the password");
    }
    std::string token = decoded->substr(colon + 1);
    if (token.empty()) return make_error(Errc::unauthorized, "empty password");
    return std::optional<std::string>(std::move(token));
  }
  return make_error(Errc::unauthorized, "unsupported authorization scheme (use Basic or Bearer)");
}

TokenIndex::TokenIndex(std::vector<catalog::TokenRecord> tokens)
    : records_(std::move(tokens)), used_(std::make_unique<std::atomic<Micros>[]>(records_.size())) {
  std::sort(records_.begin(), records_.end(),
            [](const auto& a, const auto& b) { return a.id < b.id; });
  for (std::size_t i = 0; i < records_.size(); ++i) {
    if (!records_[i].revoked) by_hash_.emplace(records_[i].hash, i);
  }
}

const catalog::TokenRecord* TokenIndex::find(std::string_view token) const {
  // Looking up by the hash keeps the comparison off the secret itself: the hash of a guess
  // reveals nothing about how close the guess was.
  const auto it = by_hash_.find(hash_token(token));
  return it == by_hash_.end() ? nullptr : &records_[it->second];
}

const catalog::TokenRecord* TokenIndex::find_id(std::int64_t id) const {
  const auto it = std::lower_bound(records_.begin(), records_.end(), id,
                                   [](const auto& t, std::int64_t v) { return t.id < v; });
  return it == records_.end() || it->id != id ? nullptr : &*it;
}

void TokenIndex::note_use(const catalog::TokenRecord& token, Micros now) const {
  const auto i = static_cast<std::size_t>(&token - records_.data());
  if (i >= records_.size()) return;  // not one of ours
  used_[i].store(now, std::memory_order_relaxed);
}

std::vector<std::pair<std::int64_t, Micros>> TokenIndex::uses() const {
  std::vector<std::pair<std::int64_t, Micros>> out;
  for (std::size_t i = 0; i < records_.size(); ++i) {
    const Micros at = used_[i].load(std::memory_order_relaxed);
    if (at != 0) out.emplace_back(records_[i].id, at);
  }
  return out;
}

void TokenIndex::adopt_uses(const TokenIndex& prev) const {
  for (const auto& [id, at] : prev.uses()) {
    const auto* mine = find_id(id);
    if (mine == nullptr) continue;
    auto& slot = used_[static_cast<std::size_t>(mine - records_.data())];
    Micros seen = slot.load(std::memory_order_relaxed);
    while (seen < at && !slot.compare_exchange_weak(seen, at, std::memory_order_relaxed)) {
    }
  }
}

bool scope_includes(catalog::Scope granted, catalog::Scope needed) {
  return static_cast<int>(granted) >= static_cast<int>(needed);
}

Result<const catalog::TokenRecord*> authorize(const TokenIndex& tokens,
                                              const std::optional<std::string>& token,
                                              catalog::Scope needed,
                                              std::optional<std::string_view> project) {
  if (!token) return make_error(Errc::unauthorized, "authentication required");
  const catalog::TokenRecord* record = tokens.find(*token);
  if (record == nullptr) return make_error(Errc::unauthorized, "invalid or revoked token");
  const Micros now = now_micros();
  if (record->expired(now)) {
    return make_error(Errc::unauthorized, "token #" + std::to_string(record->id) + " expired at " +
                                              iso8601_micros(*record->expires_at) +
                                              ": ask an admin for a new one");
  }
  if (!scope_includes(record->scope, needed)) {
    return make_error(Errc::forbidden, "token scope '" +
                                           std::string(catalog::scope_name(record->scope)) +
                                           "' does not allow this (needs '" +
                                           std::string(catalog::scope_name(needed)) + "')");
  }
  if (project && record->project && *record->project != *project &&
      record->scope != catalog::Scope::admin) {
    return make_error(Errc::forbidden, "token is limited to project '" + *record->project + "'");
  }
  tokens.note_use(*record, now);
  return record;
}

core::Uploader uploader_of(const catalog::TokenRecord& token) {
  if (token.scope == catalog::Scope::admin) return core::Uploader{};
  return core::Uploader{false, token.id, token.project};
}

}  // namespace wf::auth
