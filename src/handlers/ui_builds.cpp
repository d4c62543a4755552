// The web UI's builds pages (admin scope): the builds and their jobs, starting a build, a job
// with its log, cancel and retry.

#include <climits>

#include "handlers.hpp"
#include "ui.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::handlers {
namespace {

constexpr std::uint64_t kJobLogShown = 256 * 1024;
constexpr std::size_t kBuildsShown = 30;

ui::BuildsPage builds_page(build::Runner* runner) {
  ui::BuildsPage page;
  page.now = now_micros();
  page.runner_enabled = runner != nullptr;
  if (runner == nullptr) return page;
  const build::RunnerConfig config = runner->config();
  for (const auto& [name, rc] : config.recipes) {
    ui::RecipeInfo info;
    info.name = name;
    info.project = rc.recipe.project;
    info.python = rc.matrix.python;
    for (const auto& t : rc.matrix.torch) info.torch.push_back(t.str());
    for (const auto& c : rc.matrix.cuda) info.cuda.push_back(c.str());
    page.recipes.push_back(std::move(info));
  }
  auto& jobs = runner->jobs();
  auto builds = jobs.list_builds(kBuildsShown);
  if (!builds) {
    page.error = "Cannot list the builds: " + builds.error().message;
    return page;
  }
  for (auto& b : *builds) {
    auto of = jobs.jobs_of_build(b.id);
    page.builds.push_back(
        ui::BuildRow{std::move(b), of ? std::move(*of) : std::vector<catalog::JobRecord>{}});
  }
  return page;
}

/// The job of /jobs/<id>/...: its id, or the page that says there is none (no such number, or
/// no runner).
Result<std::int64_t> job_id(const UiCall& call) {
  const auto n = parse_u64(call.req.segments[1]);
  if (!n || *n > static_cast<std::uint64_t>(INT64_MAX)) {
    return make_error(Errc::not_found, "There is no such page.");
  }
  if (call.runner() == nullptr) {
    return make_error(Errc::not_found, "The build runner is not enabled.");
  }
  return static_cast<std::int64_t>(*n);
}

Response job_page(UiCall& call, std::int64_t id, int status, std::string error) {
  build::Runner& runner = *call.runner();
  auto job = runner.jobs().find_job(id);
  if (!job) return html(500, ui::render_message(call.site, 500, "Error", job.error().message));
  if (!job->has_value()) {
    return call.not_found_page("There is no job " + std::to_string(id) + ".");
  }
  ui::JobPage page;
  page.job = **job;
  page.now = now_micros();
  page.error = std::move(error);
  build::LogChunk tail = runner.read_log_tail(id, kJobLogShown);
  page.log = std::move(tail.data);
  page.log_offset = tail.offset + page.log.size();
  page.log_truncated = tail.offset > 0;
  return html(status, ui::render_job(call.site, page));
}

Response job_action(const Request& req, Context& ctx, std::string_view action) {
  UiCall call(req, ctx);
  if (auto denied = require_admin(call)) return std::move(*denied);
  // The origin and the form token are checked before anything else is looked at.
  if (auto refused = call.check_post(parse_form(req.body), true)) return std::move(*refused);
  const auto id = job_id(call);
  if (!id) return call.not_found_page(id.error().message);
  auto changed = action == "cancel" ? call.runner()->cancel(*id) : call.runner()->retry(*id);
  const std::string what = "job " + std::to_string(*id) + " " + std::string(action);
  if (!changed) {
    call.note(what + " refused");
    return job_page(call, *id, status_for(changed.error().code),
                    "Could not " + std::string(action) + " the job: " + changed.error().message);
  }
  call.note(what);
  return redirect(303, "/jobs/" + std::to_string(*id));
}

}  // namespace

Response handle_builds_redirect(const Request& req, Context& ctx) {
  UiCall call(req, ctx);
  if (auto denied = require_admin(call)) return std::move(*denied);
  return redirect(301, "/builds/");
}

Response handle_builds_page(const Request& req, Context& ctx) {
  UiCall call(req, ctx);
  if (auto denied = require_admin(call)) return std::move(*denied);
  ui::BuildsPage page = builds_page(call.runner());
  if (const auto created = parse_u64(form_value(call.query(), "created"))) {
    page.notice = "Build " + std::to_string(*created) + " was started.";
  }
  return html(200, ui::render_builds(call.site, page));
}

Response handle_start_build(const Request& req, Context& ctx) {
  UiCall call(req, ctx);
  if (auto denied = require_admin(call)) return std::move(*denied);
  const Form form = parse_form(req.body);
  if (auto refused = call.check_post(form, true)) return std::move(*refused);
  if (call.runner() == nullptr) return call.not_found_page("The build runner is not enabled.");
  auto request = decode_build_form(form);
  Result<std::pair<catalog::BuildRecord, std::vector<catalog::JobRecord>>> created =
      request ? call.runner()->submit(*request)
              : Result<std::pair<catalog::BuildRecord, std::vector<catalog::JobRecord>>>(
                    request.error());
  if (!created) {
    call.note("build refused");
    ui::BuildsPage page = builds_page(call.runner());
    page.error = "The build was not started: " + created.error().message;
    return html(status_for(created.error().code), ui::render_builds(call.site, page));
  }
  record_build(ctx, call.actor(), created->first, created->second.size());
  const auto id = std::to_string(created->first.id);
  call.note("build " + id + " submitted (" + std::to_string(created->second.size()) + " jobs)");
  return redirect(303, "/builds/?created=" + id + "#build-" + id);
}

Response handle_job_page(const Request& req, Context& ctx) {
  UiCall call(req, ctx);
  if (auto denied = require_admin(call)) return std::move(*denied);
  const auto id = job_id(call);
  if (!id) return call.not_found_page(id.error().message);
  return job_page(call, *id, 200, "");
}

Response handle_job_log_page(const Request& req, Context& ctx) {
  UiCall call(req, ctx);
  if (auto denied = require_admin(call)) return std::move(*denied);
  const auto id = job_id(call);
  if (!id) return call.not_found_page(id.error().message);
  auto job = call.runner()->jobs().find_job(*id);
  if (!job) return error_response(job.error());
  if (!job->has_value()) return error_response(make_error(Errc::not_found, "no such job"));
  const std::uint64_t offset = parse_u64(req.query_param("offset")).value_or(0);
  if (req.query_param("follow") == "1") {
    ctx.follow = LogFollow{*id, offset};
    return Response{};
  }
  std::string chunk = call.runner()->read_log(*id, offset, 1U << 20U);
  Response r;
  r.set("Content-Type", "text/plain; charset=utf-8");
  r.set("Cache-Control", "no-store");
  r.set("X-Log-Next-Offset", std::to_string(offset + chunk.size()));
  r.set("X-Job-State", std::string(core::state_name((*job)->state)));
  r.body = std::move(chunk);
  return r;
}

Response handle_cancel_job_page(const Request& req, Context& ctx) {
  return job_action(req, ctx, "cancel");
}

Response handle_retry_job_page(const Request& req, Context& ctx) {
  return job_action(req, ctx, "retry");
}

Response handle_no_admin_page(const Request& req, Context& ctx) {
  UiCall call(req, ctx);
  if (auto denied = require_admin(call)) return std::move(*denied);
  return call.not_found_page("There is no such page.");
}

}  // namespace wf::handlers
