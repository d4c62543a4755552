// The [build.executor] and [build.images] tables of the configuration file (build_config.cpp
// reads the rest of [build]): where a build's commands run, and the container image of each CUDA
// version. Like every table, a list of rows (name, reader).

#include <algorithm>
#include <array>

#include "config_readers.hpp"
#include "config_tables.hpp"
#include "wheelforge/app/app.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::app::detail {
namespace {

/// Which executors a key of [build.executor] applies to.
enum class Applies { any, slurm, containers };

using ExecutorReader = void (*)(const toml::node&, const std::string& key, build::ExecutorConfig&,
                                ProblemList&);
struct ExecutorKey {
  std::string_view name;
  Applies applies;
  ExecutorReader read;
};

/// A string that must be one of `choices`.
std::optional<std::string> read_choice(const toml::node& node, const std::string& key,
                                       const std::vector<std::string_view>& choices,
                                       ProblemList& problems) {
  auto v = read_string(node, key, problems);
  if (!v) return std::nullopt;
  if (std::find(choices.begin(), choices.end(), *v) != choices.end()) return v;
  std::string listed;
  for (const auto c : choices) listed += (listed.empty() ? "\"" : ", \"") + std::string(c) + "\"";
  problems.push_back(key + ": expected one of " + listed + ", got '" + clean(*v) + "'");
  return std::nullopt;
}

/// A non-empty string without whitespace (a partition, an account, a gres).
std::optional<std::string> read_word(const toml::node& node, const std::string& key,
                                     ProblemList& problems) {
  auto v = read_string(node, key, problems);
  if (!v) return std::nullopt;
  if (v->empty() || v->find_first_of(" \t\n\r") != std::string::npos) {
    problems.push_back(key + ": expected a name without spaces, got '" + clean(*v) + "'");
    return std::nullopt;
  }
  return v;
}

template <std::string build::SlurmConfig::*Field>
void slurm_word(const toml::node& node, const std::string& key, build::ExecutorConfig& e,
                ProblemList& problems) {
  if (auto v = read_word(node, key, problems)) e.slurm.*Field = std::move(*v);
}

template <std::vector<std::string> build::ContainerConfig::*Field>
void container_args(const toml::node& node, const std::string& key, build::ExecutorConfig& e,
                    ProblemList& problems) {
  if (auto v =
          read_strings(node, key, "a list of arguments like [\"--opt\", \"value\"]", problems)) {
    e.container.*Field = std::move(*v);
  }
}

const std::array kExecutorKeys{
    ExecutorKey{
        "kind", Applies::any,
        [](const toml::node& node, const std::string& key, build::ExecutorConfig& e,
           ProblemList& problems) {
          const auto v = read_choice(node, key, {"local", "podman", "docker", "slurm"}, problems);
          if (!v) return;
          if (*v == "podman") {
            e.kind = build::ExecutorConfig::Kind::podman;
            e.container.engine = build::ContainerConfig::Engine::podman;
          } else if (*v == "docker") {
            e.kind = build::ExecutorConfig::Kind::docker;
            e.container.engine = build::ContainerConfig::Engine::docker;
          } else if (*v == "slurm") {
            e.kind = build::ExecutorConfig::Kind::slurm;
          } else {
            e.kind = build::ExecutorConfig::Kind::local;
          }
        }},
    ExecutorKey{"partition", Applies::slurm, slurm_word<&build::SlurmConfig::partition>},
    ExecutorKey{"account", Applies::slurm, slurm_word<&build::SlurmConfig::account>},
    ExecutorKey{"smoke_partition", Applies::slurm,
                slurm_word<&build::SlurmConfig::smoke_partition>},
    ExecutorKey{"gres", Applies::slurm, slurm_word<&build::SlurmConfig::gres>},
    ExecutorKey{"sbatch_args", Applies::slurm,
                [](const toml::node& node, const std::string& key, build::ExecutorConfig& e,
                   ProblemList& problems) {
                  if (auto v = read_strings(node, key,
                                            "a list of sbatch options like "
                                            "[\"--qos=normal\"]",
                                            problems)) {
                    e.slurm.sbatch_args = std::move(*v);
                  }
                }},
    ExecutorKey{"cpus", Applies::slurm,
                [](const toml::node& node, const std::string& key, build::ExecutorConfig& e,
                   ProblemList& problems) {
                  if (const auto n = read_count(node, key, 1, 4096, problems)) {
                    e.slurm.default_cpus = static_cast<unsigned>(*n);
                  }
                }},
    ExecutorKey{"idle_timeout", Applies::slurm,
                [](const toml::node& node, const std::string& key, build::ExecutorConfig& e,
                   ProblemList& problems) {
                  std::optional<std::chrono::seconds> d;
                  if (const auto i = node.value_exact<std::int64_t>(); i && *i > 0) {
                    d = std::chrono::seconds(*i);
                  } else if (const auto t = node.value_exact<std::string>()) {
                    d = parse_duration(*t);
                  }
                  if (!d || d->count() < 10) {
                    problems.push_back(key + ": expected a duration of at least 10s, got " +
                                       spelled(node));
                    return;
                  }
                  e.slurm.idle_timeout = *d;
                }},
    ExecutorKey{"container", Applies::slurm,
                [](const toml::node& node, const std::string& key, build::ExecutorConfig& e,
                   ProblemList& problems) {
                  const auto v = read_choice(node, key, {"podman", "docker"}, problems);
                  if (!v) return;
                  e.slurm.in_containers = true;
                  e.container.engine = *v == "docker" ? build::ContainerConfig::Engine::docker
                                                      : build::ContainerConfig::Engine::podman;
                }},
    ExecutorKey{"program", Applies::containers,
                [](const toml::node& node, const std::string& key, build::ExecutorConfig& e,
                   ProblemList& problems) {
                  if (auto v = read_word(node, key, problems)) e.container.program = std::move(*v);
                }},
    ExecutorKey{"engine_args", Applies::containers,
                container_args<&build::ContainerConfig::engine_args>},
    ExecutorKey{"run_args", Applies::containers, container_args<&build::ContainerConfig::run_args>},
    ExecutorKey{"gpus", Applies::containers,
                [](const toml::node& node, const std::string& key, build::ExecutorConfig& e,
                   ProblemList& problems) {
                  const auto v = read_choice(node, key, {"cdi", "all", "none"}, problems);
                  if (!v) return;
                  e.container.gpus = *v == "cdi"   ? build::ContainerConfig::Gpus::cdi
                                     : *v == "all" ? build::ContainerConfig::Gpus::all
                                                   : build::ContainerConfig::Gpus::none;
                }},
    ExecutorKey{"network", Applies::containers,
                [](const toml::node& node, const std::string& key, build::ExecutorConfig& e,
                   ProblemList& problems) {
                  if (auto v = read_word(node, key, problems)) e.container.network = std::move(*v);
                }},
    ExecutorKey{"mounts", Applies::containers,
                [](const toml::node& node, const std::string& key, build::ExecutorConfig& e,
                   ProblemList& problems) {
                  auto v =
                      read_strings(node, key, "a list like [\"/usr/local/cuda-12.8\"]", problems);
                  if (!v) return;
                  bool ok = true;
                  for (const auto& mount : *v) {
                    const std::size_t colon = mount.find(':');
                    const std::string host = mount.substr(0, colon);
                    const std::string inside =
                        colon == std::string::npos ? host : mount.substr(colon + 1);
                    if (host.empty() || host.front() != '/' || inside.empty() ||
                        inside.front() != '/' || inside.find(':') != std::string::npos ||
                        mount.find_first_of(",\n") != std::string::npos) {
                      problems.push_back(key + ": '" + clean(mount) +
                                         "' is not an absolute path or HOST:CONTAINER pair of "
                                         "absolute paths");
                      ok = false;
                    }
                  }
                  if (ok) e.container.mounts = std::move(*v);
                }},
    ExecutorKey{"user", Applies::containers,
                [](const toml::node& node, const std::string& key, build::ExecutorConfig& e,
                   ProblemList& problems) {
                  if (const auto v = read_choice(node, key, {"server", "image"}, problems)) {
                    e.container.as_server_user = *v == "server";
                  }
                }},
};

}  // namespace

