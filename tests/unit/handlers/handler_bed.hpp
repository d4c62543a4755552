#pragma once
// A test bed for the handlers: the build runner's bed (a real catalog, blob store, job store,
// ingestor and a runner over a fake executor) with tokens of every scope, and requests run
// through the route table (respond()) over a snapshot loaded from the catalog at that moment,
// as the server would see it.

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "build/runner_bed.hpp"
#include "wheelforge/handlers/context.hpp"
#include "wheelforge/handlers/routes.hpp"

namespace wf::handlers::testing {

using Headers = std::vector<std::pair<std::string, std::string>>;

/// `Authorization: Basic` for a token, as twine and pip send it.
[[nodiscard]] std::string basic(std::string_view token);

/// The body of an answer ("<file>" for a file range).
[[nodiscard]] std::string body_of(const Response& r);

/// The file name of the bed's wheel of `project` at `version` ("demo_pkg-1.0-py3-none-any.whl").
[[nodiscard]] std::string wheel_name(std::string_view project, std::string_view version);

/// A request as the transport hands it to the handlers.
[[nodiscard]] Request make_request(Method method, std::string target, Headers headers = {},
                                   std::string body = {});

class HandlerBed {
 public:
  /// `with_runner`: a build runner is configured (the bed's recipe "demo" for project
  /// demo-pkg).
  explicit HandlerBed(std::string_view name, bool with_runner = true);

  build::testing::RunnerBed bed;
  ServerStatus status;
  UiSessions sessions;
  Environment env;
  std::string admin;    ///< admin token
  std::string upload;   ///< upload token
  std::string read;     ///< read token
  std::string limited;  ///< upload token limited to project demo-pkg

  /// The catalog as a snapshot now.
  [[nodiscard]] std::shared_ptr<const snapshot::Snapshot> snapshot() const;

  /// Runs `req` through the route table; the context's outputs stay in `last`.
  Response respond(const Request& req, UploadedBody* upload_body = nullptr);
  Response respond(Method method, std::string target, Headers headers = {}, std::string body = {}) {
    return respond(make_request(method, std::move(target), std::move(headers), std::move(body)));
  }

  /// A web UI form POST as a browser sends it from a page of this server, signed in by HTTP
  /// Basic with `token`, with the page's form token unless `with_form_token` is false.
  Response ui_post(const std::string& target, std::string form, const std::string& token,
                   bool with_form_token = true);
  /// A web UI GET, signed in by HTTP Basic with `token` unless it is empty.
  Response ui_get(const std::string& target, const std::string& token = {});

  /// PUT /upload/<filename> with `bytes` as the body, as the transport would have stored it.
  Response put(const std::string& filename, std::string_view bytes, std::string_view token);

  /// POST /legacy/ with a multipart form: `fields`, then the file part `content`.
  Response post_form(const Headers& fields, const std::string& filename, std::string_view bytes,
                     std::string_view token);

  /// A wheel of demo-pkg at `version` (real, with its RECORD).
  [[nodiscard]] std::string wheel(std::string_view project, std::string_view version) const;

  /// What the last respond() left in its context.
  struct Outputs {
    Changed changed = Changed::everything;
    std::string changed_project;
    std::optional<LogFollow> follow;
    bool unknown_token = false;
    std::string upload_outcome;
    std::string note;
  } last;

 private:
  std::string token(catalog::Scope scope, std::optional<std::string> project = std::nullopt);
  std::unique_ptr<build::Runner> runner_;
};

}  // namespace wf::handlers::testing
