// Build environments: keyed by everything that makes them, reused while the key holds, made
// again when it changes; default build requirements.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include "build/runner_bed.hpp"

namespace wf::build::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class Environment : public ::testing::Test {
 protected:
  Environment() : bed(::testing::UnitTest::GetInstance()->current_test_info()->name()) {
    script_host(bed.fake);
    script_build(bed.fake);
  }

  // The pip install commands into build environments (not the smoke test's).
  std::vector<std::string> env_installs() const {
    std::vector<std::string> out;
    for (const auto& c : bed.fake.commands_matching("-m pip install --index-url")) {
      if (c.line().find("/envs/") != std::string::npos) out.push_back(c.line());
    }
    return out;
  }
  std::set<std::string> env_dirs() const {
    std::set<std::string> out;
    for (const auto& e : fs::directory_iterator(bed.data_dir / "builds" / "envs")) {
      if (e.is_directory()) out.insert(e.path().filename().string());
    }
    return out;
  }
  catalog::JobRecord rebuild() {
    const auto job = bed.submit(bed.runner(), "demo", true);
    return bed.wait_terminal(job.id);
  }

  RunnerBed bed;
};

TEST_F(Environment, IsReusedWhileItsInputsStayTheSame) {
  ASSERT_EQ(bed.run_one().state, core::JobState::succeeded);
  const auto second = rebuild();
  ASSERT_EQ(second.state, core::JobState::succeeded);
  EXPECT_EQ(env_installs().size(), 1U);
  EXPECT_EQ(env_dirs().size(), 1U);
  const std::string dir = *env_dirs().begin();
  EXPECT_THAT(dir, ::testing::MatchesRegex("py3\\.12-torch2\\.8-cu130-[0-9a-f]{12}"));
  EXPECT_THAT(bed.log(second.id), HasSubstr("environment " + dir + " (reused)"));
  // The marker holds the inputs in full.
  std::ifstream marker(bed.data_dir / "builds" / "envs" / dir / ".ready");
  const std::string text((std::istreambuf_iterator<char>(marker)), {});
  EXPECT_THAT(text, HasSubstr("interpreter " + std::string(kPython)));
  EXPECT_THAT(text, HasSubstr("requirements setuptools wheel"));
  EXPECT_THAT(text, HasSubstr("index http://127.0.0.1:9/cu130/torch2.8/simple/"));
}

TEST_F(Environment, ChangedBuildRequirementsMakeANewEnvironment) {
  ASSERT_EQ(bed.run_one().state, core::JobState::succeeded);
  auto recipes = bed.config.recipes;
  recipes["demo"].recipe.build_requires = std::vector<std::string>{"setuptools", "cython>=3"};
  bed.runner().set_recipes(recipes);
  const auto second = rebuild();
  ASSERT_EQ(second.state, core::JobState::succeeded) << bed.log(second.id);
  const auto installs = env_installs();
  ASSERT_EQ(installs.size(), 2U);
  EXPECT_THAT(installs[0], ::testing::EndsWith("torch==2.8.* setuptools wheel"));
  EXPECT_THAT(installs[1], ::testing::EndsWith("torch==2.8.* setuptools cython>=3"));
  EXPECT_EQ(env_dirs().size(), 2U) << "the old environment is left in place";
  // The build ran in the new environment.
  const auto builds = bed.fake.commands_matching("fake-build");
  ASSERT_EQ(builds.size(), 2U);
  EXPECT_NE(builds[0].env_value("PATH"), builds[1].env_value("PATH"));
}

TEST_F(Environment, OtherIndexOrInterpreterMakeANewEnvironment) {
  ASSERT_EQ(bed.run_one().state, core::JobState::succeeded);
  bed.runner().set_server_url("http://127.0.0.1:10");
  ASSERT_EQ(rebuild().state, core::JobState::succeeded);
  EXPECT_EQ(env_dirs().size(), 2U);
}

TEST_F(Environment, EmptyBuildRequirementsInstallOnlyTorch) {
  bed.config.recipes["demo"].recipe.build_requires = std::vector<std::string>{};
  ASSERT_EQ(bed.run_one().state, core::JobState::succeeded);
  const auto installs = env_installs();
  ASSERT_EQ(installs.size(), 1U);
  EXPECT_THAT(installs[0], ::testing::EndsWith("/simple/ torch==2.8.*"));
  EXPECT_TRUE(bed.fake.commands_matching("command -v ninja").empty())
      << "ninja is looked up only for the default requirements";
}

