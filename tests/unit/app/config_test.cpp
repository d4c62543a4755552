// The one configuration loader: the build runner's [build] and [recipes] tables read in the same
// pass as the server's settings, every problem reported together, the host checks, server_url(),
// and the documentation of every key (docs/configuration.md and the example file) checked
// against the loader.

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "wheelforge/app/app.hpp"

namespace wf::app {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (std::size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size()) {
    s.replace(pos, from.size(), to);
  }
  return s;
}

class ConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("wf-config-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    python_ = executable(dir_ / "bin" / "python3.12");
    cuda_ = dir_ / "cuda-12.8";
    executable(cuda_ / "bin" / "nvcc");
  }
  void TearDown() override { fs::remove_all(dir_); }

  /// A file with `mode`; its directories are created.
  static fs::path file(const fs::path& p, mode_t mode) {
    fs::create_directories(p.parent_path());
    std::ofstream(p) << "#!/bin/sh\nexit 0\n";
    ::chmod(p.c_str(), mode);
    return p;
  }
  static fs::path executable(const fs::path& p) { return file(p, 0755); }

  /// Writes the configuration, with @PY@ and @CUDA@ standing for this test's interpreter and
  /// toolkit.
  fs::path write(const std::string& text) {
    const fs::path p = dir_ / "wheelforge.toml";
    std::ofstream(p, std::ios::binary)
        << replace_all(replace_all(text, "@PY@", python_.string()), "@CUDA@", cuda_.string());
    return p;
  }

  /// Every problem must contain one of `expected` and every expected text must be in exactly
  /// one problem.
  static void expect_problems(const std::vector<std::string>& problems,
                              const std::vector<std::string>& expected) {
    std::string all;
    for (const auto& p : problems) all += "\n  " + p;
    for (const auto& e : expected) {
      const auto n = std::count_if(problems.begin(), problems.end(),
                                   [&](const std::string& p) { return p.find(e) != p.npos; });
      EXPECT_EQ(n, 1) << "expected in exactly one problem: " << e << "\nproblems:" << all;
    }
    for (const auto& p : problems) {
      const bool known = std::any_of(expected.begin(), expected.end(),
                                     [&](const std::string& e) { return p.find(e) != p.npos; });
      EXPECT_TRUE(known) << "unexpected problem: " << p;
    }
    EXPECT_EQ(problems.size(), expected.size()) << all;
  }

  fs::path dir_;
  fs::path python_;
  fs::path cuda_;
};

