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

}  // namespace
}  // namespace wf::render