void read_executor(const toml::node& node, const std::string& key, build::HostConfig& host,
                   ProblemList& problems) {
  const auto* table = node.as_table();
  if (table == nullptr) {
    problems.push_back(key +
                       ": expected a table [build.executor] with kind = \"local\", "
                       "\"podman\", \"docker\" or \"slurm\", got " +
                       spelled(node));
    return;
  }
  build::ExecutorConfig e;
  std::vector<std::pair<std::string, Applies>> given;
  // kind first: the other keys are judged by it.
  if (const auto* kind = table->get("kind"))
    kExecutorKeys[0].read(*kind, key + ".kind", e, problems);
  for (const auto& [k, value] : *table) {
    const std::string name(k.str());
    const auto row = std::find_if(kExecutorKeys.begin(), kExecutorKeys.end(),
                                  [&](const ExecutorKey& r) { return r.name == name; });
    if (row == kExecutorKeys.end()) {
      problems.push_back(unknown_key(name, "[" + key + "]", row_names(kExecutorKeys)));
      continue;
    }
    if (row->name == "kind") continue;
    row->read(value, key + "." + clean(name), e, problems);
    given.emplace_back(name, row->applies);
  }
  const char* kind = build::kind_name(e.kind);
  for (const auto& [name, applies] : given) {
    if (applies == Applies::slurm && e.kind != build::ExecutorConfig::Kind::slurm) {
      problems.push_back(key + "." + name + ": only for kind = \"slurm\" (kind is \"" + kind +
                         "\")");
    } else if (applies == Applies::containers && e.containers() == nullptr) {
      problems.push_back(key + "." + name +
                         ": only when commands run in containers (kind = \"podman\" or "
                         "\"docker\", or kind = \"slurm\" with container = \"podman\" or "
                         "\"docker\")");
    }
  }
  // [build.images] may have been read already.
  e.container.images = std::move(host.executor.container.images);
  host.executor = std::move(e);
}

