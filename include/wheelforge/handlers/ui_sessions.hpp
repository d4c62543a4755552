#pragma once
// Login sessions of the web UI, in memory (a restart logs everyone out).

#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "wheelforge/util/time.hpp"

namespace wf::handlers {

/// The sessions of one server. Thread-safe. The cookie holds a random session id; the token it
/// stands for never leaves the server.
class UiSessions {
 public:
  UiSessions();

  /// Starts a session for a token that was just checked; returns the cookie value.
  [[nodiscard]] std::string create(std::string token);
  /// The token of a live session, or nullopt (unknown or expired).
  [[nodiscard]] std::optional<std::string> token_of(std::string_view id);
  void remove(std::string_view id);

  /// The form token (CSRF) of a credential: a keyed hash of it, so that only pages this server
  /// rendered for that credential carry it.
  [[nodiscard]] std::string form_token(std::string_view credential) const;

  static constexpr Micros kLifetime = 12LL * 3600 * 1000000;
  static constexpr std::size_t kMaxSessions = 10000;

 private:
  struct Entry {
    std::string token;
    Micros expires = 0;
  };
  std::string secret_;
  std::mutex mu_;
  std::unordered_map<std::string, Entry> sessions_;
};

}  // namespace wf::handlers
