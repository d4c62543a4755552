#include <string>

#include "ui/frame.hpp"
#include "wheelforge/core/name.hpp"
#include "wheelforge/ui/pages.hpp"

namespace wf::ui {
namespace {

std::string time_or_dash(const std::optional<Micros>& t) {
  return t ? upload_date(*t) : std::string("—");
}

std::string duration_of(const catalog::JobRecord& job, Micros now) {
  if (!job.started_at) return "—";
  const Micros end = job.finished_at.value_or(now);
  return human_duration(end - *job.started_at);
}

bool can_cancel(core::JobState s) {
  return !core::is_terminal(s) && s != core::JobState::interrupted;
}
bool can_retry(core::JobState s) {
  return s == core::JobState::failed || s == core::JobState::cancelled ||
         s == core::JobState::interrupted;
}

mus::data job_data(const catalog::JobRecord& job, Micros now) {
  mus::data d;
  d.set("id", std::to_string(job.id));
  d.set("build_id", std::to_string(job.build_id));
  d.set("recipe", job.recipe);
  d.set("version", job.version);
  d.set("python", job.cell.python);
  d.set("torch", job.cell.torch.str());
  d.set("cuda", job.cell.cuda.str());
  d.set("cell", job.cell.key());
  d.set("state", std::string(core::state_name(job.state)));
  d.set("terminal", core::is_terminal(job.state));
  set_text(d, "reason", job.reason);
  d.set("attempts", std::to_string(job.attempts));
  d.set("max_jobs", job.max_jobs == 0 ? std::string("—") : std::to_string(job.max_jobs));
  d.set("nvcc_threads",
        job.nvcc_threads == 0 ? std::string("—") : std::to_string(job.nvcc_threads));
  set_text(d, "wheel", job.wheel);
  // "0 (the first build of its file name)" or "2 (build tag -2-)", once a wheel is published.
  set_text(d, "build_number",
           job.wheel.empty()       ? std::string()
           : job.build_number == 0 ? std::string("0 (the first build of its file name)")
                                   : std::to_string(job.build_number) + " (build tag -" +
                                         std::to_string(job.build_number) + "-)");
  set_text(d, "glibc_floor", job.glibc_floor);
  // The toolchain the runner verified: "path (version)" per tool, absent until verified.
  const auto tool = [](const std::string& what, const std::string& version) {
    if (what.empty()) return version;
    return version.empty() ? what : what + " (" + version + ")";
  };
  set_text(d, "nvcc", tool(job.toolchain.nvcc, job.toolchain.nvcc_version));
  set_text(d, "torch_build",
           tool(job.toolchain.torch_version,
                job.toolchain.torch_cuda.empty() ? "" : "CUDA " + job.toolchain.torch_cuda));
  set_text(d, "python_build", tool(job.toolchain.python, job.toolchain.python_version));
  // The container that ran the build: "image (digest)", and the engine's command line.
  set_text(d, "image", tool(job.provenance.image, job.provenance.image_digest));
  set_text(d, "engine_command", job.provenance.engine_command);
  d.set("created", upload_date(job.created_at));
  d.set("started", time_or_dash(job.started_at));
  d.set("finished", time_or_dash(job.finished_at));
  d.set("duration", duration_of(job, now));
  d.set("can_cancel", can_cancel(job.state));
  d.set("can_retry", can_retry(job.state));
  return d;
}

}  // namespace

std::string render_builds(const Site& site, const BuildsPage& page) {
  mus::data d;
  d.set("csrf", site.csrf);
  d.set("runner_enabled", page.runner_enabled);
  set_text(d, "notice", page.notice);
  set_text(d, "error", page.error);
  mus::data recipes{mus::data::type::list};
  for (const auto& r : page.recipes) {
    mus::data dr;
    dr.set("name", r.name);
    dr.set("project", r.project);
    dr.set("python", join(r.python, ", "));
    dr.set("torch", join(r.torch, ", "));
    dr.set("cuda", join(r.cuda, ", "));
    recipes.push_back(dr);
  }
  d.set("recipes", recipes);
  d.set("has_recipes", !page.recipes.empty());
  mus::data builds{mus::data::type::list};
  for (const auto& b : page.builds) {
    mus::data db;
    db.set("id", std::to_string(b.build.id));
    db.set("recipe", b.build.recipe);
    db.set("version", b.build.version);
    db.set("force", b.build.force);
    db.set("created", upload_date(b.build.created_at));
    mus::data jobs{mus::data::type::list};
    for (const auto& j : b.jobs) jobs.push_back(job_data(j, page.now));
    db.set("jobs", jobs);
    db.set("has_jobs", !b.jobs.empty());
    builds.push_back(db);
  }
  d.set("builds", builds);
  d.set("has_builds", !page.builds.empty());
  return layout(site, Layout{"Builds — wheelforge", render_template("builds", d), {}, false});
}

std::string render_job(const Site& site, const JobPage& page) {
  mus::data d = job_data(page.job, page.now);
  d.set("csrf", site.csrf);
  d.set("log", page.log);
  d.set("log_offset", std::to_string(page.log_offset));
  d.set("log_truncated", page.log_truncated);
  set_text(d, "error", page.error);
  set_text(
      d, "project_url", page.job.wheel.empty() ? std::string() : [&] {
        // The wheel's project page: its name is the file name's first part.
        const auto dash = page.job.wheel.find('-');
        return "/project/" + core::normalize_name(page.job.wheel.substr(0, dash)) + "/";
      }());
  const bool terminal = core::is_terminal(page.job.state);
  return layout(site, Layout{"Job " + std::to_string(page.job.id) + " — wheelforge",
                             render_template("job", d),
                             {"job.js"},
                             !terminal});
}

}  // namespace wf::ui
