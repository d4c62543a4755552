// The admin API. The route table has checked the admin token and read the small body; these
// write to the catalog or read the job store, so they run on a worker. Parameters come from the
// query string or an application/x-www-form-urlencoded body; a build request is JSON.
//
//   POST   /admin/yank          project=NAME [version=V | filename=F] [reason=TEXT]
//   POST   /admin/unyank        project=NAME [version=V | filename=F]
//          (also upload tokens, for the project they claimed or are limited to)
//   DELETE /admin/files/<filename>
//   POST   /admin/projects/<name>/claim     [token=ID]   (nothing: admins only)
//   POST   /admin/projects/<name>/release
//   GET    /admin/builds, POST /admin/builds (JSON), GET /admin/builds/<id>, /admin/jobs/<id>
//   GET    /admin/jobs/<id>/log?offset=N[&follow=1]
//   POST   /admin/jobs/<id>/cancel, /admin/jobs/<id>/retry

#include <climits>

#include "handlers.hpp"
#include "wheelforge/auth/tokens.hpp"
#include "wheelforge/core/name.hpp"
#include "wheelforge/render/api.hpp"
#include "wheelforge/render/builds.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::handlers {
namespace {

Response json(int status, std::string body) {
  Response r;
  r.status = status;
  r.set("Content-Type", "application/json");
  r.body = std::move(body);
  return r;
}

Response yank(const Request& req, Context& ctx, bool undo) {
  catalog::Catalog& catalog = *ctx.env.services.catalog;
  std::optional<std::string> project;
  std::optional<std::string> version;
  std::optional<std::string> filename;
  std::optional<std::string> reason;
  Problems problems;
  for (auto& [k, v] : request_parameters(req)) {
    if (k == "project") {
      project = std::move(v);
    } else if (k == "version") {
      version = std::move(v);
    } else if (k == "filename") {
      filename = std::move(v);
    } else if (k == "reason" && !undo) {
      // Shown by pip and in the audit trail: one line of text.
      if (auto st = check_free_text("reason", v); !st) problems.add(st.error().message);
      reason = std::move(v);
    } else {
      problems.add("unknown parameter '" + sanitize_for_log(k) + "'");
    }
  }
  if (!project || !core::is_valid_project_name(*project)) {
    problems.add("project=NAME is required");
  }
  if (version.has_value() == filename.has_value()) {
    problems.add("give exactly one of version=V or filename=F");
  }
  if (!problems.empty()) return error_response(problems.to_error());
  const std::string name = core::normalize_name(*project);
  const catalog::TokenRecord* token = caller_token(req, ctx.snapshot);
  if (token == nullptr)
    return error_response(make_error(Errc::unauthorized, "authentication required"));
  // Maintainers yank their own project's files, as on PyPI (the route admits upload tokens).
  const auto* known = ctx.snapshot.find_project(name);
  if (!auth::may_yank(*token, name, known ? std::optional(known->claim) : std::nullopt)) {
    return error_response(make_error(
        Errc::forbidden, "token #" + std::to_string(token->id) + " may not " +
                             (undo ? "unyank" : "yank") + " files of project '" + name +
                             "': an upload token yanks only in the project it claimed or is "
                             "limited to"));
  }
  if (!undo && !reason) reason = std::string();
  auto changed = catalog.set_yanked(name, version, filename, undo ? std::nullopt : reason,
                                    actor_of(req, token));
  if (!changed) return error_response(changed.error());
  return json(200, render::render_file_names(undo ? "unyanked" : "yanked", *changed));
}

std::optional<std::int64_t> parse_id(std::string_view s) {
  const auto n = parse_u64(s);
  if (!n || *n > static_cast<std::uint64_t>(INT64_MAX)) return std::nullopt;
  return static_cast<std::int64_t>(*n);
}

Response claim(const Request& req, Context& ctx, bool release) {
  catalog::Catalog& catalog = *ctx.env.services.catalog;
  const std::string& name = req.segments[2];
  Problems problems;
  core::ProjectClaim wanted{release ? core::ClaimKind::unclaimed : core::ClaimKind::admin, 0};
  for (auto& [k, v] : request_parameters(req)) {
    if (k == "token" && !release) {
      if (const auto id = parse_id(v)) {
        wanted = core::ProjectClaim{core::ClaimKind::token, *id};
      } else {
        problems.add("token=ID must be a token id (see wheelforge token list)");
      }
    } else {
      problems.add("unknown parameter '" + sanitize_for_log(k) + "'");
    }
  }
  if (!core::is_valid_project_name(name)) problems.add("invalid project name");
  if (!problems.empty()) return error_response(problems.to_error());
  auto updated = catalog.set_claim(core::normalize_name(name), wanted,
                                   actor_of(req, caller_token(req, ctx.snapshot)));
  if (!updated) return error_response(updated.error());
  return json(200, render::render_claim(updated->name, core::claim_text(updated->claim)));
}

/// The runner, or the 404 that says it is not configured.
Result<build::Runner*> runner_of(const Context& ctx) {
  if (ctx.env.services.runner == nullptr) {
    return make_error(Errc::not_found,
                      "the build runner is not enabled: configure [recipes] to use it");
  }
  return ctx.env.services.runner;
}

/// The id in the path (`/admin/builds/<id>`, `/admin/jobs/<id>/...`), or the 404 a path with
/// anything else there gets.
Result<std::int64_t> id_of(const Request& req) {
  if (const auto id = parse_id(req.segments[2])) return *id;
  return make_error(Errc::not_found, "no such admin endpoint");
}

/// A job that exists, or its 404.
Result<catalog::JobRecord> find_job(build::Runner& runner, std::int64_t id) {
  auto job = runner.jobs().find_job(id);
  if (!job) return job.error();
  if (!job->has_value()) return make_error(Errc::not_found, "no such job");
  return std::move(**job);
}

Response job_action(const Request& req, Context& ctx, bool cancel) {
  auto runner = runner_of(ctx);
  if (!runner) return error_response(runner.error());
  const auto id = id_of(req);
  if (!id) return error_response(id.error());
  auto job = cancel ? (*runner)->cancel(*id) : (*runner)->retry(*id);
  if (!job) return error_response(job.error());
  return json(200, render::render_job(*job));
}

}  // namespace

