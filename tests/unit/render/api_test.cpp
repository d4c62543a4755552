#include "wheelforge/render/api.hpp"

#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "wheelforge/core/filename.hpp"

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
  EXPECT_EQ(pip_install_args("http://h/cu128/torch2.9/simple/", "flash-attn", "2.8.3", false),
            "--extra-index-url http://h/cu128/torch2.9/simple/ --only-binary flash-attn "
            "flash-attn==2.8.3");
}

TEST(RenderApi, AnIndexServingEveryNameIsNamedAlone) {
  EXPECT_EQ(pip_install_args("http://h/cu128/torch2.9/simple/", "flash-attn", "2.8.3", true),
            "--index-url http://h/cu128/torch2.9/simple/ --only-binary flash-attn "
            "flash-attn==2.8.3");
  Resolution r = resolution();
  r.project = "flash-attn";
  r.version = "2.8.3";
  r.sole_index = true;
  const std::string out = render_resolution(r);
  EXPECT_NE(out.find("--index-url http://idx:8080/cu128/torch2.9/simple/"), std::string::npos)
      << out;
  EXPECT_EQ(out.find("--extra-index-url"), std::string::npos) << out;
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

core::FileRecord wheel_file(std::string filename, std::string version, Micros uploaded) {
  core::FileRecord f;
  auto name = core::parse_dist_filename(filename);
  EXPECT_TRUE(name) << filename;
  f.filename = std::move(filename);
  f.project = "kern";
  f.version = std::move(version);
  f.sha256 = std::string(64, 'a');
  f.upload_time = uploaded;
  if (name) f.tags = name->tags;
  f.hints = core::parse_local_label(name ? name->version.local_str() : "");
  return f;
}

TEST(RenderApi, VariantsShowBuildNumbersGlibcAndTheCurrentBuildOfEachCell) {
  std::vector<core::FileRecord> files = {
      wheel_file(
          "kern-1.0+cu128torch2.8-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
          "1.0+cu128torch2.8", 1),
      wheel_file(
          "kern-1.0+cu128torch2.8-1-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
          "1.0+cu128torch2.8", 2),
      wheel_file(
          "kern-1.0+cu128torch2.8-2-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
          "1.0+cu128torch2.8", 3),
      wheel_file("kern-1.0+cu128torch2.8-cp311-cp311-linux_x86_64.whl", "1.0+cu128torch2.8", 4),
  };
  files[2].yanked = "broken";  // build 2 is yanked: build 1 is the current one
  VersionFiles v{"1.0", {}};
  for (const auto& f : files) v.files.push_back(&f);
  const json doc = json::parse(render_variants("kern", std::vector<VersionFiles>{v}));
  const json& out = doc["versions"][0]["files"];
  ASSERT_EQ(out.size(), 4U);
  EXPECT_EQ(out[0]["build"], 0);
  EXPECT_TRUE(out[0]["build_tag"].is_null());
  EXPECT_EQ(out[0]["glibc"], "2.17");
  EXPECT_EQ(out[0]["superseded_by"], files[1].filename);
  EXPECT_EQ(out[1]["build"], 1);
  EXPECT_EQ(out[1]["build_tag"], "1");
  EXPECT_TRUE(out[1]["superseded_by"].is_null());
  EXPECT_EQ(out[2]["build"], 2);
  EXPECT_EQ(out[2]["superseded_by"], files[1].filename) << "a yanked build is not current";
  EXPECT_TRUE(out[3]["glibc"].is_null()) << "linux_x86_64 promises no glibc";
  ASSERT_EQ(doc["matrix"].size(), 1U);
  const json& cell = doc["matrix"][0];
  EXPECT_EQ(cell["python"], (json{"cp311", "cp312"}));
  ASSERT_EQ(cell["builds"].size(), 2U);
  std::map<std::string, json> by_python;
  for (const auto& b : cell["builds"]) by_python[b["python"][0]] = b;
  EXPECT_EQ(by_python["cp312"]["filename"], files[1].filename);
  EXPECT_EQ(by_python["cp312"]["build"], 1);
  EXPECT_EQ(by_python["cp312"]["glibc"], "2.17");
  EXPECT_EQ(by_python["cp311"]["build"], 0);
  EXPECT_TRUE(by_python["cp311"]["glibc"].is_null());

  // Unyanked, build 2 is the current one.
  files[2].yanked.reset();
  const json again = json::parse(render_variants("kern", std::vector<VersionFiles>{v}));
  EXPECT_EQ(again["versions"][0]["files"][1]["superseded_by"], files[2].filename);
  for (const auto& b : again["matrix"][0]["builds"]) {
    if (b["python"][0] == "cp312") {
      EXPECT_EQ(b["build"], 2);
    }
  }
}

}  // namespace
}  // namespace wf::render