TEST_F(ConfigTest, ServerSettingsAndBuildTablesComeFromOneLoad) {
  const auto path = write(R"(
listen = "127.0.0.1:9001"
base_url = "https://wheels.example.com/pypi/"
upstream_file_cache = "20G"

[build]
torch_index = "https://download.pytorch.org/whl/{cuda}"
memory_reserve = "3G"
max_concurrent_jobs = 2
oom_retries = 1
keep_failed_work_dirs = false
system_torch = true
[build.python]
"3.12" = "@PY@"
[build.cuda]
"12.8" = "@CUDA@"

[recipes.flash-attn]
project = "Flash_Attn"
source = { git = "https://github.com/Dao-AILab/flash-attention", ref = "v2.8.3" }
command = "{python} setup.py bdist_wheel -d {out}"
build_requires = ["ninja", "packaging"]
env = { FLASH_ATTENTION_FORCE_BUILD = "TRUE", B = "2" }
arch_variable = "FLASH_ATTN_CUDA_ARCHS"
arch_value = "80;90"
local_version_variable = "FLASH_ATTN_LOCAL_VERSION"
import_check = "import flash_attn"
gb_per_job = 5
timeout = "3h"
yank_superseded = true
manylinux = "2_28"
[recipes.flash-attn.matrix]
python = ["3.12"]
torch = ["2.8", "2.9"]
cuda = ["12.8"]
exclude = [{ torch = "2.9", python = "3.12", cuda = "12.8" }]

[recipes.local]
project = "demo"
source = { path = "/src/demo" }
gb_per_job = 0.5
timeout = 90
[recipes.local.matrix]
python = ["3.12"]
torch = ["2.8"]
cuda = ["12.8"]

[recipes.from-index]
project = "demo"
source = { sdist = true }
[recipes.from-index.matrix]
python = ["3.12"]
torch = ["2.8"]
cuda = ["12.8"]
)");
  const auto checked = check_configuration(path, {});
  ASSERT_TRUE(checked.config) << (checked.problems.empty() ? "" : checked.problems.front());
  EXPECT_TRUE(checked.host_problems.empty()) << checked.host_problems.front();
  const auto& c = *checked.config;
  EXPECT_EQ(c.settings.listen, "127.0.0.1:9001");
  EXPECT_EQ(c.settings.base_url, "https://wheels.example.com/pypi");  // trailing '/' removed
  EXPECT_EQ(c.settings.upstream_file_cache, 20ULL << 30U);
  EXPECT_EQ(c.settings.config_file, path);

  const auto& host = c.build.host;
  EXPECT_EQ(host.torch_index, "https://download.pytorch.org/whl/{cuda}");
  EXPECT_EQ(host.memory_reserve_bytes, 3ULL << 30U);
  EXPECT_EQ(host.max_concurrent_jobs, 2U);
  EXPECT_EQ(host.oom_retries, 1);
  EXPECT_FALSE(host.keep_failed_work_dirs);
  EXPECT_TRUE(host.system_torch);
  EXPECT_EQ(host.pythons, (std::map<std::string, fs::path>{{"3.12", python_}}));
  EXPECT_EQ(host.cuda_homes, (std::map<std::string, fs::path>{{"12.8", cuda_}}));

  ASSERT_EQ(c.build.recipes.size(), 3U);
  const auto& fa = c.build.recipes.at("flash-attn");
  EXPECT_EQ(fa.recipe.name, "flash-attn");
  EXPECT_EQ(fa.recipe.project, "flash-attn");  // normalized
  EXPECT_EQ(fa.recipe.source.kind, core::SourceSpec::Kind::git);
  EXPECT_EQ(fa.recipe.source.location, "https://github.com/Dao-AILab/flash-attention");
  EXPECT_EQ(fa.recipe.source.ref, "v2.8.3");
  EXPECT_EQ(fa.recipe.build_command, "{python} setup.py bdist_wheel -d {out}");
  EXPECT_EQ(fa.recipe.build_requires, (std::vector<std::string>{"ninja", "packaging"}));
  EXPECT_EQ(fa.recipe.env.size(), 2U);
  EXPECT_EQ(fa.recipe.arch_variable, "FLASH_ATTN_CUDA_ARCHS");
  EXPECT_EQ(fa.recipe.arch_value, "80;90");
  EXPECT_EQ(fa.recipe.local_version_variable, "FLASH_ATTN_LOCAL_VERSION");
  EXPECT_EQ(fa.recipe.import_check, "import flash_attn");
  EXPECT_EQ(fa.recipe.gb_per_job, 5.0);
  EXPECT_EQ(fa.recipe.timeout, seconds{3 * 3600});
  EXPECT_TRUE(fa.recipe.yank_superseded);
  EXPECT_EQ(fa.recipe.manylinux, core::ManylinuxCeiling{28});
  EXPECT_EQ(fa.matrix.python, (std::vector<std::string>{"3.12"}));
  EXPECT_EQ(fa.matrix.torch.size(), 2U);
  ASSERT_EQ(fa.matrix.exclude.size(), 1U);
  EXPECT_EQ(core::expand_matrix(fa.matrix).size(), 1U);

  const auto& local = c.build.recipes.at("local");
  EXPECT_FALSE(local.recipe.yank_superseded) << "the default";
  EXPECT_FALSE(local.recipe.manylinux) << "the default: torch's tag, found at job time";
  EXPECT_EQ(local.recipe.source.kind, core::SourceSpec::Kind::path);
  EXPECT_EQ(local.recipe.source.location, "/src/demo");
  EXPECT_EQ(local.recipe.gb_per_job, 0.5);
  EXPECT_EQ(local.recipe.timeout, seconds{90});
  EXPECT_EQ(local.recipe.build_command, std::string(core::kDefaultBuildCommand));
  EXPECT_EQ(c.build.recipes.at("from-index").recipe.source.kind,
            core::SourceSpec::Kind::index_sdist);

  const std::string summary = build_summary(c.build);
  EXPECT_NE(summary.find("# build runner: 3 recipe(s)"), std::string::npos) << summary;
  EXPECT_NE(summary.find("flash-attn: flash-attn, 1 cell(s)"), std::string::npos) << summary;
}

TEST_F(ConfigTest, NoBuildTablesLeaveTheRunnerOff) {
  const auto c = load_configuration(write("listen = \"127.0.0.1:9001\"\n"), {});
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_TRUE(c->build.recipes.empty());
  EXPECT_EQ(c->build.host.torch_index, build::HostConfig{}.torch_index);
  EXPECT_EQ(build_summary(c->build), "# build runner: off (no [recipes])\n");
}

