// The [recipes.NAME] tables of the configuration file: source, command, environment and
// [recipes.NAME.matrix], each a list of rows (name, reader) like the [build] table's.

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <set>

#include "config_readers.hpp"
#include "config_tables.hpp"
#include "wheelforge/app/app.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::app::detail {
namespace {

namespace fs = std::filesystem;

// ---------------------------------------------------------------------------------------------
// [recipes.NAME]

constexpr std::array<std::string_view, 6> kSourceKeys{"path",       "git",         "ref",
                                                      "submodules", "credentials", "sdist"};
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
  std::optional<bool> submodules;
  std::optional<fs::path> credentials;
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
    } else if (name == "submodules") {
      submodules = read_bool(value, where, problems);
    } else if (name == "credentials") {
      credentials = read_absolute_path(value, where, problems);
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
  if (submodules && !git) {
    problems.push_back(key + ".submodules: only a git source has submodules");
  }
  if (credentials && !git) {
    problems.push_back(key + ".credentials: only a git source takes credentials");
  }
  if (problems.size() != before) return;
  if (path) {
    out = {core::SourceSpec::Kind::path, *path, ""};
  } else if (git) {
    out = {core::SourceSpec::Kind::git, *git, ref.value_or("")};
    if (submodules == false) out.submodules = core::SourceSpec::Submodules::none;
    if (credentials) out.credentials = credentials->string();
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
    RecipeKey{"compile_cache",
              [](const toml::node& node, const std::string& key, build::RecipeConfig& rc,
                 ProblemList& problems) {
                if (const auto b = read_bool(node, key, problems)) rc.recipe.compile_cache = *b;
              }},
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
    RecipeKey{"manylinux",
              [](const toml::node& node, const std::string& key, build::RecipeConfig& rc,
                 ProblemList& problems) {
                const auto text = node.value_exact<std::string>();
                if (!text) {
                  problems.push_back(key +
                                     ": expected a quoted manylinux tag such as \"2_28\", got " +
                                     spelled(node));
                  return;
                }
                auto ceiling = core::parse_manylinux_ceiling(*text);
                if (!ceiling) {
                  problems.push_back(key + ": " + ceiling.error().message);
                  return;
                }
                rc.recipe.manylinux = *ceiling;
              }},
    RecipeKey{"matrix", [](const toml::node& node, const std::string& key, build::RecipeConfig& rc,
                           ProblemList& problems) { read_matrix(node, key, rc.matrix, problems); }},
};

std::string listed(const std::map<std::string, fs::path>& entries) {
  std::string out;
  for (const auto& [version, path] : entries) out += (out.empty() ? "" : ", ") + version;
  return out.empty() ? "none" : out;
}

}  // namespace

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

std::vector<std::string> recipe_keys() {
  std::vector<std::string> keys;
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
