// Step 2, prepare environment: the virtual environment a cell builds in, reused by every job
// with the same inputs.
//
// An environment is keyed by everything that makes it: the cell, the interpreter's path, the
// torch requirement (or the interpreter's own torch), the build requirements and the index
// they come from. Its directory is DATA_DIR/builds/envs/<cell>-<12 hex digits of the sha256 of
// those inputs>, and its .ready marker holds the inputs in full; so changing build_requires
// (or the index, or the interpreter) builds a new environment instead of reusing a stale one.
// Environments of other keys are left in place (a running job may use one); removing
// DATA_DIR/builds/envs while no build runs reclaims them.
//
// Several runners (the server's, `wheelforge build`) may prepare the same environment at once:
// an flock on envs/<name>.lock lets one build it while the others wait.

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <thread>

#include "files.hpp"
#include "steps.hpp"
#include "wheelforge/crypto/digest.hpp"
#include "wheelforge/util/fs.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::build {

namespace fs = std::filesystem;

namespace {

// Holds an exclusive flock on a file while it lives.
class FileLock {
 public:
  explicit FileLock(UniqueFd fd) : fd_(std::move(fd)) {}
  FileLock(FileLock&&) = default;
  FileLock& operator=(FileLock&&) = default;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  ~FileLock() {
    if (fd_.valid()) ::flock(fd_.get(), LOCK_UN);
  }

 private:
  UniqueFd fd_;
};

// Waits for the lock, giving up when the job is stopped.
Result<FileLock> lock_file(const JobContext& ctx, const fs::path& path) {
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOCTTY, 0640));
  if (!fd.valid()) return errno_error(errno, "cannot open " + path.string());
  bool waiting = false;
  while (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR) {
      return errno_error(errno, "cannot lock " + path.string());
    }
    if (ctx.stopped()) return make_error(Errc::unavailable, "stopped");
    if (!waiting) {
      ctx.note("[preparing] waiting for another job preparing the same environment");
      waiting = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return FileLock(std::move(fd));
}

// Runs a probe command; its output (trimmed) when it exits 0, nullopt otherwise.
Result<std::optional<std::string>> probe(JobContext& ctx, std::vector<std::string> argv, Env env,
                                         const std::string& name) {
  const fs::path output = ctx.work_dir / (name + "-probe.txt");
  if (auto st = remove_tree(output); !st) return st.error();
  auto status = ctx.run(ctx.command(std::move(argv), std::move(env), ctx.work_dir, output));
  if (!status) return status.error();
  if (ctx.stopped()) return make_error(Errc::unavailable, "stopped");
  if (!status->success()) return std::optional<std::string>();
  return std::optional<std::string>(std::string(trim(ctx.executor.read_log(output, 0, 4096))));
}

// Where a default requirement is found already, if it is: ninja as a program on the build's
// PATH; setuptools and wheel among the interpreter's own packages, which the environment sees
// with system_torch.
Result<std::optional<std::string>> provided(JobContext& ctx, std::string_view requirement) {
  if (requirement == "ninja") {
    Env env = ctx.base_env;
    set_env(env, "PATH", tool_path(ctx));
    return probe(ctx, {"/bin/sh", "-c", "command -v ninja"}, env, "ninja");
  }
  if (!ctx.host.system_torch) return std::optional<std::string>();
  return probe(ctx,
               {ctx.python.string(), "-c",
                "import importlib.util, sys\n"
                "spec = importlib.util.find_spec(sys.argv[1])\n"
                "print(spec.origin) if spec else sys.exit(1)",
                std::string(requirement)},
               ctx.base_env, std::string(requirement));
}

// The recipe's build requirements, or the defaults less what is there already.
Result<std::vector<std::string>> build_requirements(JobContext& ctx) {
  if (ctx.recipe.build_requires) return *ctx.recipe.build_requires;
  std::vector<std::string> out;
  for (const auto requirement : core::kDefaultBuildRequires) {
    auto found = provided(ctx, requirement);
    if (!found) return found.error();
    if (*found) {
      ctx.note("[preparing] " + std::string(requirement) + ": " + **found +
               " (already there; not installed)");
    } else {
      out.emplace_back(requirement);
    }
  }
  return out;
}

}  // namespace

