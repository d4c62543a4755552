// A release's PEP 825 variants.json in the snapshot: made from its variant wheels that are not
// yanked, linked with its sha256 from the project pages of /simple/ and of the views that list
// a variant wheel of the release.

#include <gtest/gtest.h>

#include "wheelforge/crypto/digest.hpp"
#include "wheelforge/snapshot/snapshot.hpp"

namespace wf::snapshot {
namespace {

core::FileRecord variant_file(const std::string& version, const std::string& label,
                              const std::string& bound, char sha) {
  core::FileRecord f;
  f.project = "demo-pkg";
  f.version = version;
  f.filename = "demo_pkg-" + version + "-cp312-cp312-linux_x86_64-" + label + ".whl";
  f.sha256 = std::string(64, sha);
  f.size = 10;
  f.tags = core::WheelTags{std::nullopt, "cp312", "cp312", "linux_x86_64", label};
  core::WheelVariant v;
  v.label = label;
  v.schema = "https://variants-schema.wheelnext.dev/v0.0.3.json";
  v.priorities = R"({"namespace":["nvidia"]})";
  v.properties["nvidia"]["cuda_version_lower_bound"] = {bound};
  f.variant = v;
  f.hints.backend = core::Backend::cuda;
  f.hints.cuda_major = std::stoi(bound.substr(0, 2));
  f.hints.cuda_minor = std::stoi(bound.substr(3));
  f.hints.torch = core::TorchSeries{2, 8};
  return f;
}

catalog::Contents release(std::vector<core::FileRecord> files) {
  catalog::Contents c;
  c.generation = 1;
  c.projects.push_back(core::ProjectRecord{"demo-pkg", "demo-pkg", 1, {}});
  c.files = std::move(files);
  return c;
}

TEST(VariantsJson, ServedAndLinkedWithItsHash) {
  core::FileRecord plain;
  plain.project = "demo-pkg";
  plain.version = "1.0";
  plain.filename = "demo_pkg-1.0-py3-none-any.whl";
  plain.sha256 = std::string(64, 'p');
  plain.tags = core::WheelTags{std::nullopt, "py3", "none", "any", std::nullopt};
  auto s = Snapshot::build(release({variant_file("1.0", "cu128", "12.8", 'a'),
                                    variant_file("1.0", "cu126", "12.6", 'b'), plain}));
  auto doc = s->variants_json("demo-pkg", "demo_pkg-1.0-variants.json");
  ASSERT_NE(doc, nullptr);
  EXPECT_NE(doc->body.find("\"cu128\""), std::string::npos);
  EXPECT_NE(doc->body.find("\"cu126\""), std::string::npos);
  EXPECT_NE(doc->body.find("\"12.8\""), std::string::npos);
  const std::string sha = crypto::sha256_hex(doc->body);

  const std::string page = s->project_page("demo-pkg", core::PageFormat::json_v1)->body;
  EXPECT_NE(
      page.find(
          R"({"filename":"demo_pkg-1.0-variants.json","url":"demo_pkg-1.0-variants.json","hashes":{"sha256":")" +
          sha + R"("},"yanked":false,"size":)" + std::to_string(doc->body.size()) + "}]}"),
      std::string::npos)
      << page;
  const std::string html = s->project_page("demo-pkg", core::PageFormat::html_v1)->body;
  EXPECT_NE(html.find("href=\"demo_pkg-1.0-variants.json#sha256=" + sha + "\""), std::string::npos);

  // A view that lists one of the variant wheels links the same document; one that lists none
  // of them does not.
  core::ViewSelector cu128;
  cu128.backend = core::Backend::cuda;
  cu128.cuda_major = 12;
  cu128.cuda_minor = 8;
  cu128.torch = core::TorchSeries{2, 8};
  const std::string in_view =
      s->view_project_page(cu128, "demo-pkg", core::PageFormat::json_v1)->body;
  EXPECT_NE(in_view.find(sha), std::string::npos);
  core::ViewSelector cpu;
  cpu.backend = core::Backend::cpu;
  const std::string cpu_view =
      s->view_project_page(cpu, "demo-pkg", core::PageFormat::json_v1)->body;
  EXPECT_EQ(cpu_view.find("variants.json"), std::string::npos);

  EXPECT_EQ(s->variants_json("demo-pkg", "demo_pkg-2.0-variants.json"), nullptr);
  EXPECT_EQ(s->variants_json("demo-pkg", "demo_pkg-1.0.whl"), nullptr);
  EXPECT_EQ(s->variants_json("other", "demo_pkg-1.0-variants.json"), nullptr);
}

TEST(VariantsJson, YankedVariantsLeaveTheDocument) {
  auto cu126 = variant_file("1.0", "cu126", "12.6", 'b');
  cu126.yanked = "broken";
  auto s = Snapshot::build(release({variant_file("1.0", "cu128", "12.8", 'a'), cu126}));
  const std::string body = s->variants_json("demo-pkg", "demo_pkg-1.0-variants.json")->body;
  EXPECT_NE(body.find("\"cu128\""), std::string::npos);
  EXPECT_EQ(body.find("\"cu126\""), std::string::npos);

  auto only_yanked = variant_file("1.0", "cu128", "12.8", 'a');
  only_yanked.yanked = "";
  auto none = Snapshot::build(release({only_yanked}));
  EXPECT_EQ(none->variants_json("demo-pkg", "demo_pkg-1.0-variants.json"), nullptr);
  EXPECT_EQ(none->project_page("demo-pkg", core::PageFormat::json_v1)->body.find("variants.json"),
            std::string::npos);
}

}  // namespace
}  // namespace wf::snapshot
