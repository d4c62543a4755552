// The compile cache around a job's build step (wheelforge/build/compile_cache.hpp).

#include <unistd.h>

#include "files.hpp"
#include "steps.hpp"
#include "wheelforge/build/compile_cache.hpp"
#include "wheelforge/util/fs.hpp"
#include "wheelforge/util/log.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::build {

namespace fs = std::filesystem;

namespace {

using State = catalog::CompileCacheStats::State;

std::string env_value(const Env& env, std::string_view key) {
  for (const auto& [k, v] : env) {
    if (k == key) return v;
  }
  return {};
}

// ccache reads a plain number as GB: the bound goes in KiB.
std::string ccache_size(std::uint64_t bytes) {
  return std::to_string(std::max<std::uint64_t>(1, bytes / 1024U)) + "Ki";
}

void set_nvcc_env(Env& env, const fs::path& wrappers) {
  set_env(env, "PYTORCH_NVCC", (wrappers / "nvcc").string());
  // torch's cpp_extension gives nvcc --generate-dependencies-with-compile --dependency-output
  // for ninja's header tracking, which ccache cannot cache (it takes the dependency file for a
  // second input): every .cu compile would pass through uncached. A build in a fresh copy of
  // the source never rebuilds incrementally, so the dependency files are not needed.
  if (env_value(env, "TORCH_EXTENSION_SKIP_NVCC_GEN_DEPENDENCIES").empty()) {
    set_env(env, "TORCH_EXTENSION_SKIP_NVCC_GEN_DEPENDENCIES", "1");
  }
}

void set_ccache_env(const JobContext& ctx, Env& env, const fs::path& dir,
                    const fs::path& stats_log) {
  set_env(env, "CCACHE_DIR", dir.string());
  set_env(env, "CCACHE_MAXSIZE", ccache_size(ctx.host.compile_cache_bytes));
  // Paths under the builds directory (the job's source, the environments) are hashed relative
  // to the compile's directory, so that jobs in different work directories share results.
  set_env(env, "CCACHE_BASEDIR", ctx.builds_dir.string());
  set_env(env, "CCACHE_NOHASHDIR", "1");
  set_env(env, "CCACHE_STATSLOG", stats_log.string());
}

// A build in a container or on a cluster node: the cache directory is mounted into the
// container (CommandPlacement::compile_cache) or seen by the nodes (a shared directory), the
// wrappers live in it and find ccache and the compilers where the build runs, and a check in
// front of the build command leaves kCompileCacheUnavailable in the work directory (and takes
// the wrappers off PATH) when ccache is missing there or the directory cannot be written.
template <typename Without>
catalog::CompileCacheStats prepare_remote(JobContext& ctx, Env& env, const fs::path& dir,
                                          catalog::CompileCacheStats stats,
                                          const Without& without) {
  if (auto st = make_directories(dir); !st) return without(State::unavailable, st.error().message);
  const fs::path wrappers = dir / "wheelforge-compilers";
  if (auto st = write_portable_compiler_wrappers(wrappers); !st) {
    return without(State::unavailable, st.error().message);
  }
  const fs::path stats_log = ctx.work_dir / kCompileCacheLog;
  const fs::path marker = ctx.work_dir / kCompileCacheUnavailable;
  if (!ctx.resume) {
    std::error_code ec;
    fs::remove(stats_log, ec);
    fs::remove(marker, ec);
  }
  set_env(env, "PATH", wrappers.string() + ":" + env_value(env, "PATH"));
  set_nvcc_env(env, wrappers);
  set_ccache_env(ctx, env, dir, stats_log);
  const std::string where = kind_name(ctx.host.executor.kind);
  ctx.build_preamble =
      "if ! command -v ccache >/dev/null 2>&1; then echo " +
      shell_quote("ccache is not installed where the " + where + " build runs (not on its PATH)") +
      " > " + shell_quote(marker.string()) + "; elif [ ! -w " + shell_quote(dir.string()) +
      " ]; then echo " +
      shell_quote("cannot write to " + dir.string() + " where the " + where + " build runs") +
      " > " + shell_quote(marker.string()) + "; fi; if [ -e " + shell_quote(marker.string()) +
      " ]; then PATH=${PATH#" + shell_quote(wrappers.string() + ":") +
      "}; unset PYTORCH_NVCC; fi\n";
  ctx.compile_cache = dir;
  ctx.note("[building] compile cache " + dir.string() + " (ccache where the " + where +
           " build runs, through the wrappers in " + wrappers.string() + ")");
  return stats;
}

}  // namespace