Response handle_yank(const Request& req, Context& ctx) {
  return yank(req, ctx, false);
}

Response handle_unyank(const Request& req, Context& ctx) {
  return yank(req, ctx, true);
}

Response handle_delete_file(const Request& req, Context& ctx) {
  if (req.segments[2].empty()) return not_found("no such admin endpoint");
  auto deleted = ctx.env.services.catalog->delete_file(
      req.segments[2], actor_of(req, caller_token(req, ctx.snapshot)));
  if (!deleted) return error_response(deleted.error());
  const std::string names[] = {deleted->filename};
  return json(200, render::render_file_names("deleted", names));
}

Response handle_claim(const Request& req, Context& ctx) {
  return claim(req, ctx, false);
}

Response handle_release(const Request& req, Context& ctx) {
  return claim(req, ctx, true);
}

Response handle_list_builds(const Request& /*req*/, Context& ctx) {
  auto runner = runner_of(ctx);
  if (!runner) return error_response(runner.error());
  auto list = (*runner)->jobs().list_builds(100);
  if (!list) return error_response(list.error());
  return json(200, render::render_builds(*list));
}

Response handle_submit_build(const Request& req, Context& ctx) {
  auto runner = runner_of(ctx);
  if (!runner) return error_response(runner.error());
  auto request = render::parse_build_request(req.body);
  if (!request) return error_response(request.error());
  auto created = (*runner)->submit(*request);
  if (!created) return error_response(created.error());
  record_build(ctx, actor_of(req, caller_token(req, ctx.snapshot)), created->first,
               created->second.size());
  return json(202, render::render_build(created->first, created->second));
}

Response handle_show_build(const Request& req, Context& ctx) {
  auto runner = runner_of(ctx);
  if (!runner) return error_response(runner.error());
  const auto id = id_of(req);
  if (!id) return error_response(id.error());
  auto& jobs = (*runner)->jobs();
  auto build = jobs.find_build(*id);
  if (!build) return error_response(build.error());
  if (!build->has_value()) return not_found("no such build");
  auto list = jobs.jobs_of_build(*id);
  if (!list) return error_response(list.error());
  for (auto& job : *list) job.compile_cache = (*runner)->compile_cache_stats(job.id);
  return json(200, render::render_build(**build, *list));
}

Response handle_show_job(const Request& req, Context& ctx) {
  auto runner = runner_of(ctx);
  if (!runner) return error_response(runner.error());
  const auto id = id_of(req);
  if (!id) return error_response(id.error());
  auto job = find_job(**runner, *id);
  if (!job) return error_response(job.error());
  job->compile_cache = (*runner)->compile_cache_stats(*id);
  return json(200, render::render_job(*job));
}

Response handle_job_log(const Request& req, Context& ctx) {
  auto runner = runner_of(ctx);
  if (!runner) return error_response(runner.error());
  const auto id = id_of(req);
  if (!id) return error_response(id.error());
  auto job = find_job(**runner, *id);
  if (!job) return error_response(job.error());
  const std::uint64_t offset = parse_u64(req.query_param("offset")).value_or(0);
  if (const std::string follow = req.query_param("follow"); follow == "1" || follow == "true") {
    ctx.follow = LogFollow{*id, offset};
    return Response{};
  }
  std::string chunk = (*runner)->read_log(*id, offset, 1U << 20U);
  Response r;
  r.set("Content-Type", "text/plain; charset=utf-8");
  r.set("X-Log-Next-Offset", std::to_string(offset + chunk.size()));
  r.set("X-Job-State", std::string(core::state_name(job->state)));
  r.body = std::move(chunk);
  return r;
}

Response handle_cancel_job(const Request& req, Context& ctx) {
  return job_action(req, ctx, true);
}

Response handle_retry_job(const Request& req, Context& ctx) {
  return job_action(req, ctx, false);
}

Response handle_no_admin_endpoint(const Request& /*req*/, Context& /*ctx*/) {
  return not_found("no such admin endpoint");
}

}  // namespace wf::handlers