TEST_F(ConfigTest, EveryProblemOfEveryTableIsReportedTogether) {
  const auto path = write(R"(
listn = "127.0.0.1:1"

[build]
torch_index = "{server}/{cuda_version}/simple/"
memory_reserve = "lots"
max_concurrent_jobs = -1
oom_retries = "2"
keep_failed_work_dirs = "yes"
system_torch = 1
memory_reserv = "1G"
[build.python]
"3.11" = "@PY@"
"3.12" = "relative/python"
"three" = "/usr/bin/python3"
[build.cuda]
"13.0" = "@CUDA@"
"12.08" = "/usr/local/cuda"

[recipes.a]
project = "a"
source = { path = "/src/a", git = "https://example.com/a.git" }
gb_per_jobs = 4
timeout = "forever"
env = { OK = "1", BAD = 2 }
[recipes.a.matrix]
python = ["3.13"]
torch = []
cuda = ["12.8"]
exclude = [{ torch = "2.8", cud = "13.0" }]

[recipes.b]
project = "b"
command = "make {target}"
)");
  const auto checked = check_configuration(path, {});
  EXPECT_FALSE(checked.config.has_value());
  expect_problems(
      checked.problems,
      {
          "unknown setting 'listn' in " + path.string() + " (did you mean 'listen'?)",
          "build.torch_index: unknown placeholder '{cuda_version}' (known: {server}, {cuda}, "
          "{torch})",
          "build.memory_reserve: expected a size such as 2G or 512M, got 'lots'",
          "build.max_concurrent_jobs: expected a whole number from 0 to 256, got -1",
          "build.oom_retries: expected a whole number from 0 to 10, got '2'",
          "build.keep_failed_work_dirs: expected true or false, got 'yes'",
          "build.system_torch: expected true or false, got 1",
          "unknown setting 'memory_reserv' in [build] (did you mean 'memory_reserve'?)",
          "build.python.3.12: expected an absolute path, got 'relative/python'",
          "build.python.three: 'three' is not a Python version like 3.12",
          "build.cuda.12.08: '12.08' is not a CUDA version like 12.8",
          "recipes.a.source: give one of path, git or sdist, not several",
          "unknown setting 'gb_per_jobs' in [recipes.a] (did you mean 'gb_per_job'?)",
          "recipes.a.timeout: expected a duration such as 90s, 10m or 2h, got 'forever'",
          "recipes.a.env.BAD: expected a string, got 2",
          "recipes.a.matrix: the matrix lists no torch series",
          "recipes.a.matrix.python: 3.13 has no interpreter in [build.python] (configured: 3.11)",
          "recipes.a.matrix.cuda: 12.8 has no toolkit in [build.cuda] (configured: 13.0)",
          "unknown setting 'cud' in recipes.a.matrix.exclude[0] (did you mean 'cuda'?)",
          "recipes.b: the build command has an unknown placeholder",
          "recipes.b.matrix: missing",
      });
  // The same problems, in one error, for the commands that only need the settings.
  const auto loaded = load_configuration(path, {});
  ASSERT_FALSE(loaded);
  EXPECT_NE(loaded.error().message.find("recipes.b.matrix: missing"), std::string::npos);
}

TEST_F(ConfigTest, WrongShapesAreNamedWithTheirKey) {
  const auto checked = check_configuration(write(R"(
build = 1
recipes = "x"
)"),
                                           {});
  expect_problems(checked.problems, {"build: expected a table [build], got 1",
                                     "recipes: expected tables [recipes.NAME], got 'x'"});

  const auto nested = check_configuration(write(R"(
[build]
python = "/usr/bin/python3"
[build.cuda]
13.0 = "@CUDA@"
[recipes.r]
project = "r"
source = "/src/r"
build_requires = "ninja"
env = ["A=1"]
matrix = { python = "3.12", torch = [2.8], cuda = ["13.0"], exclude = { torch = "2.8" } }
[recipes.s]
project = "s"
source = { sdist = false, ref = "main", branch = "x" }
[recipes.s.matrix]
python = ["3.12"]
torch = ["2.8"]
cuda = ["13.0"]
)"),
                                          {});
  expect_problems(
      nested.problems,
      {
          "build.python: expected a table of version = path",
          "build.cuda.13: expected a path; quote the version",
          "recipes.r.source: expected { path = \"DIR\" }, { git = \"URL\", ref = \"REF\" } or "
          "{ sdist = true }, got '/src/r'",
          "recipes.r.build_requires: expected a list of requirements like [\"ninja\"], got "
          "'ninja'",
          "recipes.r.env: expected a table like { NAME = \"value\" }, got a list",
          "recipes.r.matrix.python: expected a list of quoted versions like [\"3.12\"], got '3.12'",
          "recipes.r.matrix.torch: expected a list of quoted versions like [\"2.8\"], got a list "
          "with 2.8",
          "recipes.r.matrix.exclude: expected a list of tables",
          "recipes.r.matrix: the matrix lists no python version",
          "recipes.r.matrix: the matrix lists no torch series",
          "recipes.r.matrix.cuda: 13.0 has no toolkit in [build.cuda] (configured: none)",
          "recipes.s.source.sdist: only true is meaningful",
          "unknown setting 'branch' in [recipes.s.source]",
          "recipes.s.source.ref: only a git source takes a ref",
          "recipes.s.matrix.python: 3.12 has no interpreter in [build.python] (configured: none)",
          "recipes.s.matrix.cuda: 13.0 has no toolkit in [build.cuda] (configured: none)",
      });
}

TEST_F(ConfigTest, ASyntaxErrorIsOneProblemFromTheOneParse) {
  const auto path = write("[build]\nmemory_reserve = \"1G\n[recipes.x]\n");
  const auto checked = check_configuration(path, {});
  ASSERT_EQ(checked.problems.size(), 1U);
  EXPECT_TRUE(checked.problems[0].starts_with("config: " + path.string() + ":2:"))
      << checked.problems[0];
}

