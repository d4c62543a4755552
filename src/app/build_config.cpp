// The build runner's part of the configuration file: the [build] host table here, the
// [recipes.NAME] tables in recipe_config.cpp. Each table's keys are a list of rows (name,
// reader), so that the keys the loader accepts, the hints for unknown ones and
// configuration_keys() (which the documentation is checked against) never drift apart.

#include <unistd.h>

#include <algorithm>
#include <array>
#include <filesystem>

#include "config_readers.hpp"
#include "config_tables.hpp"
#include "wheelforge/app/app.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::app::detail {
namespace {

namespace fs = std::filesystem;

// ---------------------------------------------------------------------------------------------
// [build]

// A size key's value: a non-negative integer of bytes, or a string such as "2G" or "512M".
std::optional<std::uint64_t> size_of(const toml::node& node) {
  if (const auto i = node.value_exact<std::int64_t>(); i && *i >= 0) {
    return static_cast<std::uint64_t>(*i);
  }
  if (const auto s = node.value_exact<std::string>()) return parse_size(*s);
  return std::nullopt;
}

/// [build.python] or [build.cuda]: VERSION = "/absolute/path" entries.
void read_version_paths(const toml::node& node, const std::string& key, bool python,
                        std::map<std::string, fs::path>& out, ProblemList& problems) {
  const auto* table = node.as_table();
  if (table == nullptr) {
    problems.push_back(
        key + ": expected a table of version = path, e.g. [" + key + "] \"" +
        (python ? "3.12\" = \"/usr/bin/python3.12\"" : "12.8\" = \"/usr/local/cuda-12.8\"") +
        ", got " + spelled(node));
    return;
  }
  for (const auto& [version_key, value] : *table) {
    const std::string version(version_key.str());
    const std::string where = key + "." + clean(version);
    if (value.is_table()) {
      // `3.12 = "..."` without quotes is the dotted key 3 -> 12 in TOML.
      problems.push_back(where + ": expected a path; quote the version: \"" + clean(version) +
                         ".X\" = \"...\"");
      continue;
    }
    bool valid = true;
    if (python && !core::is_valid_python_version(version)) {
      problems.push_back(where + ": '" + clean(version) + "' is not a Python version like 3.12");
      valid = false;
    } else if (!python) {
      const auto cuda = core::parse_cuda_version(version);
      if (!cuda || cuda->str() != version) {
        problems.push_back(where + ": '" + clean(version) + "' is not a CUDA version like 12.8");
        valid = false;
      }
    }
    auto path = read_absolute_path(value, where, problems);
    if (valid && path) out[version] = std::move(*path);
  }
}

using BuildReader = void (*)(const toml::node&, const std::string& key, build::HostConfig&,
                             ProblemList&);
struct BuildKey {
  std::string_view name;
  BuildReader read;
};

const std::array kBuildKeys{
    BuildKey{
        "torch_index",
        [](const toml::node& node, const std::string& key, build::HostConfig& host,
           ProblemList& problems) {
          auto v = read_string(node, key, problems);
          if (!v) return;
          if (trim(*v).empty()) {
            problems.push_back(key + ": must not be empty");
            return;
          }
          bool ok = true;
          for (std::size_t open = v->find('{'); open != std::string::npos;
               open = v->find('{', open + 1)) {
            const std::size_t close = v->find('}', open);
            const std::string placeholder =
                close == std::string::npos ? v->substr(open) : v->substr(open, close - open + 1);
            if (placeholder != "{server}" && placeholder != "{cuda}" && placeholder != "{torch}") {
              problems.push_back(key + ": unknown placeholder '" + clean(placeholder) +
                                 "' (known: {server}, {cuda}, {torch})");
              ok = false;
            }
          }
          if (ok) host.torch_index = std::move(*v);
        }},
    BuildKey{"memory_reserve",
             [](const toml::node& node, const std::string& key, build::HostConfig& host,
                ProblemList& problems) {
               const std::optional<std::uint64_t> bytes = size_of(node);
               if (!bytes) {
                 problems.push_back(key + ": expected a size such as 2G or 512M, got " +
                                    spelled(node));
                 return;
               }
               host.memory_reserve_bytes = *bytes;
             }},
    BuildKey{"pip_cache",
             [](const toml::node& node, const std::string& key, build::HostConfig& host,
                ProblemList& problems) {
               const std::optional<std::uint64_t> bytes = size_of(node);
               if (!bytes) {
                 problems.push_back(key +
                                    ": expected a size such as 20G or 512M (0: no cache), got " +
                                    spelled(node));
                 return;
               }
               host.pip_cache_bytes = *bytes;
             }},
    BuildKey{"compile_cache",
             [](const toml::node& node, const std::string& key, build::HostConfig& host,
                ProblemList& problems) {
               auto v = read_string(node, key, problems);
               if (!v) return;
               if (*v == "off") {
                 host.compile_cache = build::HostConfig::CompileCache::off;
                 return;
               }
               if (v->empty() || v->front() != '/') {
                 problems.push_back(key + ": expected an absolute directory or \"off\", got '" +
                                    clean(*v) + "'");
                 return;
               }
               host.compile_cache = build::HostConfig::CompileCache::on;
               host.compile_cache_root = *v;
             }},
    BuildKey{"compile_cache_size",
             [](const toml::node& node, const std::string& key, build::HostConfig& host,
                ProblemList& problems) {
               const std::optional<std::uint64_t> bytes = size_of(node);
               if (!bytes || *bytes == 0) {
                 problems.push_back(key + ": expected a size such as 10G or 512M, got " +
                                    spelled(node));
                 return;
               }
               host.compile_cache_bytes = *bytes;
             }},
    BuildKey{"max_concurrent_jobs",
             [](const toml::node& node, const std::string& key, build::HostConfig& host,
                ProblemList& problems) {
               if (const auto n = read_count(node, key, 0, 256, problems)) {
                 host.max_concurrent_jobs = static_cast<unsigned>(*n);
               }
             }},
    BuildKey{"oom_retries",
             [](const toml::node& node, const std::string& key, build::HostConfig& host,
                ProblemList& problems) {
               if (const auto n = read_count(node, key, 0, 10, problems)) {
                 host.oom_retries = static_cast<int>(*n);
               }
             }},
    BuildKey{"keep_failed_work_dirs",
             [](const toml::node& node, const std::string& key, build::HostConfig& host,
                ProblemList& problems) {
               if (const auto b = read_bool(node, key, problems)) host.keep_failed_work_dirs = *b;
             }},
    BuildKey{"lease",
             [](const toml::node& node, const std::string& key, build::HostConfig& host,
                ProblemList& problems) {
               std::optional<std::chrono::seconds> d;
               if (const auto i = node.value_exact<std::int64_t>(); i && *i > 0 && *i <= 86400) {
                 d = std::chrono::seconds(*i);
               } else if (const auto t = node.value_exact<std::string>()) {
                 d = parse_duration(*t);
               }
               if (!d || d->count() < 1 || d->count() > 86400) {
                 problems.push_back(key +
                                    ": expected a duration from 1s to 24h such as \"60s\", got " +
                                    spelled(node));
                 return;
               }
               host.lease = *d;
             }},
    BuildKey{"run_jobs",
             [](const toml::node& node, const std::string& key, build::HostConfig& host,
                ProblemList& problems) {
               if (const auto b = read_bool(node, key, problems)) {
                 host.run_jobs =
                     *b ? build::HostConfig::RunJobs::yes : build::HostConfig::RunJobs::no;
               }
             }},
    BuildKey{"system_torch",
             [](const toml::node& node, const std::string& key, build::HostConfig& host,
                ProblemList& problems) {
               if (const auto b = read_bool(node, key, problems)) host.system_torch = *b;
             }},
    BuildKey{
        "python",
        [](const toml::node& node, const std::string& key, build::HostConfig& host,
           ProblemList& problems) { read_version_paths(node, key, true, host.pythons, problems); }},
    BuildKey{"cuda",
             [](const toml::node& node, const std::string& key, build::HostConfig& host,
                ProblemList& problems) {
               read_version_paths(node, key, false, host.cuda_homes, problems);
             }},
    BuildKey{"executor", read_executor},
    BuildKey{"images", read_images},
};

}  // namespace

