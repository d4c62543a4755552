#include "steps.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "files.hpp"
#include "wheelforge/archive/retag.hpp"
#include "wheelforge/build/git_source.hpp"
#include "wheelforge/core/build_failure.hpp"
#include "wheelforge/core/filename.hpp"
#include "wheelforge/core/version.hpp"
#include "wheelforge/util/fs.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::build {

namespace fs = std::filesystem;

namespace {

using Where = CommandPlacement::Where;

constexpr Step kSteps[] = {
    {"verify CUDA toolkit", core::JobState::preparing, verify_cuda_toolkit, Where::build},
    {"prepare environment", core::JobState::preparing, prepare_environment, Where::build},
    {"verify torch and Python", core::JobState::preparing, verify_build_environment, Where::build},
    {"fetch source", core::JobState::preparing, fetch_source, Where::server},
    {"build", core::JobState::building, build_wheel, Where::build},
    {"retag", core::JobState::retagging, retag_wheel, Where::server},
    // The analysis reads the wheel's ELF files in this process: nothing runs on the executor.
    {"analyze binaries", core::JobState::retagging, analyze_binaries, Where::server},
    {"number the build", core::JobState::retagging, number_build, Where::server},
    {"smoke test", core::JobState::testing, smoke_test, Where::test},
    {"ingest", core::JobState::ingesting, ingest_wheel, Where::server},
};

// The position of the build step in kSteps.
std::size_t build_step() {
  for (std::size_t i = 0; i < std::size(kSteps); ++i) {
    if (kSteps[i].run == build_wheel) return i;
  }
  return std::size(kSteps);
}

// True when `name` is the build step or one after it.
bool at_or_after_build(std::string_view name) {
  for (std::size_t i = build_step(); i < std::size(kSteps); ++i) {
    if (kSteps[i].name == name) return true;
  }
  return false;
}

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

// A private file of the job's (0600), replaced if it exists.
Status write_private_file(const fs::path& path, std::string_view text) {
  std::error_code ec;
  fs::remove(path, ec);
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd.valid()) return errno_error(errno, "cannot create " + path.string());
  for (std::size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(fd.get(), text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno_error(errno, "cannot write " + path.string());
    done += static_cast<std::size_t>(n);
  }
  return ok_status();
}

// git clone, checkout of the ref, then the submodules of that commit (recursively), with the
// recipe's credentials only (git_source.hpp).
Status fetch_git(JobContext& ctx, const fs::path& root) {
  const core::SourceSpec& source = ctx.recipe.source;
  register_source_secrets(source);
  std::string credentials;
  if (!source.credentials.empty()) {
    auto text = read_small_file(source.credentials, 1U << 20U);
    if (!text.ok()) {
      return make_error(Errc::invalid, "fetch source: the credentials file " + source.credentials +
                                           ": " + text.error().message);
    }
    credentials = std::move(text.value());
  }
  const SplitGitUrl split = split_git_url(source.location);
  std::string store = source.credentials;
  // The URL's own userinfo goes into a credential file of the job, never to git's command
  // line (which is logged) or into the clone's .git/config.
  const fs::path own_store = ctx.work_dir / "git-credentials";
  struct RemoveStore {
    fs::path path;
    ~RemoveStore() {
      std::error_code ec;
      fs::remove(path, ec);
    }
  } remove_store{split.credential_line ? own_store : fs::path()};
  if (split.credential_line) {
    std::string text = *split.credential_line + "\n" + credentials;
    if (auto st = write_private_file(own_store, text); !st) return st;
    store = own_store.string();
  }
  Env env = ctx.base_env;
  // No prompt for what the credentials lack: a clear failure instead of a wait.
  set_env(env, "GIT_TERMINAL_PROMPT", "0");
  const std::vector<std::string> options = git_fetch_options(source, store);
  const auto git = [&](std::vector<std::string> args) {
    std::vector<std::string> argv = {"/usr/bin/git"};
    argv.insert(argv.end(), options.begin(), options.end());
    argv.insert(argv.end(), args.begin(), args.end());
    return ctx.run_checked("fetch source", ctx.command(std::move(argv), env, ctx.work_dir));
  };
  if (auto st = git({"clone", "--quiet", split.url, root.string()}); !st) return st;
  if (!source.ref.empty()) {
    if (auto st = git({"-C", root.string(), "checkout", "--quiet", source.ref}); !st) return st;
  }
  if (source.submodules == core::SourceSpec::Submodules::none) return ok_status();
  return git({"-C", root.string(), "submodule", "update", "--init", "--recursive"});
}

}  // namespace