catalog::CompileCacheStats prepare_compile_cache(JobContext& ctx, Env& env) {
  catalog::CompileCacheStats stats;
  stats.bound_bytes = ctx.host.compile_cache_bytes;
  const auto without = [&](State state, std::string why) {
    stats.state = state;
    stats.reason = std::move(why);
    ctx.note("[building] compile cache " +
             std::string(state == State::off ? "off" : "unavailable, building without it") + ": " +
             stats.reason);
    if (state == State::unavailable) {
      log::warn("job={} compile cache unavailable: {}", ctx.job.id, stats.reason);
    }
    return stats;
  };
  if (ctx.host.compile_cache == HostConfig::CompileCache::off) {
    return without(State::off, "[build] compile_cache is \"off\"");
  }
  if (!ctx.recipe.compile_cache) {
    return without(State::off, "the recipe's compile_cache is false");
  }
  if (compile_cache_refused(ctx.builds_dir, ctx.job.build_id)) {
    return without(State::off, "the build request said \"cache\": false");
  }
  const fs::path root =
      ctx.host.compile_cache_root.empty() ? ctx.builds_dir / "ccache" : ctx.host.compile_cache_root;
  const fs::path dir = compile_cache_dir(root, ctx.job.recipe);
  stats.directory = dir.string();
  const std::string path = env_value(env, "PATH");
  if (ctx.host.executor.remote_toolchain()) return prepare_remote(ctx, env, dir, stats, without);
  const fs::path ccache = find_executable("ccache", path);
  if (ccache.empty()) {
    return without(State::unavailable, "ccache is not installed (not found on the build's PATH)");
  }
  if (auto st = make_directories(dir); !st) return without(State::unavailable, st.error().message);
  if (::access(dir.c_str(), W_OK) != 0) {
    return without(State::unavailable, "cannot write to " + dir.string());
  }
  std::map<std::string, fs::path> compilers;
  for (const std::string_view name : kWrappedCompilers) {
    const fs::path real =
        name == "nvcc" ? ctx.cuda_home / "bin" / "nvcc" : find_executable(name, path);
    if (!real.empty() && ::access(real.c_str(), X_OK) == 0) compilers.emplace(name, real);
  }
  const fs::path wrappers = compiler_wrappers_dir(ctx.builds_dir, ccache, compilers);
  if (auto st = write_compiler_wrappers(wrappers, ccache, compilers); !st) {
    return without(State::unavailable, st.error().message);
  }
  const fs::path stats_log = ctx.work_dir / kCompileCacheLog;
  if (!ctx.resume) {
    std::error_code ec;
    fs::remove(stats_log, ec);
  }
  set_env(env, "PATH", wrappers.string() + ":" + path);
  if (compilers.contains("nvcc")) set_nvcc_env(env, wrappers);
  set_ccache_env(ctx, env, dir, stats_log);
  std::string names;
  for (const auto& [name, real] : compilers) names += (names.empty() ? "" : ", ") + name;
  ctx.note("[building] compile cache " + dir.string() + " (ccache " + ccache.string() +
           "; wrapped: " + (names.empty() ? std::string("nothing") : names) + ")");
  return stats;
}

void finish_compile_cache(JobContext& ctx, catalog::CompileCacheStats stats) {
  if (stats.state == State::used && !ctx.compile_cache.empty()) {
    // A remote build's check found the cache unusable where it ran: it built without it.
    if (auto why = read_small_file(ctx.work_dir / kCompileCacheUnavailable, 4096); why.ok()) {
      stats.state = State::unavailable;
      stats.reason = std::string(trim(why.value()));
      ctx.note("[building] compile cache unavailable, built without it: " + stats.reason);
      log::warn("job={} compile cache unavailable: {}", ctx.job.id, stats.reason);
    }
  }
  if (stats.state == State::used) {
    auto log = read_small_file(ctx.work_dir / kCompileCacheLog, 64U << 20U);
    catalog::CompileCacheStats counted = parse_ccache_stats_log(log.ok() ? log.value() : "");
    counted.state = stats.state;
    counted.directory = stats.directory;
    counted.bound_bytes = stats.bound_bytes;
    counted.size_bytes = directory_bytes(stats.directory);
    stats = counted;
    ctx.note("[building] compile cache: " + describe_compile_cache(stats));
    log::info("job={} compile cache: {} hit(s), {} miss(es)", ctx.job.id, stats.hits, stats.misses);
  }
  if (auto st =
          write_file_atomic(ctx.work_dir / kCompileCacheFile, format_compile_cache_stats(stats));
      !st) {
    log::warn("job={} could not keep the compile cache's statistics: {}", ctx.job.id,
              st.error().message);
    ctx.note("could not keep the compile cache's statistics: " + st.error().message);
  }
}

}  // namespace wf::build