void read_build_tables(const toml::table& root, build::RunnerConfig& config,
                       ProblemList& problems) {
  if (const auto* node = root.get("build")) {
    if (const auto* table = node->as_table()) {
      for (const auto& [k, value] : *table) {
        const std::string name(k.str());
        const auto row = std::find_if(kBuildKeys.begin(), kBuildKeys.end(),
                                      [&](const BuildKey& r) { return r.name == name; });
        if (row == kBuildKeys.end()) {
          problems.push_back(unknown_key(name, "[build]", row_names(kBuildKeys)));
        } else {
          row->read(value, "build." + name, config.host, problems);
        }
      }
    } else {
      problems.push_back("build: expected a table [build], got " + spelled(*node));
    }
  }
  if (!config.host.executor.container.images.empty() &&
      config.host.executor.containers() == nullptr) {
    problems.push_back(
        "build.images: only when commands run in containers ([build.executor] kind = "
        "\"podman\" or \"docker\", or kind = \"slurm\" with container)");
  }
  if (const auto* node = root.get("recipes")) {
    if (const auto* table = node->as_table()) {
      for (const auto& [name, recipe] : *table) {
        read_recipe(std::string(name.str()), recipe, config.host, config, problems);
      }
    } else {
      problems.push_back("recipes: expected tables [recipes.NAME], got " + spelled(*node));
    }
  }
}

