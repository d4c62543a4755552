#include "wheelforge/app/build_config.hpp"

#include <toml++/toml.h>

#include "wheelforge/app/app.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::app {
namespace {

/// A duration as a string ("90s", "10m", "2h") or a number of seconds.
std::optional<std::chrono::seconds> duration_of(const toml::node& node) {
  if (node.is_integer()) {
    const auto n = *node.value<std::int64_t>();
    if (n < 0) return std::nullopt;
    return std::chrono::seconds(n);
  }
  if (!node.is_string()) return std::nullopt;
  return parse_duration(*node.value<std::string>());
}

std::vector<std::string> string_list(const toml::node* node, const std::string& where,
                                     Problems& problems) {
  std::vector<std::string> out;
  if (node == nullptr) return out;
  const auto* array = node->as_array();
  if (array == nullptr) {
    problems.add(where + ": expected a list of strings");
    return out;
  }
  for (const auto& item : *array) {
    if (const auto v = item.value<std::string>()) {
      out.push_back(*v);
    } else {
      problems.add(where + ": expected a list of strings");
    }
  }
  return out;
}

core::Matrix read_matrix(const toml::table& t, const std::string& where, Problems& problems) {
  core::Matrix m;
  m.python = string_list(t.get("python"), where + ".python", problems);
  for (const auto& v : string_list(t.get("torch"), where + ".torch", problems)) {
    if (auto s = core::parse_torch_series(v)) {
      m.torch.push_back(*s);
    } else {
      problems.add(where + ".torch: '" + v + "' is not a torch series like 2.8");
    }
  }
  for (const auto& v : string_list(t.get("cuda"), where + ".cuda", problems)) {
    if (auto c = core::parse_cuda_version(v)) {
      m.cuda.push_back(*c);
    } else {
      problems.add(where + ".cuda: '" + v + "' is not a CUDA version like 12.8");
    }
  }
  if (const auto* ex = t.get_as<toml::array>("exclude")) {
    for (const auto& item : *ex) {
      const auto* e = item.as_table();
      if (e == nullptr) {
        problems.add(where +
                     ".exclude: expected tables like { python = \"3.12\", torch = \"2.8\" }");
        continue;
      }
      core::MatrixExclusion x;
      if (auto v = (*e)["python"].value<std::string>()) x.python = *v;
      if (auto v = (*e)["torch"].value<std::string>()) x.torch = core::parse_torch_series(*v);
      if (auto v = (*e)["cuda"].value<std::string>()) x.cuda = core::parse_cuda_version(*v);
      m.exclude.push_back(x);
    }
  }
  return m;
}

}  // namespace

