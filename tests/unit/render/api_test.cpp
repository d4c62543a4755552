#include "wheelforge/render/api.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace wf::render {
namespace {

using nlohmann::json;

core::ViewSelector selector(std::initializer_list<std::string_view> segments) {
  const std::vector<std::string_view> parts(segments);
  auto v = core::parse_view_selector(parts);
  EXPECT_TRUE(v);
  return v ? *v : core::ViewSelector{};
}

Resolution resolution() {
  Resolution r;
  r.torch = "2.9.0";
  r.selector = selector({"cu128", "torch2.9"});
  r.backend_source = "cuda";
  r.base_url = "http://idx:8080";
  return r;
}

TEST(RenderApi, PipArgumentsPinAndRefuseSdists) {
  EXPECT_EQ(pip_install_args("http://h/cu128/torch2.9/simple/", "flash-attn", "2.8.3"),
            "--extra-index-url http://h/cu128/torch2.9/simple/ --only-binary flash-attn "
            "flash-attn==2.8.3");
}

TEST(RenderApi, ResolutionWithProjectPinsTheVersion) {
  Resolution r = resolution();
  r.project = "flash-attn";
  r.version = "2.8.3";
  const json j = json::parse(render_resolution(r));
  EXPECT_EQ(j["view"], "/cu128/torch2.9/simple/");
  EXPECT_EQ(j["index_url"], "http://idx:8080/cu128/torch2.9/simple/");
  EXPECT_EQ(j["series"], "2.9");
  EXPECT_EQ(j["backend"], "cu128");
  EXPECT_EQ(j["backend_source"], "cuda");
  EXPECT_EQ(j["cuda"], "12.8");
  EXPECT_TRUE(j["rocm"].is_null());
  EXPECT_TRUE(j["cxx11_abi"].is_null());
  EXPECT_EQ(j["project"], "flash-attn");
  EXPECT_EQ(j["version"], "2.8.3");
  EXPECT_EQ(j["requirement"], "flash-attn==2.8.3");
  EXPECT_EQ(j["pip"],
            "pip install --extra-index-url http://idx:8080/cu128/torch2.9/simple/ "
            "--only-binary flash-attn flash-attn==2.8.3");
  EXPECT_EQ(j["uv"],
            "uv pip install --extra-index-url http://idx:8080/cu128/torch2.9/simple/ "
            "--only-binary flash-attn flash-attn==2.8.3");
  EXPECT_TRUE(j["notes"].is_array() && j["notes"].empty());
}

TEST(RenderApi, ResolutionWithoutProjectHasPlaceholders) {
  Resolution r = resolution();
  r.selector = selector({"torch2.14"});
  r.backend_source = "unknown";
  r.notes.emplace_back("a note");
  const json j = json::parse(render_resolution(r));
  EXPECT_EQ(j["view"], "/torch2.14/simple/");
  EXPECT_TRUE(j["backend"].is_null());
  EXPECT_TRUE(j["project"].is_null());
  EXPECT_TRUE(j["version"].is_null());
  EXPECT_EQ(j["pip"],
            "pip install --extra-index-url http://idx:8080/torch2.14/simple/ --only-binary "
            "PROJECT PROJECT==VERSION");
  EXPECT_EQ(j["notes"], json::array({"a note"}));
}

TEST(RenderApi, NoBuildListsTheNearestCells) {
  Resolution r = resolution();
  r.selector = selector({"cu126", "torch2.9", "cxx11abi1"});
  r.project = "flash-attn";
  std::vector<NearbyBuilds> nearest(2);
  nearest[0].view = selector({"cu128", "torch2.9"});
  nearest[0].versions = {"2.8.3", "2.8.2"};
  nearest[0].python = {"cp311", "cp312"};
  nearest[1].view = selector({"rocm6.4", "torch2.9", "cxx11abi1"});
  nearest[1].versions = {"2.8.3"};
  nearest[1].python = {"cp312"};
  const json j = json::parse(render_no_build(r, "no build \"here\"", nearest));
  EXPECT_EQ(j["error"], "no build \"here\"");
  EXPECT_EQ(j["view"], "/cu126/torch2.9/cxx11abi1/simple/");
  EXPECT_EQ(j["cxx11_abi"], true);
  EXPECT_FALSE(j.contains("pip")) << "no command for a view without a build";
  ASSERT_EQ(j["nearest"].size(), 2U);
  EXPECT_EQ(j["nearest"][0]["view"], "/cu128/torch2.9/simple/");
  EXPECT_EQ(j["nearest"][0]["index_url"], "http://idx:8080/cu128/torch2.9/simple/");
  EXPECT_EQ(j["nearest"][0]["torch"], "2.9");
  EXPECT_EQ(j["nearest"][0]["backend"], "cu128");
  EXPECT_TRUE(j["nearest"][0]["cxx11_abi"].is_null());
  EXPECT_EQ(j["nearest"][0]["versions"], json::array({"2.8.3", "2.8.2"}));
  EXPECT_EQ(j["nearest"][0]["python"], json::array({"cp311", "cp312"}));
  EXPECT_EQ(j["nearest"][1]["backend"], "rocm6.4");
  EXPECT_EQ(j["nearest"][1]["cxx11_abi"], true);
}

TEST(RenderApi, ErrorsAreJson) {
  const json j = json::parse(render_api_error("no such project: \"x\"\n"));
  EXPECT_EQ(j, json({{"error", "no such project: \"x\"\n"}}));
}

TEST(RenderApi, StoredFileKeepsItsFieldOrderAndEscapes) {
  core::FileRecord f;
  f.filename = "demo-1.0+cu128-py3-none-any.whl";
  f.project = "demo";
  f.version = "1.0+cu128";
  f.sha256 = std::string(64, 'a');
  f.size = 42;
  EXPECT_EQ(
      render_stored_file(f),
      R"({"filename":"demo-1.0+cu128-py3-none-any.whl","project":"demo","version":"1.0+cu128",)"
      R"("sha256":")" +
          std::string(64, 'a') + R"(","size":42,"url":"/files/)" + std::string(64, 'a') +
          "/demo-1.0%2Bcu128-py3-none-any.whl\"}\n");
  f.filename = "a\"b\x01.whl";
  EXPECT_EQ(json::parse(render_stored_file(f))["filename"], "a\"b\x01.whl");
}

TEST(RenderApi, AdminAnswers) {
  const std::vector<std::string> names = {"a-1.0-py3-none-any.whl", "a-1.0.tar.gz"};
  EXPECT_EQ(render_file_names("yanked", names),
            "{\"yanked\":[\"a-1.0-py3-none-any.whl\",\"a-1.0.tar.gz\"]}\n");
  EXPECT_EQ(render_file_names("deleted", {}), "{\"deleted\":[]}\n");
  EXPECT_EQ(render_claim("flash-attn", "token 3"),
            "{\"project\":\"flash-attn\",\"claim\":\"token 3\"}\n");
}

}  // namespace
}  // namespace wf::render