std::span<const Step> job_steps() {
  return kSteps;
}

bool resumable(core::JobState state, const fs::path& work_dir) {
  if (state != core::JobState::building && state != core::JobState::retagging &&
      state != core::JobState::testing && state != core::JobState::ingesting) {
    return false;
  }
  const std::string step = JobContext::checkpointed_step(work_dir);
  // The step before the build completed (its findings are all the build needs), or the
  // build itself or a later step.
  return (build_step() > 0 && step == kSteps[build_step() - 1].name) || at_or_after_build(step);
}

Status run_steps(JobContext& ctx) {
  if (auto st = make_directories(ctx.work_dir); !st) return st;
  if (!ctx.pip_cache.empty()) {
    if (auto st = make_directories(ctx.pip_cache); !st) return st;
  }
  if (auto st = ctx.executor.prepare(ctx.work_dir); !st) return st;
  std::size_t first = 0;
  if (ctx.resume) {
    if (auto st = ctx.load_checkpoint(); !st) return st;
    // This server's URL, which may differ from the one that started the job.
    ctx.torch_index = ctx.cell_torch_index();
    const bool built = at_or_after_build(ctx.completed_step);
    first = built ? build_step() + 1 : build_step();
    ctx.resume = !built && ctx.job.state == core::JobState::building;
    if (built) {
      // Steps after the build run again from the start: what still runs of them goes first.
      ctx.executor.release(ctx.placement(), Executor::Release::abandoned);
      // They start from the wheel the build produced (the checkpoint names the last one a
      // later step rewrote).
      auto wheel = only_wheel(ctx.out);
      if (!wheel) return wheel.error();
      ctx.wheel = *wheel;
    }
    ctx.note("the server restarted while this job ran (" +
             std::string(core::state_name(ctx.job.state)) + "); resuming at step '" +
             std::string(first < std::size(kSteps) ? kSteps[first].name : "") + "'" +
             (ctx.resume ? ", attaching to the build that ran" : ""));
  } else {
    ctx.note("job " + std::to_string(ctx.job.id) + ": " + ctx.recipe.name + " " + ctx.job.version +
             " for " + ctx.job.cell.key() + " (label +" + core::local_label(ctx.job.cell) + ")");
  }
  for (std::size_t i = first; i < std::size(kSteps); ++i) {
    const Step& step = kSteps[i];
    if (ctx.job.state != step.state) {
      if (auto st = ctx.advance(step.state); !st) return st;
    } else if (ctx.stopped()) {
      return make_error(Errc::unavailable, "stopped");
    }
    ctx.where = step.where;
    ctx.note("[" + std::string(core::state_name(step.state)) + "] step: " + std::string(step.name));
    if (auto st = step.run(ctx); !st) return st;
    ctx.completed_step = step.name;
    if (auto st = ctx.save_checkpoint(); !st) {
      ctx.note("[" + std::string(core::state_name(step.state)) +
               "] warning: the checkpoint was not written (" + st.error().message +
               "): a restart will run this job again from the start");
    }
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
  ctx.source_digest = {};
  switch (source.kind) {
    case core::SourceSpec::Kind::path:
      ctx.source_uri = "file://" + source.location;
      return copy_tree(ctx, source.location, root);
    case core::SourceSpec::Kind::git: {
      // The URL's credentials never reach the provenance.
      ctx.source_uri = "git+" + split_git_url(source.location).url +
                       (source.ref.empty() ? std::string() : "@" + source.ref);
      if (auto st = fetch_git(ctx, root); !st) return st;
      return record_git_commit(ctx, root);
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
      ctx.source_uri = ctx.server_url + "/files/" + sdist->sha256 + "/" + sdist->filename;
      ctx.source_digest = {"sha256", sdist->sha256};
      // A local file: the blob, or the read cache's copy of an object store's blob.
      auto sdist_file = ctx.services.store.local_copy(sdist->sha256);
      if (!sdist_file) {
        return make_error(sdist_file.error().code,
                          "fetch source " + sdist->filename + ": " + sdist_file.error().message);
      }
      if (auto st = ctx.run_checked(
              "fetch source",
              ctx.command({"/bin/tar", "-xzf", sdist_file->string(), "-C", root.string()},
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
  catalog::CompileCacheStats cache = prepare_compile_cache(ctx, env);
  Status built = run_build(ctx, std::move(env));
  finish_compile_cache(ctx, cache);
  return built;
}

Status run_build(JobContext& ctx, Env env) {
  const core::Recipe& recipe = ctx.recipe;
  std::string command = replace_all(recipe.build_command, "{python}",
                                    shell_quote(JobContext::venv_python(ctx.env_dir).string()));
  command = replace_all(command, "{out}", shell_quote(ctx.out.string()));
  command = replace_all(command, "{src}", shell_quote(ctx.src.string()));
  if (!ctx.build_preamble.empty()) command = ctx.build_preamble + command;

  for (int attempt = 0;; ++attempt) {
    // Every attempt is recorded (building -> building after an OOM).
    if (attempt > 0) {
      if (auto st = ctx.advance(core::JobState::building); !st) return st;
    }
    const int number = ctx.attempts_before + attempt + 1;
    const core::Parallelism p = ctx.parallelism;
    set_env(env, "MAX_JOBS", std::to_string(p.max_jobs));
    set_env(env, "NVCC_THREADS", std::to_string(p.nvcc_threads));
    ProcessSpec spec = ctx.command({"/bin/sh", "-c", command}, env, ctx.src);
    // For executors that size the build where it runs (a Slurm job's grant).
    spec.placement.sizing = BuildSizing{recipe.gb_per_job, core::count_archs(recipe.arch_value),
                                        static_cast<unsigned>(number - 1)};
    // The build outlives a server that stops or dies under it: the next one re-attaches.
    spec.placement.lifetime = CommandPlacement::Lifetime::detached;
    std::optional<ExitStatus> status;
    std::uint64_t from = 0;
    if (attempt == 0 && ctx.resume) {
      // A restarted server: the attempt that ran when the previous one went away.
      auto running = ctx.executor.reattach(spec);
      if (running) {
        ctx.note("[building] re-attached to attempt " + std::to_string(number) +
                 ((*running)->remote_id().empty()
                      ? std::string()
                      : " (batch job " + (*running)->remote_id() + ")"));
        from = ctx.attempt_log_offset;
        status = ctx.wait(**running);
      } else {
        ctx.note("[building] attempt " + std::to_string(number) + " cannot be re-attached to (" +
                 running.error().message + "); running it again");
        // Whatever is left of it (a build of another configuration, a tree without its
        // supervisor) must not run beside the new attempt.
        ctx.executor.release(ctx.placement(), Executor::Release::abandoned);
      }
    }
    if (!status) {
      if (auto st = fresh_directory(ctx.out); !st) return st;
      ctx.keep(ctx.services.jobs.record_attempt(ctx.job.id, p.max_jobs, p.nvcc_threads),
               "the attempt's parallelism");
      ctx.note("[building] attempt " + std::to_string(number) + " with MAX_JOBS=" +
               std::to_string(p.max_jobs) + " NVCC_THREADS=" + std::to_string(p.nvcc_threads));
      from = ctx.output_size(ctx.log);
      ctx.attempt_log_offset = from;
      ctx.keep(ctx.save_checkpoint(), "the resume checkpoint");
      auto started = ctx.run(spec);
      if (!started) return make_error(started.error().code, "build: " + started.error().message);
      status = *started;
    }
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
    if (ctx.attempts_before + attempt >= ctx.host.oom_retries || smaller == p) {
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
                        ctx.install_env(), ctx.work_dir));
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
  catalog::Actor runner;
  runner.origin = "build";
  runner.address = "job " + std::to_string(ctx.job.id);
  const std::optional<ingest::Attestations> provenance = signed_provenance(ctx);
  auto ingested =
      ctx.services.ingestor.ingest_path(ctx.wheel, runner, provenance ? &*provenance : nullptr);
  if (!ingested) return make_error(ingested.error().code, "ingest: " + ingested.error().message);
  ctx.keep(ctx.services.jobs.record_wheel(ctx.job.id, ingested->file.filename, ctx.build_number),
           "the wheel's name");
  ctx.note("[ingesting] " + ingested->file.filename + " sha256=" + ingested->file.sha256 +
           (ingested->outcome == ingest::Outcome::identical ? " (identical file already stored)"
            : ingested->file.provenance_sha256.empty()      ? ""
                                                            : " with signed provenance"));
  yank_superseded_builds(ctx, ingested->file.filename);
  if (ctx.services.on_ingested) ctx.services.on_ingested();
  return ok_status();
}

}  // namespace wf::build