Result<build::RunnerConfig> load_build_config(
    const std::optional<std::filesystem::path>& config_file) {
  build::RunnerConfig config;
  if (!config_file) return config;
  toml::table root;
  try {
    root = toml::parse_file(config_file->string());
  } catch (const toml::parse_error& e) {
    return make_error(Errc::invalid, config_file->string() + ": " + std::string(e.description()));
  }
  Problems problems;
  if (const auto* b = root.get_as<toml::table>("build")) {
    for (const auto& [key, node] : *b) {
      const std::string k(key.str());
      if (k == "torch_index") {
        if (auto v = node.value<std::string>())
          config.host.torch_index = *v;
        else
          problems.add("build.torch_index: expected a string");
      } else if (k == "memory_reserve") {
        auto v = node.is_integer()
                     ? std::optional<std::uint64_t>(
                           static_cast<std::uint64_t>(*node.value<std::int64_t>()))
                     : (node.is_string() ? parse_size(*node.value<std::string>()) : std::nullopt);
        if (v)
          config.host.memory_reserve_bytes = *v;
        else
          problems.add("build.memory_reserve: expected a size such as 2G");
      } else if (k == "max_concurrent_jobs") {
        auto v = node.value<std::int64_t>();
        if (v && *v >= 0 && *v <= 256)
          config.host.max_concurrent_jobs = static_cast<unsigned>(*v);
        else
          problems.add("build.max_concurrent_jobs: expected 0..256");
      } else if (k == "keep_failed_work_dirs") {
        if (auto v = node.value<bool>()) {
          config.host.keep_failed_work_dirs = *v;
        } else {
          problems.add("build.keep_failed_work_dirs: expected true or false");
        }
      } else if (k == "system_torch") {
        if (auto v = node.value<bool>())
          config.host.system_torch = *v;
        else
          problems.add("build.system_torch: expected true or false");
      } else if (k == "oom_retries") {
        auto v = node.value<std::int64_t>();
        if (v && *v >= 0 && *v <= 10)
          config.host.oom_retries = static_cast<int>(*v);
        else
          problems.add("build.oom_retries: expected 0..10");
      } else if (k == "python" || k == "cuda") {
        const auto* t = node.as_table();
        if (t == nullptr) {
          problems.add("build." + k + ": expected a table of version = path");
          continue;
        }
        for (const auto& [version, path] : *t) {
          auto p = path.value<std::string>();
          if (!p) {
            problems.add("build." + k + "." + std::string(version.str()) + ": expected a path");
          } else if (k == "python") {
            config.host.pythons[std::string(version.str())] = *p;
          } else {
            config.host.cuda_homes[std::string(version.str())] = *p;
          }
        }
      } else {
        problems.add("unknown setting 'build." + k + "'");
      }
    }
  }
  if (const auto* recipes = root.get_as<toml::table>("recipes")) {
    for (const auto& [rkey, rnode] : *recipes) {
      const std::string name(rkey.str());
      const std::string where = "recipes." + name;
      const auto* t = rnode.as_table();
      if (t == nullptr) {
        problems.add(where + ": expected a table");
        continue;
      }
      build::RecipeConfig rc;
      core::Recipe& r = rc.recipe;
      r.name = name;
      for (const auto& entry : *t) {
        // Not a structured binding: the lambdas below capture `node`.
        const auto& node = entry.second;
        const std::string k(entry.first.str());
        const auto str = [&](std::string& out) {
          if (auto v = node.value<std::string>())
            out = *v;
          else
            problems.add(where + "." + k + ": expected a string");
        };
        if (k == "project") {
          str(r.project);
        } else if (k == "command") {
          str(r.build_command);
        } else if (k == "arch_variable") {
          str(r.arch_variable);
        } else if (k == "arch_value") {
          str(r.arch_value);
        } else if (k == "local_version_variable") {
          str(r.local_version_variable);
        } else if (k == "import_check") {
          str(r.import_check);
        } else if (k == "gb_per_job") {
          if (auto v = node.value<double>())
            r.gb_per_job = *v;
          else
            problems.add(where + ".gb_per_job: expected a number");
        } else if (k == "timeout") {
          if (auto d = duration_of(node))
            r.timeout = *d;
          else
            problems.add(where + ".timeout: expected a duration such as 90s, 10m or 2h");
        } else if (k == "build_requires") {
          r.build_requires = string_list(&node, where + ".build_requires", problems);
        } else if (k == "env") {
          if (const auto* env = node.as_table()) {
            for (const auto& [ek, ev] : *env) {
              if (auto v = ev.value<std::string>())
                r.env.emplace_back(std::string(ek.str()), *v);
              else
                problems.add(where + ".env." + std::string(ek.str()) + ": expected a string");
            }
          } else {
            problems.add(where + ".env: expected a table");
          }
        } else if (k == "source") {
          const auto* src = node.as_table();
          const auto text = [&](const char* field) {
            return src ? (*src)[field].value<std::string>() : std::nullopt;
          };
          if (auto p = text("path")) {
            r.source = {core::SourceSpec::Kind::path, *p, ""};
          } else if (auto g = text("git")) {
            r.source = {core::SourceSpec::Kind::git, *g, text("ref").value_or(std::string())};
          } else if (src && (*src)["sdist"].value_or(false)) {
            r.source = {core::SourceSpec::Kind::index_sdist, "", ""};
          } else {
            problems.add(
                where +
                ".source: expected { path = ... }, { sdist = true } or { git = ..., ref = ... }");
          }
        } else if (k == "matrix") {
          if (const auto* m = node.as_table())
            rc.matrix = read_matrix(*m, where + ".matrix", problems);
          else
            problems.add(where + ".matrix: expected a table");
        } else {
          problems.add("unknown setting '" + where + "." + k + "'");
        }
      }
      auto recipe = core::validate_recipe(r);
      if (!recipe)
        problems.add(where + ": " + recipe.error().message);
      else
        rc.recipe = *recipe;
      auto matrix = core::validate_matrix(rc.matrix);
      if (!matrix)
        problems.add(where + ".matrix: " + matrix.error().message);
      else
        rc.matrix = *matrix;
      config.recipes[name] = std::move(rc);
    }
  }
  if (!problems.empty()) return problems.to_error();
  return config;
}

}  // namespace wf::app
