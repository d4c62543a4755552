#include "wheelforge/render/builds.hpp"

#include "render/json_text.hpp"
#include "wheelforge/util/strings.hpp"
#include "wheelforge/util/time.hpp"

namespace wf::render {
namespace {

using detail::dump;
using detail::Json;

// Each tool as {path, version} (torch: {version, cuda}), or null while it was not verified.
Json toolchain_json(const catalog::Toolchain& t) {
  const auto pair = [](const char* k1, const std::string& v1, const char* k2,
                       const std::string& v2) {
    return v1.empty() && v2.empty() ? Json(nullptr) : Json{{k1, v1}, {k2, v2}};
  };
  return Json{{"nvcc", pair("path", t.nvcc, "version", t.nvcc_version)},
              {"torch", pair("version", t.torch_version, "cuda", t.torch_cuda)},
              {"python", pair("path", t.python, "version", t.python_version)}};
}

// The container that ran the build: {image, digest, command}, or null when there was none.
Json provenance_json(const catalog::Provenance& p) {
  if (p.image.empty() && p.engine_command.empty()) return Json(nullptr);
  return Json{{"image", p.image},
              {"digest", p.image_digest.empty() ? Json(nullptr) : Json(p.image_digest)},
              {"command", p.engine_command}};
}

// What the compile cache did for the job's build: {state, reason, directory, hits, misses,
// uncacheable, cuda_hits, cuda_misses, size_bytes, bound_bytes}, or null before its build (or
// when the reader did not look).
Json compile_cache_json(const std::optional<catalog::CompileCacheStats>& c) {
  if (!c) return Json(nullptr);
  using State = catalog::CompileCacheStats::State;
  const char* state = c->state == State::used  ? "used"
                      : c->state == State::off ? "off"
                                               : "unavailable";
  return Json{{"state", state},
              {"reason", c->reason},
              {"directory", c->directory},
              {"hits", c->hits},
              {"misses", c->misses},
              {"uncacheable", c->uncacheable},
              {"cuda_hits", c->cuda_hits},
              {"cuda_misses", c->cuda_misses},
              {"size_bytes", c->size_bytes},
              {"bound_bytes", c->bound_bytes}};
}

Json job_json(const catalog::JobRecord& j) {
  return Json{{"id", j.id},
              {"build_id", j.build_id},
              {"recipe", j.recipe},
              {"version", j.version},
              {"python", j.cell.python},
              {"torch", j.cell.torch.str()},
              {"cuda", j.cell.cuda.str()},
              {"label", core::local_label(j.cell)},
              {"state", std::string(core::state_name(j.state))},
              {"reason", j.reason},
              {"attempts", j.attempts},
              {"max_jobs", j.max_jobs},
              {"nvcc_threads", j.nvcc_threads},
              {"wheel", j.wheel},
              {"build_number", j.wheel.empty() ? Json(nullptr) : Json(j.build_number)},
              {"glibc_floor", j.glibc_floor.empty() ? Json(nullptr) : Json(j.glibc_floor)},
              {"toolchain", toolchain_json(j.toolchain)},
              {"executor_job", j.executor_job},
              {"runner", j.claimed_by},
              {"container", provenance_json(j.provenance)},
              {"compile_cache", compile_cache_json(j.compile_cache)},
              {"created_at", iso8601_micros(j.created_at)},
              {"started_at", detail::time_or_null<Json>(j.started_at)},
              {"finished_at", detail::time_or_null<Json>(j.finished_at)},
              {"log_url", "/admin/jobs/" + std::to_string(j.id) + "/log"}};
}

Json build_json(const catalog::BuildRecord& b) {
  return Json{{"id", b.id},
              {"recipe", b.recipe},
              {"version", b.version},
              {"force", b.force},
              {"yank_superseded", b.yank_superseded},
              {"created_at", iso8601_micros(b.created_at)}};
}

}  // namespace

Result<core::BuildRequest> parse_build_request(std::string_view text) {
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return make_error(Errc::invalid, "the body must be a JSON object");
  }
  // Only the JSON's shape is checked here; its values go through core::check_build_request,
  // as the web form's do.
  Problems problems;
  core::BuildRequestFields fields;
  const auto get_string = [&](const char* key, std::string& out) {
    if (!j.contains(key)) return;  // missing: check_build_request says so
    if (j[key].is_string()) {
      out = j[key].get<std::string>();
    } else {
      problems.add(std::string("\"") + key + "\" must be a string");
      out = j[key].dump();  // given, though unusable: not reported as missing as well
    }
  };
  get_string("recipe", fields.recipe);
  get_string("version", fields.version);
  if (j.contains("force")) {
    if (j["force"].is_boolean()) {
      fields.force = j["force"].get<bool>();
    } else {
      problems.add("\"force\" must be true or false");
    }
  }
  if (j.contains("yank_superseded")) {
    if (j["yank_superseded"].is_boolean()) {
      fields.yank_superseded = j["yank_superseded"].get<bool>();
    } else {
      problems.add("\"yank_superseded\" must be true or false");
    }
  }
  if (j.contains("cache")) {
    if (j["cache"].is_boolean()) {
      fields.compile_cache = j["cache"].get<bool>();
    } else {
      problems.add("\"cache\" must be true or false");
    }
  }
  if (j.contains("matrix") && !j["matrix"].is_null()) {
    const Json& m = j["matrix"];
    if (!m.is_object()) {
      problems.add("\"matrix\" must be an object with python, torch and cuda lists");
    } else {
      const auto strings = [&](const char* key, std::vector<std::string>& out) {
        if (!m.contains(key)) return;
        if (!m[key].is_array()) {
          problems.add(std::string("matrix.") + key + " must be a list");
          return;
        }
        for (const auto& v : m[key]) {
          if (v.is_string()) {
            out.push_back(v.get<std::string>());
          } else {
            problems.add(std::string("matrix.") + key + " must contain strings");
          }
        }
      };
      strings("python", fields.python);
      strings("torch", fields.torch);
      strings("cuda", fields.cuda);
      for (const auto& [key, value] : m.items()) {
        if (key != "python" && key != "torch" && key != "cuda") {
          problems.add("matrix: unknown axis '" + sanitize_for_log(key) + "'");
        }
      }
    }
  }
  for (const auto& [key, value] : j.items()) {
    if (key != "recipe" && key != "version" && key != "matrix" && key != "force" &&
        key != "yank_superseded" && key != "cache") {
      problems.add("unknown field '" + sanitize_for_log(key) + "'");
    }
  }
  return core::check_build_request(fields, std::move(problems));
}

std::string render_job(const catalog::JobRecord& job) {
  return dump(job_json(job));
}

std::string render_build(const catalog::BuildRecord& build,
                         std::span<const catalog::JobRecord> jobs) {
  Json j{{"build", build_json(build)}, {"jobs", Json::array()}};
  for (const auto& job : jobs) j["jobs"].push_back(job_json(job));
  return dump(j);
}

std::string render_builds(std::span<const catalog::BuildRecord> builds) {
  Json j{{"builds", Json::array()}};
  for (const auto& b : builds) j["builds"].push_back(build_json(b));
  return dump(j);
}

}  // namespace wf::render
