#include "wheelforge/handlers/ui_sessions.hpp"

#include "wheelforge/crypto/digest.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::handlers {

UiSessions::UiSessions() : secret_(crypto::random_bytes(32)) {}

std::string UiSessions::create(std::string token) {
  std::string id = base64url_nopad_encode(crypto::random_bytes(32));
  const Micros now = now_micros();
  std::lock_guard lock(mu_);
  if (sessions_.size() >= kMaxSessions) {
    std::erase_if(sessions_, [now](const auto& kv) { return kv.second.expires <= now; });
    // Still full: the oldest sessions would be the fairest to drop; any one keeps memory bounded.
    if (sessions_.size() >= kMaxSessions) sessions_.erase(sessions_.begin());
  }
  sessions_[id] = Entry{std::move(token), now + kLifetime};
  return id;
}

std::optional<std::string> UiSessions::token_of(std::string_view id) {
  std::lock_guard lock(mu_);
  const auto it = sessions_.find(std::string(id));
  if (it == sessions_.end()) return std::nullopt;
  if (it->second.expires <= now_micros()) {
    sessions_.erase(it);
    return std::nullopt;
  }
  return it->second.token;
}

void UiSessions::remove(std::string_view id) {
  std::lock_guard lock(mu_);
  sessions_.erase(std::string(id));
}

std::string UiSessions::form_token(std::string_view credential) const {
  return crypto::sha256_hex(secret_ + "\n" + std::string(credential)).substr(0, 32);
}

}  // namespace wf::handlers
