#include "wheelforge/render/builds.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace wf::render {
namespace {

using Json = nlohmann::json;

catalog::JobRecord job() {
  catalog::JobRecord j;
  j.id = 7;
  j.build_id = 3;
  j.recipe = "flash-attn";
  j.version = "2.8.3";
  j.cell = core::Cell{"3.12", {2, 8}, {12, 8}};
  j.state = core::JobState::failed;
  j.reason = "torch 2.8.0+cu130 was built for CUDA 13.0, the cell is CUDA 12.8";
  return j;
}

TEST(RenderBuilds, JobToolchainIsNullUntilVerified) {
  const Json j = Json::parse(render_job(job()));
  EXPECT_EQ(j["toolchain"], (Json{{"nvcc", nullptr}, {"torch", nullptr}, {"python", nullptr}}));
  EXPECT_EQ(j["reason"], "torch 2.8.0+cu130 was built for CUDA 13.0, the cell is CUDA 12.8");
}

TEST(RenderBuilds, JobNamesItsBatchJob) {
  EXPECT_EQ(Json::parse(render_job(job()))["executor_job"], "");
  catalog::JobRecord j = job();
  j.executor_job = "4711";
  EXPECT_EQ(Json::parse(render_job(j))["executor_job"], "4711");
}

TEST(RenderBuilds, JobNamesTheContainerOfItsBuild) {
  EXPECT_TRUE(Json::parse(render_job(job()))["container"].is_null());
  catalog::JobRecord j = job();
  j.provenance = {"builder:cuda13.0", "sha256:abc", "podman run --rm builder:cuda13.0 sh"};
  const Json c = Json::parse(render_job(j))["container"];
  EXPECT_EQ(c["image"], "builder:cuda13.0");
  EXPECT_EQ(c["digest"], "sha256:abc");
  EXPECT_EQ(c["command"], "podman run --rm builder:cuda13.0 sh");
  j.provenance.image_digest.clear();
  EXPECT_TRUE(Json::parse(render_job(j))["container"]["digest"].is_null());
}

TEST(RenderBuilds, JobToolchainNamesEachTool) {
  catalog::JobRecord j = job();
  j.toolchain =
      catalog::Toolchain{"/usr/local/cuda-12.8/bin/nvcc", "12.8.93", "2.8.0+cu130", "13.0",
                         "/usr/bin/python3.12",           "3.12.1"};
  const Json out = Json::parse(render_job(j));
  EXPECT_EQ(out["toolchain"]["nvcc"],
            (Json{{"path", "/usr/local/cuda-12.8/bin/nvcc"}, {"version", "12.8.93"}}));
  EXPECT_EQ(out["toolchain"]["torch"], (Json{{"version", "2.8.0+cu130"}, {"cuda", "13.0"}}));
  EXPECT_EQ(out["toolchain"]["python"],
            (Json{{"path", "/usr/bin/python3.12"}, {"version", "3.12.1"}}));
  // Only nvcc verified (the job failed at the torch check's probe): the rest stays null.
  j.toolchain = catalog::Toolchain{"/usr/local/cuda/bin/nvcc", "13.0.88", "", "", "", ""};
  const Json partial = Json::parse(render_job(j));
  EXPECT_TRUE(partial["toolchain"]["torch"].is_null());
  EXPECT_TRUE(partial["toolchain"]["python"].is_null());
  EXPECT_EQ(partial["toolchain"]["nvcc"]["version"], "13.0.88");
}

TEST(BuildRequestJson, DecodesEveryField) {
  auto r = parse_build_request(
      R"({"recipe": " flash-attn ", "version": "2.8.3", "force": true,
          "matrix": {"python": ["3.12"], "torch": ["2.8", "2.9"], "cuda": ["12.8"]}})");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->recipe, "flash-attn");
  EXPECT_EQ(r->version, "2.8.3");
  EXPECT_TRUE(r->force);
  ASSERT_TRUE(r->subset);
  EXPECT_EQ(r->subset->python, std::vector<std::string>{"3.12"});
  EXPECT_EQ(r->subset->torch.size(), 2U);
  EXPECT_EQ(r->subset->cuda.size(), 1U);
  // An empty matrix selects the whole recipe, as no matrix does.
  r = parse_build_request(R"({"recipe": "x", "version": "1.0", "matrix": {"torch": []}})");
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->subset);
}

TEST(BuildRequestJson, NamesEveryProblemTogether) {
  EXPECT_EQ(parse_build_request("[1]").error().message, "the body must be a JSON object");
  EXPECT_EQ(parse_build_request("{").error().message, "the body must be a JSON object");
  const auto r = parse_build_request(
      R"({"recipe": 7, "force": "yes", "extra": 1,
          "matrix": {"python": ["3"], "torch": ["two"], "cuda": [12.8], "rocm": []}})");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Errc::invalid);
  const std::string& m = r.error().message;
  for (const char* problem :
       {"\"recipe\" must be a string", "\"force\" must be true or false", "unknown field 'extra'",
        "matrix.cuda must contain strings", "matrix: unknown axis 'rocm'", "missing version",
        "python '3' is not X.Y like 3.12", "torch 'two' is not a series like 2.8"}) {
    EXPECT_NE(m.find(problem), std::string::npos) << problem << " not in: " << m;
  }
  // A mistyped recipe is reported once, not as missing as well.
  EXPECT_EQ(m.find("missing recipe"), std::string::npos) << m;
}

TEST(RenderBuilds, JobShowsItsBuildNumberAndGlibcFloor) {
  catalog::JobRecord j = job();
  const Json before = Json::parse(render_job(j));
  EXPECT_TRUE(before["build_number"].is_null()) << "nothing published yet";
  EXPECT_TRUE(before["glibc_floor"].is_null());
  j.state = core::JobState::succeeded;
  j.wheel = "flash_attn-2.8.3+cu128torch2.8-2-cp312-cp312-manylinux_2_34_x86_64.whl";
  j.build_number = 2;
  j.glibc_floor = "2.34";
  const Json after = Json::parse(render_job(j));
  EXPECT_EQ(after["build_number"], 2);
  EXPECT_EQ(after["glibc_floor"], "2.34");
  EXPECT_EQ(after["wheel"], j.wheel);
  j.build_number = 0;
  EXPECT_EQ(Json::parse(render_job(j))["build_number"], 0) << "the first build";
}

TEST(RenderBuilds, BuildShowsYankSuperseded) {
  catalog::BuildRecord b;
  b.id = 3;
  b.recipe = "flash-attn";
  b.version = "2.8.3";
  b.force = true;
  b.yank_superseded = true;
  const Json out = Json::parse(render_build(b, {}));
  EXPECT_EQ(out["build"]["force"], true);
  EXPECT_EQ(out["build"]["yank_superseded"], true);
}

TEST(RenderBuilds, RequestTakesYankSuperseded) {
  auto absent = parse_build_request(R"({"recipe": "fa", "version": "1.0"})");
  ASSERT_TRUE(absent) << absent.error().message;
  EXPECT_EQ(absent->yank_superseded, std::nullopt);
  EXPECT_FALSE(absent->force);
  auto given = parse_build_request(
      R"({"recipe": "fa", "version": "1.0", "force": true, "yank_superseded": false})");
  ASSERT_TRUE(given) << given.error().message;
  EXPECT_EQ(given->yank_superseded, false);
  EXPECT_TRUE(given->force);
  auto bad = parse_build_request(R"({"recipe": "fa", "version": "1.0", "yank_superseded": "yes"})");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("\"yank_superseded\" must be true or false"),
            std::string::npos)
      << bad.error().message;
}

}  // namespace
}  // namespace wf::render