TEST_F(Environment, DefaultRequirementsIncludeNinjaWhenTheHostHasNone) {
  RunnerBed other("no-ninja");
  HostScript host;
  host.ninja_on_path = false;
  script_host(other.fake, host);
  script_build(other.fake);
  ASSERT_EQ(other.run_one().state, core::JobState::succeeded);
  const auto installs = other.fake.commands_matching("-m pip install --index-url");
  ASSERT_FALSE(installs.empty());
  EXPECT_THAT(installs[0].line(), ::testing::EndsWith("torch==2.8.* setuptools wheel ninja"));
  // The look-up uses the build's PATH (the toolkit's bin, then the system's).
  const auto probe = other.fake.commands_matching("command -v ninja");
  ASSERT_EQ(probe.size(), 1U);
  EXPECT_EQ(probe[0].env_value("PATH"),
            std::string(kCudaHome) + "/bin:/usr/local/bin:/usr/bin:/bin");
}

TEST_F(Environment, SystemTorchInstallsNoTorchAndLinksTheInterpretersPackages) {
  bed.config.host.system_torch = true;
  bed.config.recipes["demo"].recipe.build_requires = std::vector<std::string>{};
  const auto job = bed.run_one();
  ASSERT_EQ(job.state, core::JobState::succeeded) << bed.log(job.id);
  EXPECT_TRUE(bed.fake.commands_matching("torch==").empty());
  EXPECT_EQ(bed.fake.commands_matching("_wheelforge_system.pth").size(), 2U)
      << "the build environment and the smoke test's";
  const auto build = bed.fake.commands_matching("fake-build");
  ASSERT_EQ(build.size(), 1U);
  EXPECT_THAT(build[0].env_value("PATH").value_or(""),
              HasSubstr("/bin:/opt/wf-test/python3.12/bin:" + std::string(kCudaHome) + "/bin"));
}

TEST_F(Environment, SystemTorchDefaultsInstallOnlyWhatTheInterpreterLacks) {
  RunnerBed other("system-defaults");
  other.config.host.system_torch = true;
  // The interpreter has setuptools but not wheel; ninja is on the PATH.
  other.fake.on("sys.exit(1) setuptools",
                Outcome::prints("/opt/wf-test/python3.12/lib/python3.12/site-packages/setuptools/"
                                "__init__.py\n"));
  other.fake.on("sys.exit(1) wheel", Outcome::exit(1));
  script_host(other.fake);
  script_build(other.fake);
  const auto job = other.run_one();
  ASSERT_EQ(job.state, core::JobState::succeeded) << other.log(job.id);
  const auto installs = other.fake.commands_matching("-m pip install --index-url");
  ASSERT_EQ(installs.size(), 1U) << "the smoke test installs no torch either";
  EXPECT_THAT(installs[0].line(), ::testing::EndsWith("/simple/ wheel"));
  EXPECT_THAT(other.log(job.id),
              HasSubstr("==> [preparing] setuptools: /opt/wf-test/python3.12/lib/python3.12/"
                        "site-packages/setuptools/__init__.py (already there; not installed)"));
  // Without system_torch the environment cannot see the interpreter's packages: no probe.
  EXPECT_TRUE(bed.fake.commands_matching("find_spec").empty());
}

TEST_F(Environment, FailedPreparationIsNotReused) {
  bed.fake.on("-m pip install --index-url",
              Outcome::exit(1, "ERROR: No matching distribution found for wheel\n"), 1);
  const auto first = bed.run_one();
  ASSERT_EQ(first.state, core::JobState::failed);
  ASSERT_TRUE(bed.runner().retry(first.id));
  const auto second = bed.wait_until(first.id, [](const catalog::JobRecord& j) {
    return j.state == core::JobState::succeeded || j.state == core::JobState::failed;
  });
  EXPECT_EQ(second.state, core::JobState::succeeded) << bed.log(first.id);
  EXPECT_EQ(env_installs().size(), 2U);
}

}  // namespace
}  // namespace wf::build::testing
