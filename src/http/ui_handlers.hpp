#pragma once
// The web UI's routes (pages rendered by wheelforge/ui, static files, login sessions):
//
//   GET  /, /?q=NAME                     home: counts, search, how to use the index
//   GET  /project/<name>/[?version=&torch=&backend=&python=]   project page, matrix, picker
//   GET  /static/<name>, /static/<hash>/<name>                 embedded CSS, scripts, icon
//   GET  /login, POST /login, POST /logout                     token login, session cookie
//   GET  /builds/, POST /builds/                               builds and jobs; start a build
//   GET  /jobs/<id>, POST /jobs/<id>/cancel, POST /jobs/<id>/retry
//   GET  /jobs/<id>/log?offset=N[&follow=1]                    the log (follow=1 streams)
//
// Reads follow the server's read policy (private mode: read credentials, from a Basic/Bearer
// header or a session cookie). Builds pages need admin scope. Every POST must come from this
// origin (Origin, else Referer) and, once signed in, carry the session's form token.

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "message.hpp"
#include "wheelforge/build/runner.hpp"
#include "wheelforge/snapshot/snapshot.hpp"
#include "wheelforge/util/time.hpp"

namespace wf::http {

/// Login sessions of the web UI, in memory (a restart logs everyone out). Thread-safe.
/// The cookie holds a random session id; the token it stands for never leaves the server.
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

struct UiContext {
  std::shared_ptr<const snapshot::Snapshot> snapshot;
  build::Runner* runner = nullptr;  ///< null when no recipes are configured
  UiSessions* sessions = nullptr;
  bool private_reads = false;
};

struct UiResult {
  Response response;
  /// Set for GET /jobs/<id>/log?follow=1 once authorized: the session streams the log.
  std::optional<std::int64_t> follow_job;
  std::uint64_t follow_offset = 0;
  /// What happened, for the access log (never a token).
  std::string note;
};

/// True for the routes above.
[[nodiscard]] bool is_ui_route(const Request& req);

/// Answers a UI request. Builds pages read SQLite and log files: call on a worker thread.
[[nodiscard]] UiResult handle_ui(const Request& req, std::string_view body, const UiContext& ctx);

}  // namespace wf::http