TEST_F(ConfigTest, HostProblemsAreCheckedApart) {
  file(dir_ / "plain-file", 0644);
  fs::create_directories(dir_ / "a-directory");
  fs::create_directories(dir_ / "cuda-no-nvcc" / "bin");
  file(dir_ / "cuda-nvcc-not-executable" / "bin" / "nvcc", 0644);
  const std::string d = dir_.string();
  const auto path = write(R"(
[build.python]
"3.10" = ")" + d + R"(/absent/python"
"3.11" = ")" + d + R"(/plain-file"
"3.12" = "@PY@"
"3.13" = ")" + d + R"(/a-directory"
[build.cuda]
"12.6" = ")" + d + R"(/absent-cuda"
"12.7" = ")" + d + R"(/plain-file"
"12.8" = "@CUDA@"
"12.9" = ")" + d + R"(/cuda-no-nvcc"
"13.0" = ")" + d + R"(/cuda-nvcc-not-executable"
[recipes.r]
project = "r"
[recipes.r.matrix]
python = ["3.10", "3.12"]
torch = ["2.8"]
cuda = ["12.6", "12.8"]
)");
  const auto checked = check_configuration(path, {});
  // The file itself is fine: serve and build run with it and warn.
  ASSERT_TRUE(checked.config) << checked.problems.front();
  expect_problems(
      checked.host_problems,
      {
          "build.python.3.10: " + d + "/absent/python does not exist",
          "build.python.3.11: " + d + "/plain-file is not an executable file",
          "build.python.3.13: " + d + "/a-directory is not an executable file",
          "build.cuda.12.6: " + d + "/absent-cuda does not exist",
          "build.cuda.12.7: " + d + "/plain-file is not a directory",
          "build.cuda.12.9: " + d + "/cuda-no-nvcc has no executable bin/nvcc",
          "build.cuda.13.0: " + d + "/cuda-nvcc-not-executable has no executable bin/nvcc",
      });
  EXPECT_EQ(build_host_problems(checked.config->build.host), checked.host_problems);

  // Checked even when the file has problems of its own, so that `config check` lists all.
  std::ofstream(path, std::ios::app) << "bogus = 1\n";
  const auto both = check_configuration(path, {});
  EXPECT_FALSE(both.config);
  EXPECT_EQ(both.problems.size(), 1U);
  EXPECT_EQ(both.host_problems.size(), 7U);
}

TEST_F(ConfigTest, SlurmExecutorWithContainers) {
  const auto path = write(R"(
[build]
[build.python]
"3.12" = "/opt/python/bin/python3.12"
[build.cuda]
"12.8" = "/usr/local/cuda-12.8"
"13.0" = "/usr/local/cuda-13.0"
[build.executor]
kind = "slurm"
partition = "build"
account = "ml"
smoke_partition = "gpu"
gres = "gpu:1"
sbatch_args = ["--qos=normal", "--constraint=x86_64"]
cpus = 16
idle_timeout = "5m"
container = "docker"
program = "/usr/bin/docker"
engine_args = ["--config", "/etc/wf-docker"]
run_args = ["--ulimit", "nofile=20000:20000"]
gpus = "all"
network = "none"
mounts = ["/usr/local/cuda-12.8", "/opt/cuda-13.0:/usr/local/cuda-13.0"]
user = "image"
[build.images]
"12.8" = "pytorch/manylinux2_28-builder:cuda12.8"
"13.0/3.12" = "example.com/builder:cuda13.0-py3.12"

[recipes.r]
project = "r"
cpus = 32
[recipes.r.matrix]
python = ["3.12"]
torch = ["2.8"]
cuda = ["12.8", "13.0"]
)");
  const auto checked = check_configuration(path, {});
  ASSERT_TRUE(checked.config) << checked.problems.front();
  // Paths inside the images: not looked for on this host.
  EXPECT_TRUE(checked.host_problems.empty()) << checked.host_problems.front();
  const build::ExecutorConfig& e = checked.config->build.host.executor;
  EXPECT_EQ(e.kind, build::ExecutorConfig::Kind::slurm);
  EXPECT_EQ(e.slurm.partition, "build");
  EXPECT_EQ(e.slurm.account, "ml");
  EXPECT_EQ(e.slurm.smoke_partition, "gpu");
  EXPECT_EQ(e.slurm.gres, "gpu:1");
  EXPECT_EQ(e.slurm.sbatch_args, (std::vector<std::string>{"--qos=normal", "--constraint=x86_64"}));
  EXPECT_EQ(e.slurm.default_cpus, 16U);
  EXPECT_EQ(e.slurm.idle_timeout, seconds(300));
  EXPECT_TRUE(e.slurm.in_containers);
  ASSERT_NE(e.containers(), nullptr);
  EXPECT_EQ(e.container.engine, build::ContainerConfig::Engine::docker);
  EXPECT_EQ(e.container.program, "/usr/bin/docker");
  EXPECT_EQ(e.container.engine_args, (std::vector<std::string>{"--config", "/etc/wf-docker"}));
  EXPECT_EQ(e.container.run_args, (std::vector<std::string>{"--ulimit", "nofile=20000:20000"}));
  EXPECT_EQ(e.container.gpus, build::ContainerConfig::Gpus::all);
  EXPECT_EQ(e.container.network, "none");
  EXPECT_EQ(e.container.mounts.size(), 2U);
  EXPECT_FALSE(e.container.as_server_user);
  EXPECT_EQ(e.container.images.size(), 2U);
  ASSERT_NE(build::image_for(e.container, "13.0", "3.12"), nullptr);
  EXPECT_EQ(*build::image_for(e.container, "13.0", "3.12"), "example.com/builder:cuda13.0-py3.12");
  EXPECT_EQ(build::image_for(e.container, "13.0", "3.11"), nullptr);
  EXPECT_EQ(*build::image_for(e.container, "12.8", "3.11"),
            "pytorch/manylinux2_28-builder:cuda12.8");
  EXPECT_EQ(checked.config->build.recipes.at("r").recipe.cpus, 32U);
  const std::string summary = build_summary(checked.config->build);
  EXPECT_NE(summary.find("executor: slurm (partition build, smoke tests on gpu with --gres=gpu:1, "
                         "in docker containers)"),
            std::string::npos)
      << summary;
  EXPECT_NE(summary.find("images: 12.8 = pytorch/manylinux2_28-builder:cuda12.8"),
            std::string::npos)
      << summary;
}