void read_images(const toml::node& node, const std::string& key, build::HostConfig& host,
                 ProblemList& problems) {
  const auto* table = node.as_table();
  if (table == nullptr) {
    problems.push_back(key + ": expected a table of CUDA version = image, e.g. [" + key +
                       "] \"12.8\" = \"pytorch/manylinux2_28-builder:cuda12.8\", got " +
                       spelled(node));
    return;
  }
  for (const auto& [k, value] : *table) {
    const std::string name(k.str());
    const std::string where = key + "." + clean(name);
    if (value.is_table()) {
      problems.push_back(where + ": expected an image; quote the version: \"" + clean(name) +
                         ".X\" = \"...\"");
      continue;
    }
    // "12.8", or "12.8/3.12" for one Python.
    const std::size_t slash = name.find('/');
    const std::string cuda_text = name.substr(0, slash);
    const auto cuda = core::parse_cuda_version(cuda_text);
    const bool python_ok =
        slash == std::string::npos || core::is_valid_python_version(name.substr(slash + 1));
    if (!cuda || cuda->str() != cuda_text || !python_ok) {
      problems.push_back(where + ": '" + clean(name) +
                         "' is not a CUDA version like \"12.8\", or \"12.8/3.12\" for one Python");
      continue;
    }
    auto image = read_string(value, where, problems);
    if (!image) continue;
    if (trim(*image).empty() || image->find_first_of(" \t\n") != std::string::npos) {
      problems.push_back(where + ": expected an image name, got '" + clean(*image) + "'");
      continue;
    }
    host.executor.container.images[name] = std::move(*image);
  }
}

std::vector<std::string> executor_keys() {
  std::vector<std::string> keys;
  keys.reserve(kExecutorKeys.size());
  for (const auto& e : kExecutorKeys) keys.emplace_back(e.name);
  return keys;
}

}  // namespace wf::app::detail