std::vector<std::string> check_build_host(const build::HostConfig& host) {
  std::vector<std::string> problems;
  // Paths inside the images, or on the cluster's nodes: not on this host.
  if (host.executor.remote_toolchain()) return problems;
  const auto executable = [](const fs::path& p) {
    std::error_code ec;
    return fs::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
  };
  for (const auto& [version, path] : host.pythons) {
    std::error_code ec;
    const std::string key = "build.python." + version + ": " + clean(path.string());
    if (!fs::exists(path, ec)) {
      problems.push_back(key + " does not exist");
    } else if (!executable(path)) {
      problems.push_back(key + " is not an executable file");
    }
  }
  for (const auto& [version, home] : host.cuda_homes) {
    std::error_code ec;
    const std::string key = "build.cuda." + version + ": " + clean(home.string());
    if (!fs::exists(home, ec)) {
      problems.push_back(key + " does not exist");
    } else if (!fs::is_directory(home, ec)) {
      problems.push_back(key + " is not a directory");
    } else if (!executable(home / "bin" / "nvcc")) {
      problems.push_back(key + " has no executable bin/nvcc");
    }
  }
  return problems;
}

std::vector<std::string> build_keys() {
  std::vector<std::string> keys;
  for (const auto& row : kBuildKeys) {
    keys.push_back("build." + std::string(row.name));
    if (row.name == "python" || row.name == "cuda" || row.name == "images") {
      keys.push_back(keys.back() + ".*");
    }
    if (row.name == "executor") {
      for (auto& e : executor_keys()) keys.push_back("build.executor." + e);
    }
  }
  for (auto& key : recipe_keys()) keys.push_back(std::move(key));
  return keys;
}

}  // namespace wf::app::detail

namespace wf::app {

std::string build_summary(const build::RunnerConfig& build) {
  const auto join = [](const auto& values, const auto& show) {
    std::string out;
    for (const auto& v : values) out += (out.empty() ? "" : ", ") + show(v);
    return out;
  };
  const auto same = [](const std::string& v) { return v; };
  const auto str = [](const auto& v) { return v.str(); };
  const auto entry = [](const auto& kv) {
    return kv.first + " = " + sanitize_for_log(kv.second.string());
  };
  std::string out;
  if (build.recipes.empty()) return "# build runner: off (no [recipes])\n";
  out += "# build runner: " + std::to_string(build.recipes.size()) + " recipe(s)\n";
  for (const auto& [name, rc] : build.recipes) {
    out += "#   " + sanitize_for_log(name) + ": " + rc.recipe.project + ", " +
           std::to_string(core::expand_matrix(rc.matrix).size()) + " cell(s) of python " +
           join(rc.matrix.python, same) + " x torch " + join(rc.matrix.torch, str) + " x cuda " +
           join(rc.matrix.cuda, str) + "\n";
  }
  const build::ExecutorConfig& e = build.host.executor;
  const bool remote = e.remote_toolchain();
  out += "#   executor: " + std::string(build::kind_name(e.kind));
  if (e.kind == build::ExecutorConfig::Kind::slurm) {
    out += " (partition " +
           (e.slurm.partition.empty() ? std::string("default") : e.slurm.partition) +
           ", smoke tests on " +
           (e.slurm.smoke_partition.empty() ? std::string("the same") : e.slurm.smoke_partition) +
           (e.slurm.gres.empty() ? std::string() : " with --gres=" + e.slurm.gres) +
           (e.slurm.in_containers
                ? std::string(e.container.engine == build::ContainerConfig::Engine::docker
                                  ? ", in docker containers"
                                  : ", in podman containers")
                : std::string()) +
           ")";
  }
  out += "\n";
  if (const auto* c = e.containers()) {
    const auto image = [](const auto& kv) {
      return kv.first + " = " + sanitize_for_log(kv.second);
    };
    out += "#   images: " + join(c->images, image) + "\n";
  }
  out += std::string("#   interpreters") + (remote ? " (inside the images / on the nodes)" : "") +
         ": " + join(build.host.pythons, entry) + "\n";
  out += std::string("#   CUDA toolkits") + (remote ? " (inside the images / on the nodes)" : "") +
         ": " + join(build.host.cuda_homes, entry) + "\n";
  return out;
}

}  // namespace wf::app