TEST_F(ConfigTest, ExecutorDefaultsAndAContainerEngine) {
  const auto plain = check_configuration(write("[build]\n"), {});
  ASSERT_TRUE(plain.config);
  EXPECT_EQ(plain.config->build.host.executor, build::ExecutorConfig{});
  EXPECT_EQ(plain.config->build.host.executor.containers(), nullptr);
  const auto podman = check_configuration(write(R"(
[build.executor]
kind = "podman"
[build.images]
"12.8" = "localhost/builder:12.8"
)"),
                                          {});
  ASSERT_TRUE(podman.config) << podman.problems.front();
  const build::ExecutorConfig& e = podman.config->build.host.executor;
  EXPECT_EQ(e.kind, build::ExecutorConfig::Kind::podman);
  ASSERT_NE(e.containers(), nullptr);
  EXPECT_EQ(e.container.engine, build::ContainerConfig::Engine::podman);
  EXPECT_EQ(e.container.gpus, build::ContainerConfig::Gpus::cdi);
  EXPECT_EQ(e.container.network, "host");
  EXPECT_TRUE(e.container.as_server_user);
}

TEST_F(ConfigTest, ExecutorProblemsAreNamed) {
  const auto checked = check_configuration(write(R"(
[build]
[build.python]
"3.12" = "@PY@"
[build.cuda]
"12.8" = "@CUDA@"
"13.0" = "@CUDA@"
[build.executor]
kind = "podman"
partition = "gpu"
gpus = "some"
mounts = ["relative/cuda", "/a:b"]
idle_timeout = "1s"
user = "root"
network = ""
engine_argz = []
[build.images]
"12.8" = "ok:1"
"12.08" = "bad-key"
"13.0/three" = "bad-python"
"12.9" = ""

[recipes.r]
project = "r"
cpus = 0
manylinux = "2_5"
[recipes.r.matrix]
python = ["3.12"]
torch = ["2.8"]
cuda = ["12.8", "13.0"]
)"),
                                           {});
  EXPECT_FALSE(checked.config);
  expect_problems(
      checked.problems,
      {
          "build.executor.partition: only for kind = \"slurm\" (kind is \"podman\")",
          "build.executor.idle_timeout: only for kind = \"slurm\"",
          "build.executor.idle_timeout: expected a duration of at least 10s, got '1s'",
          "build.executor.gpus: expected one of \"cdi\", \"all\", \"none\", got 'some'",
          "build.executor.mounts: 'relative/cuda' is not an absolute path",
          "build.executor.mounts: '/a:b' is not an absolute path",
          "build.executor.user: expected one of \"server\", \"image\", got 'root'",
          "build.executor.network: expected a name without spaces, got ''",
          "unknown setting 'engine_argz' in [build.executor] (did you mean 'engine_args'?)",
          "build.images.12.08: '12.08' is not a CUDA version",
          "build.images.13.0/three: '13.0/three' is not a CUDA version",
          "build.images.12.9: expected an image name, got ''",
          "recipes.r.cpus: expected a whole number from 1 to 4096, got 0",
          "recipes.r.manylinux: '2_5' is below manylinux_2_17, the lowest tag wheelforge gives "
          "a wheel with binaries",
          "recipes.r.matrix.cuda: 13.0 has no image in [build.images] (configured: 12.8)",
      });

  const auto local = check_configuration(write(R"(
[build.executor]
kind = "lokal"
)"),
                                         {});
  EXPECT_FALSE(local.config);
  expect_problems(local.problems,
                  {"build.executor.kind: expected one of \"local\", \"podman\", \"docker\", "
                   "\"slurm\", got 'lokal'"});
  const auto images = check_configuration(write(R"(
[build.images]
"12.8" = "x:1"
)"),
                                          {});
  EXPECT_FALSE(images.config);
  expect_problems(images.problems, {"build.images: only when commands run in containers"});
  const auto stray = check_configuration(write(R"(
[build.executor]
kind = "slurm"
gpus = "none"
)"),
                                         {});
  EXPECT_FALSE(stray.config);
  expect_problems(stray.problems,
                  {"build.executor.gpus: only when commands run in containers (kind = \"podman\" "
                   "or \"docker\", or kind = \"slurm\" with container"});
}

