#include "steps.hpp"

#include "files.hpp"
#include "wheelforge/archive/retag.hpp"
#include "wheelforge/core/build_failure.hpp"
#include "wheelforge/core/filename.hpp"
#include "wheelforge/core/version.hpp"

namespace wf::build {

namespace fs = std::filesystem;

namespace {

constexpr Step kSteps[] = {
    {"verify CUDA toolkit", core::JobState::preparing, verify_cuda_toolkit},
    {"prepare environment", core::JobState::preparing, prepare_environment},
    {"verify torch and Python", core::JobState::preparing, verify_build_environment},
    {"fetch source", core::JobState::preparing, fetch_source},
    {"build", core::JobState::building, build_wheel},
    {"retag", core::JobState::retagging, retag_wheel},
    {"analyze binaries", core::JobState::retagging, analyze_binaries},
    {"number the build", core::JobState::retagging, number_build},
    {"smoke test", core::JobState::testing, smoke_test},
    {"ingest", core::JobState::ingesting, ingest_wheel},
};

// How much of a failed build's output is searched for an OOM kill's traces.
constexpr std::size_t kOomWindow = 16U * 1024U;

// The one wheel in a directory.
Result<fs::path> only_wheel(const fs::path& dir) {
  auto entries = list_directory(dir);
  if (!entries) return entries.error();
  std::vector<fs::path> wheels;
  for (const auto& entry : *entries) {
    if (entry.path().extension() == ".whl") wheels.push_back(entry.path());
  }
  if (wheels.size() != 1) {
    return make_error(Errc::internal, "the build produced " + std::to_string(wheels.size()) +
                                          " wheels (expected 1)");
  }
  return wheels.front();
}

Status copy_tree(JobContext& ctx, const fs::path& from, const fs::path& to) {
  return ctx.run_checked("fetch source",
                         ctx.command({"/bin/cp", "-a", from.string() + "/.", to.string()},
                                     ctx.base_env, ctx.work_dir));
}

}  // namespace

std::span<const Step> job_steps() {
  return kSteps;
}

Status run_steps(JobContext& ctx) {
  if (auto st = make_directories(ctx.work_dir); !st) return st;
  if (auto st = ctx.executor.prepare(ctx.work_dir); !st) return st;
  ctx.note("job " + std::to_string(ctx.job.id) + ": " + ctx.recipe.name + " " + ctx.job.version +
           " for " + ctx.job.cell.key() + " (label +" + core::local_label(ctx.job.cell) + ")");
  for (const Step& step : job_steps()) {
    if (ctx.job.state != step.state) {
      if (auto st = ctx.advance(step.state); !st) return st;
    } else if (ctx.stopped()) {
      return make_error(Errc::unavailable, "stopped");
    }
    ctx.note("[" + std::string(core::state_name(step.state)) + "] step: " + std::string(step.name));
    if (auto st = step.run(ctx); !st) return st;
    if (ctx.done_early) break;
  }
  return ok_status();
}

Status rewrite_job_wheel(JobContext& ctx, const archive::WheelChanges& changes,
                         std::string_view subdir) {
  if (!changes.local_label && !changes.build_tag && !changes.platform_tags) return ok_status();
  auto rewritten = archive::rewrite_wheel(ctx.wheel, changes, ctx.work_dir / subdir);
  if (!rewritten) {
    return make_error(rewritten.error().code, "rewrite " + ctx.wheel.filename().string() + ": " +
                                                  rewritten.error().message);
  }
  ctx.note("[" + std::string(core::state_name(ctx.job.state)) + "] " +
           ctx.wheel.filename().string() + " -> " + rewritten->filename().string());
  ctx.wheel = *rewritten;
  return ok_status();
}

Status fetch_source(JobContext& ctx) {
  const core::SourceSpec& source = ctx.recipe.source;
  const fs::path root = ctx.work_dir / "src";
  if (auto st = fresh_directory(root); !st) return st;
  ctx.src = root;
  switch (source.kind) {
    case core::SourceSpec::Kind::path:
      return copy_tree(ctx, source.location, root);
    case core::SourceSpec::Kind::git: {
      if (auto st = ctx.run_checked("fetch source", ctx.command({"/usr/bin/git", "clone", "--quiet",
                                                                 source.location, root.string()},
                                                                ctx.base_env, ctx.work_dir));
          !st) {
        return st;
      }
      if (source.ref.empty()) return ok_status();
      return ctx.run_checked("fetch source", ctx.command({"/usr/bin/git", "-C", root.string(),
                                                          "checkout", "--quiet", source.ref},
                                                         ctx.base_env, ctx.work_dir));
    }
    case core::SourceSpec::Kind::index_sdist: {
      // The project's sdist of this version, from our own store.
      auto contents = ctx.services.catalog.load();
      if (!contents) return contents.error();
      const core::FileRecord* sdist = nullptr;
      for (const auto& f : contents->files) {
        if (f.project == ctx.recipe.project && f.kind == core::DistKind::sdist &&
            f.version == ctx.job.version)
          sdist = &f;
      }
      if (sdist == nullptr) {
        return make_error(Errc::not_found, "no sdist of " + ctx.recipe.project + " " +
                                               ctx.job.version + " in the index");
      }
      if (auto st = ctx.run_checked(
              "fetch source",
              ctx.command({"/bin/tar", "-xzf", ctx.services.store.blob_path(sdist->sha256).string(),
                           "-C", root.string()},
                          ctx.base_env, ctx.work_dir));
          !st) {
        return st;
      }
      // An sdist unpacks into its one top directory.
      auto entries = list_directory(root);
      if (!entries) return entries.error();
      for (const auto& entry : *entries) {
        std::error_code ec;
        if (entry.is_directory(ec)) ctx.src = entry.path();
      }
      return ok_status();
    }
  }
  return make_error(Errc::internal, "unknown source kind");
}

Status build_wheel(JobContext& ctx) {
  const core::Recipe& recipe = ctx.recipe;
  const core::Cell& cell = ctx.job.cell;
  ctx.out = ctx.work_dir / "out";
  Env env = ctx.base_env;
  set_env(env, "PATH", (ctx.env_dir / "bin").string() + ":" + tool_path(ctx));
  set_env(env, "CUDA_HOME", ctx.cuda_home.string());
  set_env(env, "PIP_NO_INDEX", "1");
  if (!recipe.arch_variable.empty()) set_env(env, recipe.arch_variable, recipe.arch_value);
  if (!recipe.local_version_variable.empty()) {
    set_env(env, recipe.local_version_variable, core::local_label(cell));
  }
  for (const auto& [k, v] : recipe.env) set_env(env, k, v);
  std::string command = replace_all(recipe.build_command, "{python}",
                                    shell_quote(JobContext::venv_python(ctx.env_dir).string()));
  command = replace_all(command, "{out}", shell_quote(ctx.out.string()));
  command = replace_all(command, "{src}", shell_quote(ctx.src.string()));

  for (int attempt = 0;; ++attempt) {
    // Every attempt is recorded (building -> building after an OOM).
    if (attempt > 0) {
      if (auto st = ctx.advance(core::JobState::building); !st) return st;
    }
    if (auto st = fresh_directory(ctx.out); !st) return st;
    const core::Parallelism p = ctx.parallelism;
    set_env(env, "MAX_JOBS", std::to_string(p.max_jobs));
    set_env(env, "NVCC_THREADS", std::to_string(p.nvcc_threads));
    (void)ctx.services.jobs.record_attempt(ctx.job.id, p.max_jobs, p.nvcc_threads);
    ctx.note("[building] attempt " + std::to_string(attempt + 1) + " with MAX_JOBS=" +
             std::to_string(p.max_jobs) + " NVCC_THREADS=" + std::to_string(p.nvcc_threads));
    const std::uint64_t from = ctx.output_size(ctx.log);
    auto status = ctx.run(ctx.command({"/bin/sh", "-c", command}, env, ctx.src));
    if (!status) return make_error(status.error().code, "build: " + status.error().message);
    if (status->success()) break;
    if (ctx.stopped()) return make_error(Errc::unavailable, "stopped");
    if (status->timed_out) {
      return make_error(Errc::internal,
                        "build " + status->describe() + "; its process tree was killed");
    }
    LogChunk tail = ctx.executor.read_log_tail(ctx.log, kOomWindow);
    if (tail.offset < from) {
      tail.data.erase(0, static_cast<std::size_t>(
                             std::min<std::uint64_t>(from - tail.offset, tail.data.size())));
    }
    const bool oom = core::looks_like_oom(status->exited ? status->code : 0, !status->exited,
                                          status->signal, tail.data);
    const core::Parallelism smaller = core::halve(p);
    if (!oom) return make_error(Errc::internal, ctx.failure("build", *status, ctx.log, from));
    if (attempt >= ctx.host.oom_retries || smaller == p) {
      return make_error(Errc::internal, "build ran out of memory (" + status->describe() + ")" +
                                            ctx.cause(ctx.log, from));
    }
    ctx.note("[building] out of memory (" + status->describe() +
             "); retrying with half the parallelism: MAX_JOBS=" + std::to_string(smaller.max_jobs) +
             " NVCC_THREADS=" + std::to_string(smaller.nvcc_threads));
    ctx.parallelism = smaller;
  }
  auto wheel = only_wheel(ctx.out);
  if (!wheel) return wheel.error();
  ctx.wheel = *wheel;
  return ok_status();
}

Status retag_wheel(JobContext& ctx) {
  const core::Cell& cell = ctx.job.cell;
  auto name = core::parse_dist_filename(ctx.wheel.filename().string());
  if (!name) return make_error(Errc::internal, "built wheel: " + name.error().message);
  if (name->normalized_name != ctx.recipe.project) {
    return make_error(Errc::internal, "the build produced a wheel of '" + name->normalized_name +
                                          "', not '" + ctx.recipe.project + "'");
  }
  if (name->version.public_str() != ctx.job.version) {
    return make_error(Errc::internal, "the build produced version " + name->version.public_str() +
                                          ", not " + ctx.job.version);
  }
  if (core::label_matches(name->version.local_str(), cell)) {
    ctx.note("[retagging] " + ctx.wheel.filename().string() + " already carries +" +
             name->version.local_str());
    return ok_status();
  }
  // Written by the analysis, together with the platform tags it finds: one rewrite.
  ctx.changes.local_label = core::local_label(cell);
  ctx.note("[retagging] " + ctx.wheel.filename().string() + " gets the label +" +
           *ctx.changes.local_label);
  return ok_status();
}

Status smoke_test(JobContext& ctx) {
  // A fresh environment with the same torch, the wheel from the file only, the import check
  // from an empty directory (so that the source tree cannot satisfy the import).
  const fs::path test_env = ctx.work_dir / "test-env";
  const fs::path empty = ctx.work_dir / "empty";
  if (auto st = remove_tree(test_env); !st) return st;
  if (auto st = fresh_directory(empty); !st) return st;
  if (auto st = make_venv(ctx, "smoke test", test_env); !st) return st;
  const std::string python = JobContext::venv_python(test_env).string();
  if (!ctx.host.system_torch) {
    if (auto st = ctx.run_checked(
            "smoke test",
            ctx.command({python, "-m", "pip", "install", "--index-url", ctx.torch_index,
                         "torch==" + ctx.job.cell.torch.str() + ".*"},
                        ctx.base_env, ctx.work_dir));
        !st) {
      return st;
    }
  }
  if (auto st =
          ctx.run_checked("smoke test", ctx.command({python, "-m", "pip", "install", "--no-index",
                                                     "--no-deps", ctx.wheel.string()},
                                                    ctx.base_env, ctx.work_dir));
      !st) {
    return st;
  }
  if (ctx.recipe.import_check.empty()) return ok_status();
  Env env = ctx.base_env;
  set_env(env, "PATH",
          (test_env / "bin").string() + ":" + ctx.cuda_home.string() +
              "/bin:/usr/local/bin:/usr/bin:/bin");
  return ctx.run_checked("smoke test",
                         ctx.command({python, "-c", ctx.recipe.import_check}, env, empty));
}

Status ingest_wheel(JobContext& ctx) {
  // Through the same path as uploads, so that the wheel appears in its variant views.
  auto ingested = ctx.services.ingestor.ingest_path(ctx.wheel);
  if (!ingested) return make_error(ingested.error().code, "ingest: " + ingested.error().message);
  (void)ctx.services.jobs.record_wheel(ctx.job.id, ingested->file.filename, ctx.build_number);
  ctx.note(
      "[ingesting] " + ingested->file.filename + " sha256=" + ingested->file.sha256 +
      (ingested->outcome == ingest::Outcome::identical ? " (identical file already stored)" : ""));
  yank_superseded_builds(ctx, ingested->file.filename);
  if (ctx.services.on_ingested) ctx.services.on_ingested();
  return ok_status();
}

}  // namespace wf::build
