// The build runner's part of the configuration file: the [build] host table and the
// [recipes.NAME] tables with their source and [recipes.NAME.matrix]. Each table's keys are a
// list of rows (name, reader), so that the keys the loader accepts, the hints for unknown ones
// and configuration_keys() (which the documentation is checked against) never drift apart.

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <set>
#include <sstream>

#include "config_tables.hpp"
#include "wheelforge/app/app.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::app::detail {
namespace {

namespace fs = std::filesystem;
using ProblemList = std::vector<std::string>;

/// A value as the file spells it, for messages: 'text', 12, 1.5, true, a table, a list.
std::string spelled(const toml::node& node) {
  if (const auto s = node.value_exact<std::string>()) return "'" + sanitize_for_log(*s) + "'";
  if (const auto i = node.value_exact<std::int64_t>()) return std::to_string(*i);
  if (const auto d = node.value_exact<double>()) {
    std::ostringstream out;
    out << *d;
    return out.str();
  }
  if (const auto b = node.value_exact<bool>()) return *b ? "true" : "false";
  if (node.is_table()) return "a table";
  if (node.is_array()) return "a list";
  return "a date or time";
}

std::string clean(std::string_view text) {
  return sanitize_for_log(text);
}

/// The names of a table's key rows, for hints.
template <typename Rows>
std::vector<std::string_view> row_names(const Rows& rows) {
  std::vector<std::string_view> out;
  out.reserve(rows.size());
  for (const auto& row : rows) out.push_back(row.name);
  return out;
}

/// Splits a core validation error ("a; b; c", see wf::Problems::to_error) into one problem each.
void add_split(ProblemList& problems, const std::string& key, const std::string& message) {
  std::size_t start = 0;
  while (start <= message.size()) {
    const std::size_t end = std::min(message.find("; ", start), message.size());
    if (end > start) problems.push_back(key + ": " + message.substr(start, end - start));
    start = end + 2;
  }
}

std::optional<std::string> read_string(const toml::node& node, const std::string& key,
                                       ProblemList& problems) {
  if (auto v = node.value_exact<std::string>()) return std::move(*v);
  problems.push_back(key + ": expected a string, got " + spelled(node));
  return std::nullopt;
}

std::optional<bool> read_bool(const toml::node& node, const std::string& key,
                              ProblemList& problems) {
  if (const auto v = node.value_exact<bool>()) return *v;
  problems.push_back(key + ": expected true or false, got " + spelled(node));
  return std::nullopt;
}

std::optional<std::int64_t> read_count(const toml::node& node, const std::string& key,
                                       std::int64_t min, std::int64_t max, ProblemList& problems) {
  if (const auto v = node.value_exact<std::int64_t>(); v && *v >= min && *v <= max) return *v;
  problems.push_back(key + ": expected a whole number from " + std::to_string(min) + " to " +
                     std::to_string(max) + ", got " + spelled(node));
  return std::nullopt;
}

/// A list of strings; `what` names the expected form in the message.
std::optional<std::vector<std::string>> read_strings(const toml::node& node, const std::string& key,
                                                     std::string_view what, ProblemList& problems) {
  const auto* array = node.as_array();
  if (array == nullptr) {
    problems.push_back(key + ": expected " + std::string(what) + ", got " + spelled(node));
    return std::nullopt;
  }
  std::vector<std::string> out;
  for (const auto& item : *array) {
    auto v = item.value_exact<std::string>();
    if (!v) {
      problems.push_back(key + ": expected " + std::string(what) + ", got a list with " +
                         spelled(item));
      return std::nullopt;
    }
    out.push_back(std::move(*v));
  }
  return out;
}

/// An absolute path, as given.
std::optional<fs::path> read_absolute_path(const toml::node& node, const std::string& key,
                                           ProblemList& problems) {
  auto text = node.value_exact<std::string>();
  if (!text) {
    problems.push_back(key + ": expected a path, got " + spelled(node));
    return std::nullopt;
  }
  if (text->empty() || text->front() != '/') {
    problems.push_back(key + ": expected an absolute path, got '" + clean(*text) + "'");
    return std::nullopt;
  }
  return fs::path(*text);
}

// ---------------------------------------------------------------------------------------------
// [build]

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

// ---------------------------------------------------------------------------------------------
// [build.executor] and [build.images]

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
               std::optional<std::uint64_t> bytes;
               if (const auto i = node.value_exact<std::int64_t>(); i && *i >= 0) {
                 bytes = static_cast<std::uint64_t>(*i);
               } else if (const auto s = node.value_exact<std::string>()) {
                 bytes = parse_size(*s);
               }
               if (!bytes) {
                 problems.push_back(key + ": expected a size such as 2G or 512M, got " +
                                    spelled(node));
                 return;
               }
               host.memory_reserve_bytes = *bytes;
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

// ---------------------------------------------------------------------------------------------
// [recipes.NAME]

constexpr std::array<std::string_view, 4> kSourceKeys{"path", "git", "ref", "sdist"};
constexpr std::array<std::string_view, 4> kMatrixKeys{"python", "torch", "cuda", "exclude"};
constexpr std::array<std::string_view, 3> kExcludeKeys{"python", "torch", "cuda"};

template <std::size_t N>
std::vector<std::string_view> names(const std::array<std::string_view, N>& keys) {
  return {keys.begin(), keys.end()};
}

constexpr std::string_view kSourceForms =
    "{ path = \"DIR\" }, { git = \"URL\", ref = \"REF\" } or { sdist = true }";

void read_source(const toml::node& node, const std::string& key, core::SourceSpec& out,
                 ProblemList& problems) {
  const auto* table = node.as_table();
  if (table == nullptr) {
    problems.push_back(key + ": expected " + std::string(kSourceForms) + ", got " + spelled(node));
    return;
  }
  std::optional<std::string> path;
  std::optional<std::string> git;
  std::optional<std::string> ref;
  std::optional<bool> sdist;
  const std::size_t before = problems.size();
  for (const auto& [k, value] : *table) {
    const std::string name(k.str());
    const std::string where = key + "." + clean(name);
    if (name == "path") {
      if (auto p = read_absolute_path(value, where, problems)) path = p->string();
    } else if (name == "git") {
      git = read_string(value, where, problems);
    } else if (name == "ref") {
      ref = read_string(value, where, problems);
    } else if (name == "sdist") {
      sdist = read_bool(value, where, problems);
      if (sdist == false) {
        problems.push_back(where + ": only true is meaningful (it is the default source)");
      }
    } else {
      problems.push_back(unknown_key(name, "[" + key + "]", names(kSourceKeys)));
    }
  }
  const int kinds = (path ? 1 : 0) + (git ? 1 : 0) + (sdist.value_or(false) ? 1 : 0);
  if (kinds > 1) {
    problems.push_back(key + ": give one of path, git or sdist, not several");
  } else if (kinds == 0 && problems.size() == before) {
    problems.push_back(key + ": expected " + std::string(kSourceForms));
  }
  if (ref && !git) problems.push_back(key + ".ref: only a git source takes a ref");
  if (problems.size() != before) return;
  if (path) {
    out = {core::SourceSpec::Kind::path, *path, ""};
  } else if (git) {
    out = {core::SourceSpec::Kind::git, *git, ref.value_or("")};
  } else {
    out = {core::SourceSpec::Kind::index_sdist, "", ""};
  }
}

/// The matrix's torch or cuda axis: strings, each parsed by `parse`.
template <typename T, typename Parse>
void read_versions(const toml::node& node, const std::string& key, std::string_view example,
                   Parse parse, std::vector<T>& out, ProblemList& problems) {
  const auto values = read_strings(
      node, key, "a list of quoted versions like [\"" + std::string(example) + "\"]", problems);
  if (!values) return;
  for (const auto& v : *values) {
    if (auto parsed = parse(v)) {
      out.push_back(*parsed);
    } else {
      problems.push_back(key + ": '" + clean(v) + "' is not a version like " +
                         std::string(example));
    }
  }
}

void read_exclusions(const toml::node& node, const std::string& key, core::Matrix& m,
                     ProblemList& problems) {
  const auto* array = node.as_array();
  if (array == nullptr) {
    problems.push_back(key + ": expected a list of tables like [{ torch = \"2.8\", cuda = " +
                       "\"13.0\" }], got " + spelled(node));
    return;
  }
  for (std::size_t i = 0; i < array->size(); ++i) {
    const std::string where = key + "[" + std::to_string(i) + "]";
    const auto* e = (*array)[i].as_table();
    if (e == nullptr) {
      problems.push_back(where +
                         ": expected a table like { torch = \"2.8\", cuda = \"13.0\" }, "
                         "got " +
                         spelled((*array)[i]));
      continue;
    }
    core::MatrixExclusion x;
    bool ok = true;
    for (const auto& [k, value] : *e) {
      const std::string name(k.str());
      const std::string at = where + "." + clean(name);
      if (name != "python" && name != "torch" && name != "cuda") {
        problems.push_back(unknown_key(name, where, names(kExcludeKeys)));
        ok = false;
        continue;
      }
      auto text = read_string(value, at, problems);
      if (!text) {
        ok = false;
      } else if (name == "python") {
        x.python = *text;
      } else if (name == "torch") {
        x.torch = core::parse_torch_series(*text);
        if (!x.torch) {
          problems.push_back(at + ": '" + clean(*text) + "' is not a torch series like 2.8");
          ok = false;
        }
      } else {
        x.cuda = core::parse_cuda_version(*text);
        if (!x.cuda) {
          problems.push_back(at + ": '" + clean(*text) + "' is not a CUDA version like 12.8");
          ok = false;
        }
      }
    }
    if (ok) m.exclude.push_back(x);
  }
}

void read_matrix(const toml::node& node, const std::string& key, core::Matrix& m,
                 ProblemList& problems) {
  const auto* table = node.as_table();
  if (table == nullptr) {
    problems.push_back(key + ": expected a table with python, torch and cuda lists, got " +
                       spelled(node));
    return;
  }
  for (const auto& [k, value] : *table) {
    const std::string name(k.str());
    const std::string where = key + "." + clean(name);
    if (name == "python") {
      if (auto v =
              read_strings(value, where, "a list of quoted versions like [\"3.12\"]", problems)) {
        m.python = std::move(*v);
      }
    } else if (name == "torch") {
      read_versions(value, where, "2.8", core::parse_torch_series, m.torch, problems);
    } else if (name == "cuda") {
      read_versions(value, where, "12.8", core::parse_cuda_version, m.cuda, problems);
    } else if (name == "exclude") {
      read_exclusions(value, where, m, problems);
    } else {
      problems.push_back(unknown_key(name, "[" + key + "]", names(kMatrixKeys)));
    }
  }
}

using RecipeReader = void (*)(const toml::node&, const std::string& key, build::RecipeConfig&,
                              ProblemList&);
struct RecipeKey {
  std::string_view name;
  RecipeReader read;
};

/// A string-valued recipe field.
template <std::string core::Recipe::*Field>
void string_field(const toml::node& node, const std::string& key, build::RecipeConfig& rc,
                  ProblemList& problems) {
  if (auto v = read_string(node, key, problems)) rc.recipe.*Field = std::move(*v);
}

const std::array kRecipeKeys{
    RecipeKey{"project", string_field<&core::Recipe::project>},
    RecipeKey{"source",
              [](const toml::node& node, const std::string& key, build::RecipeConfig& rc,
                 ProblemList& problems) { read_source(node, key, rc.recipe.source, problems); }},
    RecipeKey{"command", string_field<&core::Recipe::build_command>},
    RecipeKey{"build_requires",
              [](const toml::node& node, const std::string& key, build::RecipeConfig& rc,
                 ProblemList& problems) {
                if (auto v = read_strings(node, key, "a list of requirements like [\"ninja\"]",
                                          problems)) {
                  rc.recipe.build_requires = std::move(*v);
                }
              }},
    RecipeKey{"env",
              [](const toml::node& node, const std::string& key, build::RecipeConfig& rc,
                 ProblemList& problems) {
                const auto* table = node.as_table();
                if (table == nullptr) {
                  problems.push_back(key + ": expected a table like { NAME = \"value\" }, got " +
                                     spelled(node));
                  return;
                }
                for (const auto& [name, value] : *table) {
                  const std::string n(name.str());
                  if (auto v = read_string(value, key + "." + clean(n), problems)) {
                    rc.recipe.env.emplace_back(n, std::move(*v));
                  }
                }
              }},
    RecipeKey{"arch_variable", string_field<&core::Recipe::arch_variable>},
    RecipeKey{"arch_value", string_field<&core::Recipe::arch_value>},
    RecipeKey{"local_version_variable", string_field<&core::Recipe::local_version_variable>},
    RecipeKey{"import_check", string_field<&core::Recipe::import_check>},
    RecipeKey{"yank_superseded",
              [](const toml::node& node, const std::string& key, build::RecipeConfig& rc,
                 ProblemList& problems) {
                if (const auto b = read_bool(node, key, problems)) rc.recipe.yank_superseded = *b;
              }},
    RecipeKey{"gb_per_job",
              [](const toml::node& node, const std::string& key, build::RecipeConfig& rc,
                 ProblemList& problems) {
                std::optional<double> v;
                if (const auto d = node.value_exact<double>()) v = *d;
                if (const auto i = node.value_exact<std::int64_t>()) v = static_cast<double>(*i);
                if (!v || !std::isfinite(*v) || *v <= 0) {
                  problems.push_back(key + ": expected a number of GiB above 0, got " +
                                     spelled(node));
                  return;
                }
                rc.recipe.gb_per_job = *v;
              }},
    RecipeKey{"timeout",
              [](const toml::node& node, const std::string& key, build::RecipeConfig& rc,
                 ProblemList& problems) {
                std::optional<std::chrono::seconds> d;
                if (const auto i = node.value_exact<std::int64_t>(); i && *i > 0) {
                  d = std::chrono::seconds(*i);
                } else if (const auto s = node.value_exact<std::string>()) {
                  d = parse_duration(*s);
                }
                if (!d || d->count() <= 0) {
                  problems.push_back(key + ": expected a duration such as 90s, 10m or 2h, got " +
                                     spelled(node));
                  return;
                }
                rc.recipe.timeout = *d;
              }},
    RecipeKey{"cpus",
              [](const toml::node& node, const std::string& key, build::RecipeConfig& rc,
                 ProblemList& problems) {
                if (const auto n = read_count(node, key, 1, 4096, problems)) {
                  rc.recipe.cpus = static_cast<unsigned>(*n);
                }
              }},
    RecipeKey{"matrix", [](const toml::node& node, const std::string& key, build::RecipeConfig& rc,
                           ProblemList& problems) { read_matrix(node, key, rc.matrix, problems); }},
};

std::string listed(const std::map<std::string, fs::path>& entries) {
  std::string out;
  for (const auto& [version, path] : entries) out += (out.empty() ? "" : ", ") + version;
  return out.empty() ? "none" : out;
}

void read_recipe(const std::string& name, const toml::node& node, const build::HostConfig& host,
                 build::RunnerConfig& config, ProblemList& problems) {
  const std::string key = "recipes." + clean(name);
  const auto* table = node.as_table();
  if (table == nullptr) {
    problems.push_back(key + ": expected a table [" + key + "], got " + spelled(node));
    return;
  }
  build::RecipeConfig rc;
  rc.recipe.name = name;
  const std::size_t before = problems.size();
  bool has_matrix = false;
  for (const auto& [k, value] : *table) {
    const std::string field(k.str());
    const auto row = std::find_if(kRecipeKeys.begin(), kRecipeKeys.end(),
                                  [&](const RecipeKey& r) { return r.name == field; });
    if (row == kRecipeKeys.end()) {
      problems.push_back(unknown_key(field, "[" + key + "]", row_names(kRecipeKeys)));
      continue;
    }
    has_matrix = has_matrix || field == "matrix";
    row->read(value, key + "." + clean(field), rc, problems);
  }
  if (auto recipe = core::validate_recipe(rc.recipe); recipe) {
    rc.recipe = std::move(*recipe);
  } else {
    add_split(problems, key, recipe.error().message);
  }
  if (!has_matrix) {
    problems.push_back(key + ".matrix: missing: a recipe is built over [" + key +
                       ".matrix] with python, torch and cuda lists");
  } else if (auto matrix = core::validate_matrix(rc.matrix); !matrix) {
    add_split(problems, key + ".matrix", matrix.error().message);
  }
  // Every version the matrix names needs its interpreter and toolkit on this host.
  for (const auto& python : rc.matrix.python) {
    if (core::is_valid_python_version(python) && !host.pythons.contains(python)) {
      problems.push_back(
          key + ".matrix.python: " + clean(python) +
          " has no interpreter in [build.python] (configured: " + listed(host.pythons) + ")");
    }
  }
  for (const auto& cuda : rc.matrix.cuda) {
    if (!host.cuda_homes.contains(cuda.str())) {
      problems.push_back(key + ".matrix.cuda: " + cuda.str() +
                         " has no toolkit in [build.cuda] (configured: " + listed(host.cuda_homes) +
                         ")");
    }
  }
  // Each cell's image, when the commands run in containers.
  if (const auto* containers = host.executor.containers()) {
    std::set<std::string> missing;
    for (const auto& cuda : rc.matrix.cuda) {
      for (const auto& python : rc.matrix.python) {
        if (build::image_for(*containers, cuda.str(), python) == nullptr) {
          missing.insert(cuda.str());
        }
      }
    }
    for (const auto& cuda : missing) {
      std::string configured;
      for (const auto& [k, v] : containers->images)
        configured += (configured.empty() ? "" : ", ") + k;
      problems.push_back(key + ".matrix.cuda: " + cuda +
                         " has no image in [build.images] (configured: " +
                         (configured.empty() ? std::string("none") : configured) + ")");
    }
  }
  if (problems.size() == before) config.recipes[name] = std::move(rc);
}

/// Optimal string alignment distance (Levenshtein with adjacent transpositions).
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

}  // namespace