TEST_F(ConfigTest, HintsOnlyForCloseKeys) {
  const auto checked = check_configuration(write(R"(
listen_address = "127.0.0.1:1"
mystery = 1
[build]
max_jobs = 3
pythons = {}
)"),
                                           {});
  expect_problems(checked.problems,
                  {
                      "unknown setting 'listen_address' in " + (dir_ / "wheelforge.toml").string() +
                          " (did you mean 'listen'?)",
                      "unknown setting 'mystery' in " + (dir_ / "wheelforge.toml").string(),
                      "unknown setting 'max_jobs' in [build]",
                      "unknown setting 'pythons' in [build] (did you mean 'python'?)",
                  });
  for (const auto& p : checked.problems) {
    if (p.find("'mystery'") != p.npos || p.find("'max_jobs'") != p.npos) {
      EXPECT_EQ(p.find("did you mean"), p.npos) << p;
    }
  }
}

TEST_F(ConfigTest, ServerUrlComesFromBaseUrlOrListen) {
  const auto url = [](const Overrides& o) -> std::string {
    auto s = load_configuration(std::nullopt, o);
    if (!s) return "config: " + s.error().message;
    auto u = server_url(s->settings);
    return u ? *u : "error: " + u.error().message;
  };
  EXPECT_EQ(url({}), "http://127.0.0.1:8080");
  Overrides o;
  o.listen = "127.0.0.1:9123";
  EXPECT_EQ(url(o), "http://127.0.0.1:9123");
  o.listen = "0.0.0.0:9123";
  EXPECT_EQ(url(o), "http://127.0.0.1:9123");
  o.listen = "[::]:9123";
  EXPECT_EQ(url(o), "http://[::1]:9123");
  o.listen = "[::1]:9123";
  EXPECT_EQ(url(o), "http://[::1]:9123");
  o.listen = "idx.internal:443";
  o.tls_cert = "/etc/wheelforge/cert.pem";
  o.tls_key = "/etc/wheelforge/key.pem";
  EXPECT_EQ(url(o), "https://idx.internal:443");
  o = {};
  o.listen = "127.0.0.1:0";
  EXPECT_NE(url(o).find("error: listen = '127.0.0.1:0' has port 0"), std::string::npos) << url(o);
  EXPECT_NE(url(o).find("set base_url"), std::string::npos);
  o.base_url = "http://localhost:9123/";
  EXPECT_EQ(url(o), "http://localhost:9123");

  for (const char* bad :
       {"ftp://x", "http://", "https:///path", "http://a b", "http://x?q=1", "wheels.example"}) {
    o.base_url = bad;
    const auto checked = check_configuration(std::nullopt, o);
    ASSERT_EQ(checked.problems.size(), 1U) << bad;
    EXPECT_TRUE(checked.problems[0].starts_with("base_url: expected an http:// or https:// URL"))
        << checked.problems[0];
  }
}

TEST_F(ConfigTest, UpstreamFileCacheIsASizeWithZeroForNoBound) {
  Overrides o;
  auto checked = check_configuration(std::nullopt, o);
  ASSERT_TRUE(checked.config);
  EXPECT_EQ(checked.config->settings.upstream_file_cache, 0U);
  o.upstream_file_cache = "512M";
  checked = check_configuration(std::nullopt, o);
  ASSERT_TRUE(checked.config);
  EXPECT_EQ(checked.config->settings.upstream_file_cache, 512ULL << 20U);
  o.upstream_file_cache = "lots";
  checked = check_configuration(std::nullopt, o);
  ASSERT_EQ(checked.problems.size(), 1U);
  EXPECT_TRUE(checked.problems[0].starts_with(
      "upstream_file_cache: expected a size such as 20G, or 0 for no bound, got 'lots'"))
      << checked.problems[0];
}

TEST_F(ConfigTest, CatalogIsSqliteOrAPostgresUriShownWithoutItsPassword) {
  Overrides o;
  auto checked = check_configuration(std::nullopt, o);
  ASSERT_TRUE(checked.config);
  EXPECT_EQ(checked.config->settings.catalog, "sqlite");
  o.catalog = "postgresql://wf:pg-s3cret@db.example:5433/index";
  checked = check_configuration(std::nullopt, o);
  ASSERT_TRUE(checked.config);
  EXPECT_EQ(checked.config->settings.catalog, "postgresql://wf:pg-s3cret@db.example:5433/index");
  const std::string shown = settings_to_toml(checked.config->settings);
  EXPECT_NE(shown.find("catalog = \"postgresql://wf:***@db.example:5433/index\""),
            std::string::npos)
      << shown;
  EXPECT_EQ(shown.find("pg-s3cret"), std::string::npos);
  o.catalog = "mysql://db.example/index";
  checked = check_configuration(std::nullopt, o);
  ASSERT_EQ(checked.problems.size(), 1U);
  EXPECT_TRUE(checked.problems[0].starts_with("catalog: expected \"sqlite\" or a PostgreSQL URI"))
      << checked.problems[0];
}

