#include "wheelforge/build/compile_cache.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <thread>

#include "files.hpp"
#include "wheelforge/util/fs.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::build {

namespace fs = std::filesystem;

namespace {

using State = catalog::CompileCacheStats::State;

constexpr const char* state_name(State s) {
  switch (s) {
    case State::used:
      return "used";
    case State::off:
      return "off";
    case State::unavailable:
      return "unavailable";
  }
  return "used";
}

std::string plural(std::uint64_t n, std::string_view one, std::string_view many) {
  return std::to_string(n) + " " + std::string(n == 1 ? one : many);
}

std::string size_text(std::uint64_t bytes) {
  char buf[32];
  const double mib = static_cast<double>(bytes) / (1024.0 * 1024.0);
  if (mib >= 1024.0) {
    std::snprintf(buf, sizeof buf, "%.1f GiB", mib / 1024.0);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f MiB", mib);
  }
  return buf;
}

// Single-quoted for /bin/sh.
std::string sh_quote(const std::string& s) {
  std::string out = "'";
  for (const char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

fs::path options_file(const fs::path& builds_dir, std::int64_t build_id) {
  return builds_dir / ("build-" + std::to_string(build_id) + ".options");
}

}  // namespace

fs::path compile_cache_dir(const fs::path& root, std::string_view recipe) {
  return root / std::string(recipe);
}

catalog::CompileCacheStats parse_ccache_stats_log(std::string_view log) {
  catalog::CompileCacheStats stats;
  std::string source;
  bool hit = false;
  bool miss = false;
  bool any = false;
  const auto close = [&] {
    if (!any) return;
    const bool cuda = source.ends_with(".cu");
    if (hit) {
      ++stats.hits;
      if (cuda) ++stats.cuda_hits;
    } else if (miss) {
      ++stats.misses;
      if (cuda) ++stats.cuda_misses;
    } else {
      ++stats.uncacheable;
    }
    hit = miss = any = false;
  };
  for (const auto raw : split(log, '\n')) {
    const std::string_view line = trim(raw);
    if (line.empty()) continue;
    if (line.front() == '#') {
      close();
      source = std::string(trim(line.substr(1)));
      any = true;
      continue;
    }
    any = true;
    if (line == "direct_cache_hit" || line == "preprocessed_cache_hit") hit = true;
    if (line == "cache_miss") miss = true;
  }
  close();
  return stats;
}

std::string format_compile_cache_stats(const catalog::CompileCacheStats& s) {
  std::string text = "# what the compile cache did for this job's build\n";
  text += std::string("state=") + state_name(s.state) + "\n";
  // One line each: a reason never holds a newline.
  std::string reason = s.reason;
  std::replace(reason.begin(), reason.end(), '\n', ' ');
  text += "reason=" + reason + "\n";
  text += "directory=" + s.directory + "\n";
  text += "hits=" + std::to_string(s.hits) + "\n";
  text += "misses=" + std::to_string(s.misses) + "\n";
  text += "uncacheable=" + std::to_string(s.uncacheable) + "\n";
  text += "cuda_hits=" + std::to_string(s.cuda_hits) + "\n";
  text += "cuda_misses=" + std::to_string(s.cuda_misses) + "\n";
  text += "size_bytes=" + std::to_string(s.size_bytes) + "\n";
  text += "bound_bytes=" + std::to_string(s.bound_bytes) + "\n";
  return text;
}

Result<catalog::CompileCacheStats> parse_compile_cache_stats(std::string_view text) {
  catalog::CompileCacheStats s;
  bool has_state = false;
  for (const auto line : split(text, '\n')) {
    const std::size_t eq = line.find('=');
    if (line.empty() || line.front() == '#' || eq == std::string_view::npos) continue;
    const std::string_view key = line.substr(0, eq);
    const std::string_view value = line.substr(eq + 1);
    const std::uint64_t n = parse_u64(value).value_or(0);
    if (key == "state") {
      for (const State st : {State::used, State::off, State::unavailable}) {
        if (value == state_name(st)) {
          s.state = st;
          has_state = true;
        }
      }
    }
    if (key == "reason") s.reason = std::string(value);
    if (key == "directory") s.directory = std::string(value);
    if (key == "hits") s.hits = n;
    if (key == "misses") s.misses = n;
    if (key == "uncacheable") s.uncacheable = n;
    if (key == "cuda_hits") s.cuda_hits = n;
    if (key == "cuda_misses") s.cuda_misses = n;
    if (key == "size_bytes") s.size_bytes = n;
    if (key == "bound_bytes") s.bound_bytes = n;
  }
  if (!has_state) return make_error(Errc::invalid, "no compile cache state");
  return s;
}

std::string describe_compile_cache(const catalog::CompileCacheStats& s) {
  if (s.state != State::used) return std::string(state_name(s.state)) + ": " + s.reason;
  return plural(s.hits, "hit", "hits") + ", " + plural(s.misses, "miss", "misses") +
         " (CUDA: " + plural(s.cuda_hits, "hit", "hits") + ", " +
         plural(s.cuda_misses, "miss", "misses") + "), " + std::to_string(s.uncacheable) +
         " uncacheable; " + s.directory + " holds " + size_text(s.size_bytes) + " of " +
         size_text(s.bound_bytes);
}

namespace {

// Writes `script` as the executable `dir`/`name`, unless it says that already: ccache hashes the
// host compiler nvcc runs (a wrapper) by its size and modification time, so a wrapper is
// written once and left alone, or no job would find another's results.
Status write_wrapper(const fs::path& dir, const std::string& name, const std::string& script) {
  const fs::path path = dir / name;
  if (auto old = read_small_file(path, 1U << 16U); old.ok() && old.value() == script) {
    return ok_status();
  }
  // Executable before it appears under its name: another job may run it at once.
  const fs::path temp =
      dir / ("." + name + ".tmp-" + std::to_string(::getpid()) + "-" +
             std::to_string(std::hash<std::thread::id>{}(std::this_thread::get_id())));
  if (auto st = write_file_atomic(temp, script); !st) return st;
  std::error_code ec;
  fs::permissions(temp,
                  fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                      fs::perms::others_read | fs::perms::others_exec,
                  ec);
  if (!ec) fs::rename(temp, path, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(temp, ignored);
    return fs_error("cannot write", path, ec);
  }
  return ok_status();
}

}  // namespace

Status write_compiler_wrappers(const fs::path& dir, const fs::path& ccache,
                               const std::map<std::string, fs::path>& compilers) {
  if (auto st = make_directories(dir); !st) return st;
  for (const auto& [name, real] : compilers) {
    // Under ccache (nvcc running its host compiler, ccache running the preprocessor) the real
    // compiler runs directly: each compile is cached once, at the outermost call.
    const std::string script =
        "#!/bin/sh\n"
        "# wheelforge: " +
        name +
        " through the recipe's compile cache (ccache)\n"
        "if [ -n \"$WHEELFORGE_UNDER_CCACHE\" ]; then exec " +
        sh_quote(real.string()) +
        " \"$@\"; fi\n"
        "WHEELFORGE_UNDER_CCACHE=1\nexport WHEELFORGE_UNDER_CCACHE\n"
        "exec " +
        sh_quote(ccache.string()) + " " + sh_quote(real.string()) + " \"$@\"\n";
    if (auto st = write_wrapper(dir, name, script); !st) return st;
  }
  return ok_status();
}

Status write_portable_compiler_wrappers(const fs::path& dir) {
  if (auto st = make_directories(dir); !st) return st;
  for (const std::string_view name : kWrappedCompilers) {
    // The real compiler is looked up where the wrapper runs: nvcc under CUDA_HOME, the others
    // on PATH after this directory. Without ccache there, the real compiler runs.
    std::string script =
        "#!/bin/sh\n"
        "# wheelforge: " +
        std::string(name) +
        " through the recipe's compile cache (ccache), the compiler of the machine it runs on\n"
        "here=" +
        sh_quote(dir.string()) + "\n";
    if (name == "nvcc") {
      script += "real=\"${CUDA_HOME:-/usr/local/cuda}/bin/nvcc\"\n";
    } else {
      script +=
          "real=\nold_ifs=$IFS\nIFS=:\nfor d in $PATH; do\n"
          "  if [ -n \"$d\" ] && [ \"$d\" != \"$here\" ] && [ -x \"$d/" +
          std::string(name) + "\" ]; then real=\"$d/" + std::string(name) +
          "\"; break; fi\ndone\nIFS=$old_ifs\n"
          "if [ -z \"$real\" ]; then echo \"wheelforge: no " +
          std::string(name) + " on PATH\" >&2; exit 127; fi\n";
    }
    script +=
        "if [ -n \"$WHEELFORGE_UNDER_CCACHE\" ] || ! command -v ccache >/dev/null 2>&1; then "
        "exec \"$real\" \"$@\"; fi\n"
        "WHEELFORGE_UNDER_CCACHE=1\nexport WHEELFORGE_UNDER_CCACHE\n"
        "exec ccache \"$real\" \"$@\"\n";
    if (auto st = write_wrapper(dir, std::string(name), script); !st) return st;
  }
  return ok_status();
}

fs::path compiler_wrappers_dir(const fs::path& builds_dir, const fs::path& ccache,
                               const std::map<std::string, fs::path>& compilers) {
  // FNV-1a of what the wrappers say: one directory per set of real compilers (the cell's nvcc
  // differs with its CUDA), the same one for every job of that set.
  std::uint64_t h = 1469598103934665603ULL;
  const auto mix = [&h](std::string_view text) {
    for (const char c : text) {
      h ^= static_cast<unsigned char>(c);
      h *= 1099511628211ULL;
    }
    h ^= 0xFFU;
    h *= 1099511628211ULL;
  };
  mix(ccache.string());
  for (const auto& [name, real] : compilers) {
    mix(name);
    mix(real.string());
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return builds_dir / "compilers" / hex;
}

fs::path find_executable(std::string_view name, std::string_view path) {
  for (const auto dir : split(path, ':')) {
    if (dir.empty()) continue;
    fs::path candidate = fs::path(std::string(dir)) / std::string(name);
    std::error_code ec;
    if (fs::is_regular_file(candidate, ec) && ::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  return {};
}

std::uint64_t directory_bytes(const fs::path& dir) {
  std::uint64_t bytes = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec),
       end;
       !ec && it != end; it.increment(ec)) {
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    bytes += static_cast<std::uint64_t>(st.st_blocks) * 512U;
  }
  return bytes;
}

Status refuse_compile_cache(const fs::path& builds_dir, std::int64_t build_id) {
  if (auto st = make_directories(builds_dir); !st) return st;
  return write_file_atomic(options_file(builds_dir, build_id),
                           "# options of build " + std::to_string(build_id) + "\ncache=off\n");
}

bool compile_cache_refused(const fs::path& builds_dir, std::int64_t build_id) {
  auto text = read_small_file(options_file(builds_dir, build_id), 4096);
  return text.ok() && text.value().find("\ncache=off\n") != std::string::npos;
}

std::string compile_share_key(const catalog::JobRecord& job) {
  return job.recipe + "\n" + job.cell.torch.str() + "\n" + job.cell.cuda.str();
}

void order_to_share_compiles(std::vector<catalog::JobRecord>& queued,
                             const std::multiset<std::string>& running) {
  std::map<std::string, std::size_t> seen;
  std::vector<std::pair<std::size_t, catalog::JobRecord>> ranked;
  ranked.reserve(queued.size());
  for (auto& job : queued) {
    const std::string key = compile_share_key(job);
    std::size_t& before = seen[key];
    ranked.emplace_back(before + running.count(key), std::move(job));
    ++before;
  }
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  queued.clear();
  for (auto& [rank, job] : ranked) queued.push_back(std::move(job));
}

}  // namespace wf::build
