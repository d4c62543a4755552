#include "admin_handlers.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <climits>

#include "wheelforge/core/name.hpp"
#include "wheelforge/render/api.hpp"
#include "wheelforge/render/builds.hpp"
#include "wheelforge/util/fs.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::http {
namespace {

Response json(int status, std::string body) {
  Response r;
  r.status = status;
  r.set("Content-Type", "application/json");
  r.body = std::move(body);
  return r;
}

Response yank(const Request& req, std::string_view body, catalog::Catalog& catalog, bool undo) {
  auto params = parse_form(req.query);
  for (auto& p : parse_form(body)) params.push_back(std::move(p));
  std::optional<std::string> project;
  std::optional<std::string> version;
  std::optional<std::string> filename;
  std::optional<std::string> reason;
  Problems problems;
  for (auto& [k, v] : params) {
    if (k == "project") {
      project = std::move(v);
    } else if (k == "version") {
      version = std::move(v);
    } else if (k == "filename") {
      filename = std::move(v);
    } else if (k == "reason" && !undo) {
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
  if (!undo && !reason) reason = std::string();
  auto changed = catalog.set_yanked(core::normalize_name(*project), version, filename,
                                    undo ? std::nullopt : reason);
  if (!changed) return error_response(changed.error());
  return json(200, render::render_file_names(undo ? "unyanked" : "yanked", *changed));
}

std::optional<std::int64_t> parse_id(std::string_view s) {
  const auto n = parse_u64(s);
  if (!n || *n > static_cast<std::uint64_t>(INT64_MAX)) return std::nullopt;
  return static_cast<std::int64_t>(*n);
}

/// POST /admin/projects/<name>/claim (token=ID, or nothing for admins only) and
/// POST /admin/projects/<name>/release.
Response claim(const Request& req, std::string_view body, catalog::Catalog& catalog) {
  const std::string& name = req.segments[2];
  const bool release = req.segments[3] == "release";
  auto params = parse_form(req.query);
  for (auto& p : parse_form(body)) params.push_back(std::move(p));
  Problems problems;
  core::ProjectClaim wanted{release ? core::ClaimKind::unclaimed : core::ClaimKind::admin, 0};
  for (auto& [k, v] : params) {
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
  auto updated = catalog.set_claim(core::normalize_name(name), wanted);
  if (!updated) return error_response(updated.error());
  return json(200, render::render_claim(updated->name, core::claim_text(updated->claim)));
}

Response builds(const Request& req, std::string_view body, build::Runner& runner) {
  const auto& seg = req.segments;  // admin, builds|jobs, ...
  auto& jobs = runner.jobs();
  if (seg[1] == "builds" && seg.size() == 2) {
    if (req.method == Method::post) {
      auto request = render::parse_build_request(body);
      if (!request) return error_response(request.error());
      auto created = runner.submit(*request);
      if (!created) return error_response(created.error());
      return json(202, render::render_build(created->first, created->second));
    }
    if (req.method != Method::get) return method_not_allowed("GET, POST");
    auto list = jobs.list_builds(100);
    if (!list) return error_response(list.error());
    return json(200, render::render_builds(*list));
  }
  const auto id = seg.size() >= 3 ? parse_id(seg[2]) : std::nullopt;
  if (!id) return error_response(make_error(Errc::not_found, "no such admin endpoint"));
  if (seg[1] == "builds" && seg.size() == 3) {
    if (req.method != Method::get) return method_not_allowed("GET");
    auto build = jobs.find_build(*id);
    if (!build) return error_response(build.error());
    if (!build->has_value()) return error_response(make_error(Errc::not_found, "no such build"));
    auto list = jobs.jobs_of_build(*id);
    if (!list) return error_response(list.error());
    return json(200, render::render_build(**build, *list));
  }
  if (seg[1] != "jobs")
    return error_response(make_error(Errc::not_found, "no such admin endpoint"));
  if (seg.size() == 3) {
    if (req.method != Method::get) return method_not_allowed("GET");
    auto job = jobs.find_job(*id);
    if (!job) return error_response(job.error());
    if (!job->has_value()) return error_response(make_error(Errc::not_found, "no such job"));
    return json(200, render::render_job(**job));
  }
  if (seg.size() == 4 && (seg[3] == "cancel" || seg[3] == "retry")) {
    if (req.method != Method::post) return method_not_allowed("POST");
    auto job = seg[3] == "cancel" ? runner.cancel(*id) : runner.retry(*id);
    if (!job) return error_response(job.error());
    return json(200, render::render_job(*job));
  }
  if (seg.size() == 4 && seg[3] == "log") {
    if (req.method != Method::get) return method_not_allowed("GET");
    auto job = jobs.find_job(*id);
    if (!job) return error_response(job.error());
    if (!job->has_value()) return error_response(make_error(Errc::not_found, "no such job"));
    const std::uint64_t offset = parse_u64(req.query_param("offset")).value_or(0);
    std::string chunk = runner.read_log(*id, offset, 1U << 20U);
    Response r;
    r.set("Content-Type", "text/plain; charset=utf-8");
    r.set("X-Log-Next-Offset", std::to_string(offset + chunk.size()));
    r.set("X-Job-State", std::string(core::state_name((*job)->state)));
    r.body = std::move(chunk);
    return r;
  }
  return error_response(make_error(Errc::not_found, "no such admin endpoint"));
}

}  // namespace

std::optional<std::int64_t> log_follow_request(const Request& req) {
  const auto& seg = req.segments;
  if (req.method != Method::get || seg.size() != 4 || seg[0] != "admin" || seg[1] != "jobs" ||
      seg[3] != "log") {
    return std::nullopt;
  }
  const std::string follow = req.query_param("follow");
  if (follow != "1" && follow != "true") return std::nullopt;
  return parse_id(seg[2]);
}

std::vector<std::pair<std::string, std::string>> parse_form(std::string_view s) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto part : split(s, '&')) {
    if (part.empty()) continue;
    const auto eq = part.find('=');
    auto decode = [](std::string_view raw) {
      std::string plus(raw);
      for (auto& c : plus) {
        if (c == '+') c = ' ';
      }
      return percent_decode(plus).value_or("");
    };
    out.emplace_back(decode(part.substr(0, eq)),
                     eq == std::string_view::npos ? std::string() : decode(part.substr(eq + 1)));
  }
  return out;
}

bool is_admin_route(const Request& req) {
  return !req.segments.empty() && req.segments[0] == "admin";
}

Response handle_admin(const Request& req, std::string_view body, catalog::Catalog& catalog,
                      build::Runner* runner) {
  const auto& seg = req.segments;
  if (seg.size() >= 2 && (seg[1] == "builds" || seg[1] == "jobs")) {
    if (runner == nullptr) {
      return error_response(make_error(
          Errc::not_found, "the build runner is not enabled: configure [recipes] to use it"));
    }
    return builds(req, body, *runner);
  }
  if (seg.size() == 2 && (seg[1] == "yank" || seg[1] == "unyank")) {
    if (req.method != Method::post) return method_not_allowed("POST");
    return yank(req, body, catalog, seg[1] == "unyank");
  }
  if (seg.size() == 4 && seg[1] == "projects" && (seg[3] == "claim" || seg[3] == "release")) {
    if (req.method != Method::post) return method_not_allowed("POST");
    return claim(req, body, catalog);
  }
  if (seg.size() == 3 && seg[1] == "files" && !seg[2].empty()) {
    if (req.method != Method::del) return method_not_allowed("DELETE");
    auto deleted = catalog.delete_file(seg[2]);
    if (!deleted) return error_response(deleted.error());
    const std::string names[] = {deleted->filename};
    return json(200, render::render_file_names("deleted", names));
  }
  return error_response(make_error(Errc::not_found, "no such admin endpoint"));
}

}  // namespace wf::http