std::string did_you_mean(std::string_view key, const std::vector<std::string_view>& known) {
  const std::string lower = to_lower(key);
  std::string_view best;
  std::size_t best_distance = SIZE_MAX;
  for (const auto candidate : known) {
    std::size_t distance = edit_distance(lower, candidate);
    const std::size_t shorter = std::min(lower.size(), candidate.size());
    // "listen_address" for "listen", "memory" for "memory_reserve".
    if (shorter >= 4 && (lower.starts_with(candidate) || candidate.starts_with(lower))) {
      distance = std::min(distance, std::size_t{2});
    }
    if (distance < best_distance) {
      best_distance = distance;
      best = candidate;
    }
  }
  if (best.empty() || best_distance > std::max<std::size_t>(2, best.size() / 3)) return "";
  return " (did you mean '" + std::string(best) + "'?)";
}

std::string unknown_key(std::string_view key, std::string_view where,
                        const std::vector<std::string_view>& known) {
  return "unknown setting '" + clean(key) + "' in " + std::string(where) + did_you_mean(key, known);
}

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
      for (const auto& e : kExecutorKeys) keys.push_back("build.executor." + std::string(e.name));
    }
  }
  for (const auto& row : kRecipeKeys) {
    const std::string key = "recipes.*." + std::string(row.name);
    keys.push_back(key);
    if (row.name == "env") keys.push_back(key + ".*");
    if (row.name == "source") {
      for (const auto sub : kSourceKeys) keys.push_back(key + "." + std::string(sub));
    }
    if (row.name == "matrix") {
      for (const auto sub : kMatrixKeys) keys.push_back(key + "." + std::string(sub));
      for (const auto sub : kExcludeKeys) keys.push_back(key + ".exclude." + std::string(sub));
    }
  }
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