std::string tool_path(const JobContext& ctx) {
  const std::string interpreter_bin =
      ctx.host.system_torch ? ctx.python.parent_path().string() + ":" : std::string();
  return interpreter_bin + ctx.cuda_home.string() + "/bin:/usr/local/bin:/usr/bin:/bin";
}

Status make_venv(JobContext& ctx, std::string_view what, const fs::path& dir) {
  if (auto st = ctx.run_checked(what, ctx.command({ctx.python.string(), "-m", "venv", dir.string()},
                                                  ctx.base_env, ctx.work_dir));
      !st) {
    return st;
  }
  if (!ctx.host.system_torch) return ok_status();
  // With the interpreter's own torch, a new environment sees the interpreter's site-packages
  // through a .pth file. (--system-site-packages would not do: when the interpreter is itself
  // a virtual environment, it exposes the base installation's packages, not the venv's.)
  const std::string script =
      "import subprocess, sys, sysconfig; "
      "paths = subprocess.check_output([sys.argv[1], '-c', "
      "'import site; print(chr(10).join(site.getsitepackages()))'], text=True); "
      "open(sysconfig.get_paths()['purelib'] + '/_wheelforge_system.pth', 'w').write(paths)";
  return ctx.run_checked(
      what, ctx.command({JobContext::venv_python(dir).string(), "-c", script, ctx.python.string()},
                        ctx.base_env, ctx.work_dir));
}

Status prepare_environment(JobContext& ctx) {
  const core::Cell& cell = ctx.job.cell;
  const auto python = ctx.host.pythons.find(cell.python);
  if (python == ctx.host.pythons.end()) {
    return make_error(Errc::invalid, "no interpreter configured for Python " + cell.python);
  }
  ctx.python = python->second;
  ctx.torch_index = ctx.cell_torch_index();

  auto requirements = build_requirements(ctx);
  if (!requirements) return requirements.error();
  std::vector<std::string> install;
  if (!ctx.host.system_torch) install.push_back("torch==" + cell.torch.str() + ".*");
  install.insert(install.end(), requirements->begin(), requirements->end());

  // The key: every input, one per line.
  std::string key = "cell " + cell.key() + "\ninterpreter " + ctx.python.string() + "\ntorch " +
                    (ctx.host.system_torch ? std::string("the interpreter's own")
                                           : "torch==" + cell.torch.str() + ".*") +
                    "\nrequirements";
  for (const auto& r : *requirements) key += " " + r;
  key += "\nindex " + ctx.torch_index + "\n";
  const std::string name = cell.key() + "-" + crypto::sha256_hex(key).substr(0, 12);
  const fs::path envs = ctx.builds_dir / "envs";
  ctx.env_dir = envs / name;
  if (auto st = make_directories(envs); !st) return st;

  auto lock = lock_file(ctx, envs / (name + ".lock"));
  if (!lock) return lock.error();
  const fs::path ready = ctx.env_dir / ".ready";
  if (auto marker = read_small_file(ready, 1U << 16U); marker.ok() && marker.value() == key) {
    ctx.note("[preparing] environment " + name + " (reused)");
    return ok_status();
  }
  ctx.note("[preparing] environment " + name + ": " + [&] {
    std::string what;
    for (const auto& r : install) what += (what.empty() ? "" : " ") + r;
    return what.empty() ? std::string("nothing to install") : what + " from " + ctx.torch_index;
  }());
  if (auto st = remove_tree(ctx.env_dir); !st) return st;
  if (auto st = make_venv(ctx, "prepare environment", ctx.env_dir); !st) return st;
  if (!install.empty()) {
    std::vector<std::string> argv = {JobContext::venv_python(ctx.env_dir).string(),
                                     "-m",
                                     "pip",
                                     "install",
                                     "--index-url",
                                     ctx.torch_index};
    argv.insert(argv.end(), install.begin(), install.end());
    if (auto st = ctx.run_checked("prepare environment",
                                  ctx.command(std::move(argv), ctx.install_env(), ctx.work_dir));
        !st) {
      return st;
    }
  }
  // Written last: an environment whose preparation failed or was cut short is made again.
  return write_file_atomic(ready, key);
}

}  // namespace wf::build