TEST_F(ConfigTest, UpstreamPageDiskCacheIsASizeOneGigabyteByDefault) {
  Overrides o;
  auto checked = check_configuration(std::nullopt, o);
  ASSERT_TRUE(checked.config);
  EXPECT_EQ(checked.config->settings.upstream_page_disk_cache, 1ULL << 30U);
  o.upstream_page_disk_cache = "0";
  checked = check_configuration(std::nullopt, o);
  ASSERT_TRUE(checked.config);
  EXPECT_EQ(checked.config->settings.upstream_page_disk_cache, 0U);
  o.upstream_page_disk_cache = "200M";
  checked = check_configuration(std::nullopt, o);
  ASSERT_TRUE(checked.config);
  EXPECT_EQ(checked.config->settings.upstream_page_disk_cache, 200ULL << 20U);
  o.upstream_page_disk_cache = "-1";
  checked = check_configuration(std::nullopt, o);
  ASSERT_EQ(checked.problems.size(), 1U);
  EXPECT_TRUE(checked.problems[0].starts_with(
      "upstream_page_disk_cache: expected a size such as 1G, or 0 for no bound, got '-1'"))
      << checked.problems[0];
}

TEST_F(ConfigTest, OidcIssuersWithTheirDefaultsAndEveryProblemNamed) {
  auto checked = check_configuration(write(R"(
[[oidc_issuer]]
name = "github"
url = "https://token.actions.githubusercontent.com/"

[[oidc_issuer]]
name = "k8s"
url = "https://kubernetes.default.svc"
audience = "wheels"
jwks_url = "https://keys.example.com/k8s/jwks"
jwks_refetch_interval = "5m"
)"),
                                     {});
  for (const auto& p : checked.problems) ADD_FAILURE() << p;
  ASSERT_TRUE(checked.config);
  const auto& issuers = checked.config->oidc_issuers;
  ASSERT_EQ(issuers.size(), 2U);
  EXPECT_EQ(issuers[0].url, "https://token.actions.githubusercontent.com");
  EXPECT_EQ(issuers[0].audience, "wheelforge");
  EXPECT_EQ(issuers[0].jwks_url, "");
  EXPECT_EQ(issuers[0].jwks_refetch_interval, std::chrono::seconds{60});
  EXPECT_EQ(issuers[1].audience, "wheels");
  EXPECT_EQ(issuers[1].jwks_refetch_interval, std::chrono::seconds{300});
  EXPECT_EQ(oidc_summary(issuers),
            "# oidc_issuer github: https://token.actions.githubusercontent.com, audience "
            "wheelforge, keys from its discovery document, jwks_refetch_interval 60s\n"
            "# oidc_issuer k8s: https://kubernetes.default.svc, audience wheels, keys from "
            "https://keys.example.com/k8s/jwks, jwks_refetch_interval 300s\n");

  checked = check_configuration(write(R"(
[[oidc_issuer]]
name = "GitHub"
url = "ftp://example.com"
jwks_refetch_interval = "2h"
jwks = "x"

[[oidc_issuer]]
name = "gitlab"
url = "https://gitlab.com"

[[oidc_issuer]]
name = "gitlab"
url = "https://gitlab.com"
jwks_refetch_interval = -1
)"),
                                {});
  EXPECT_FALSE(checked.config);
  expect_problems(checked.problems,
                  {"oidc_issuer.GitHub.name: expected lower-case letters",
                   "oidc_issuer.GitHub.url: expected an http:// or https:// URL",
                   "oidc_issuer.GitHub.jwks_refetch_interval: expected a duration from 0s to 1h",
                   "unknown setting 'jwks'", "oidc_issuer.gitlab.name: another [[oidc_issuer]]",
                   "oidc_issuer.gitlab.url: another [[oidc_issuer]]",
                   "oidc_issuer.gitlab.jwks_refetch_interval: expected a duration"});
}

// ---------------------------------------------------------------------------------------------
// Documentation: every key the loader accepts is in the example file and in the table of its
// part of docs/configuration.md, whose top-level defaults are those `config check` prints; the
// example passes the check.

/// The last named component of a dotted key ("recipes.*.matrix.exclude.cuda" -> "cuda").
std::string leaf(const std::string& key) {
  std::string k = key;
  while (k.ends_with(".*")) k.resize(k.size() - 2);
  return k.substr(k.rfind('.') + 1);
}

/// The example file with its commented-out TOML lines ("# key = ...", "# [table]") active.
std::string uncommented(const std::string& text) {
  static const std::regex toml_line(R"(^# (\[\[?[A-Za-z0-9_."-]+\]\]?|[A-Za-z0-9_"\.-]+ = .+)$)");
  std::istringstream in(text);
  std::string out;
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    out += (std::regex_match(line, m, toml_line) ? m[1].str() : line) + "\n";
  }
  return out;
}

/// True when `key` is written as a TOML key in `text`: "key =", "{ key =", "[a.key]".
bool names_key(const std::string& text, const std::string& key) {
  const std::regex pattern("(^|[\\s{,.\\[#])" + key + "(\\s*=|\\])");
  return std::regex_search(text, pattern);
}

const fs::path kSource = WF_SOURCE_DIR;

TEST(ConfigDocs, EveryKeyIsInTheExampleFileUnderItsTable) {
  const std::string example = read_text(kSource / "systemd" / "wheelforge.toml.example");
  ASSERT_FALSE(example.empty());
  const std::size_t build_at = example.find("\n[build]\n");
  const std::size_t recipes_at = example.find("\n# [recipes.");
  ASSERT_NE(build_at, std::string::npos) << "the example has no [build] table";
  ASSERT_NE(recipes_at, std::string::npos) << "the example has no (commented) recipe";
  ASSERT_LT(build_at, recipes_at);
  const std::string top = example.substr(0, build_at);
  const std::string build = example.substr(build_at, recipes_at - build_at);
  const std::string recipes = example.substr(recipes_at);
  const auto keys = configuration_keys();
  ASSERT_GT(keys.size(), 30U);
  for (const auto& key : keys) {
    if (leaf(key) == "*") continue;
    const std::string& part = key.starts_with("build.")     ? build
                              : key.starts_with("recipes.") ? recipes
                                                            : top;
    EXPECT_TRUE(names_key(part, leaf(key))) << key << " is not documented in its part of "
                                            << "systemd/wheelforge.toml.example";
  }
}

/// The part of docs/configuration.md under the heading `## <title>`, up to the next `## `.
std::string reference_part(const std::string& reference, const std::string& title) {
  const std::string heading = "\n## " + title + "\n";
  const std::size_t start = reference.find(heading);
  if (start == std::string::npos) return {};
  const std::size_t end = reference.find("\n## ", start + heading.size());
  return reference.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

TEST(ConfigDocs, EveryKeyIsInTheConfigurationReferenceUnderItsTable) {
  const std::string reference = read_text(kSource / "docs" / "configuration.md");
  ASSERT_FALSE(reference.empty()) << "docs/configuration.md is missing";
  const std::string top = reference_part(reference, "Top-level settings");
  const std::string build = reference_part(reference, "[build]");
  const std::string recipes = reference_part(reference, "[recipes.NAME]");
  const std::string upstream = reference_part(reference, "[[upstream]]");
  const std::string oidc = reference_part(reference, "[[oidc_issuer]]");
  const std::string attestations = reference_part(reference, "[attestations]");
  const std::string s3 = reference_part(reference, "[s3]");
  for (const auto* part : {&top, &build, &recipes, &upstream, &oidc, &attestations, &s3}) {
    ASSERT_FALSE(part->empty());
  }
  for (const auto& key : configuration_keys()) {
    const std::string& part = key.starts_with("build.")          ? build
                              : key.starts_with("recipes.")      ? recipes
                              : key.starts_with("upstream.")     ? upstream
                              : key.starts_with("oidc_issuer.")  ? oidc
                              : key.starts_with("attestations.") ? attestations
                              : key.starts_with("s3.")           ? s3
                                                                 : top;
    const std::string name = leaf(key);
    const bool in_table = part.find("`" + name + "`") != std::string::npos;
    EXPECT_TRUE(in_table || names_key(part, name))
        << key << " is not documented in its table of docs/configuration.md";
  }
}

TEST(ConfigDocs, TheReferencesTopLevelDefaultsAreWhatConfigCheckPrints) {
  const std::string top =
      reference_part(read_text(kSource / "docs" / "configuration.md"), "Top-level settings");
  ASSERT_FALSE(top.empty());
  const auto checked = check_configuration(std::nullopt, {});
  ASSERT_TRUE(checked.config);
  std::istringstream printed(settings_to_toml(checked.config->settings));
  std::size_t rows = 0;
  for (std::string line; std::getline(printed, line);) {
    const std::size_t eq = line.find(" = ");
    if (line.starts_with("#") || eq == std::string::npos) continue;
    const std::string row = "| `" + line.substr(0, eq) + "` | `" + line.substr(eq + 3) + "` |";
    EXPECT_NE(top.find("\n" + row), std::string::npos)
        << "docs/configuration.md has no row starting " << row;
    ++rows;
  }
  EXPECT_GT(rows, 20U);
}

TEST(ConfigDocs, TheExampleFilePassesTheCheckAndItsRecipeIsValid) {
  const fs::path example = kSource / "systemd" / "wheelforge.toml.example";
  const auto checked = check_configuration(example, {});
  for (const auto& p : checked.problems) ADD_FAILURE() << p;
  for (const auto& p : checked.host_problems) ADD_FAILURE() << p;
  ASSERT_TRUE(checked.config);
  EXPECT_TRUE(checked.config->build.recipes.empty());  // the runner stays off as shipped

  // With its commented-out build tables active, the example is a valid configuration too
  // (the interpreters and toolkits it names need not exist on this host).
  const fs::path active =
      fs::temp_directory_path() / ("wf-config-example-" + std::to_string(::getpid()) + ".toml");
  std::ofstream(active) << uncommented(read_text(example));
  const auto with_recipes = check_configuration(active, {});
  fs::remove(active);
  for (const auto& p : with_recipes.problems) ADD_FAILURE() << "uncommented example: " << p;
  ASSERT_TRUE(with_recipes.config);
  EXPECT_FALSE(with_recipes.config->build.recipes.empty());
  EXPECT_FALSE(with_recipes.config->build.host.pythons.empty());
  EXPECT_FALSE(with_recipes.config->build.host.cuda_homes.empty());
}

}  // namespace
}  // namespace wf::app
