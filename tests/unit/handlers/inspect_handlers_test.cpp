// The wheel inspector through the route table: GET /api/files/<sha256>/contents and the page
// /inspect/<sha256>, over a real catalog and blob store (a wheel uploaded first); unknown
// digests, malformed ones and sdists are 404; the JSON is cached with an ETag.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "handlers/handler_bed.hpp"
#include "wheelforge/crypto/digest.hpp"

namespace wf::handlers {
namespace {

using testing::body_of;
using testing::HandlerBed;
using testing::make_request;
using testing::wheel_name;
using Json = nlohmann::json;

class InspectHandlers : public ::testing::Test {
 protected:
  InspectHandlers() : h("inspect-handlers"), demo(h.wheel("demo-pkg", "1.0")) {}

  HandlerBed h;
  std::string demo;
};

TEST_F(InspectHandlers, ContentsOfAStoredWheel) {
  ASSERT_EQ(h.put(wheel_name("demo-pkg", "1.0"), demo, h.upload).status, 201);
  const std::string sha = crypto::sha256_hex(demo);
  const auto r = h.respond(Method::get, "/api/files/" + sha + "/contents");
  ASSERT_EQ(r.status, 200) << body_of(r);
  EXPECT_EQ(r.header("content-type"), "application/json");
  const Json doc = Json::parse(body_of(r));
  EXPECT_EQ(doc["filename"], wheel_name("demo-pkg", "1.0"));
  EXPECT_EQ(doc["sha256"], sha);
  EXPECT_EQ(doc["members_truncated"], false);
  EXPECT_EQ(doc["members_total"], doc["members"].size());
  bool metadata = false;
  for (const auto& m : doc["members"]) {
    if (m["name"] == "demo_pkg-1.0.dist-info/METADATA") metadata = m["size"].get<int>() > 0;
  }
  EXPECT_TRUE(metadata) << doc["members"].dump();
  EXPECT_TRUE(doc["binaries"].empty());  // a pure-Python wheel
  ASSERT_TRUE(doc["summary"].is_object());
  EXPECT_EQ(doc["summary"]["torch_binding"], "none");

  const std::string etag(r.header("etag"));
  ASSERT_FALSE(etag.empty());
  const auto again =
      h.respond(Method::get, "/api/files/" + sha + "/contents", {{"if-none-match", etag}});
  EXPECT_EQ(again.status, 304);

  const auto page = h.respond(Method::get, "/inspect/" + sha);
  ASSERT_EQ(page.status, 200) << body_of(page);
  const std::string html = body_of(page);
  EXPECT_NE(html.find(wheel_name("demo-pkg", "1.0")), std::string::npos);
  EXPECT_NE(html.find("This wheel has no ELF binaries."), std::string::npos);
  EXPECT_NE(html.find("demo_pkg-1.0.dist-info/RECORD"), std::string::npos);
}

TEST_F(InspectHandlers, UnknownMalformedAndWrongMethod) {
  const std::string unknown(64, 'a');
  for (const std::string& target :
       {"/api/files/" + unknown + "/contents", std::string("/api/files/xyz/contents"),
        "/api/files/" + std::string(64, 'A') + "/contents"}) {
    const auto r = h.respond(Method::get, target);
    EXPECT_EQ(r.status, 404) << target << ": " << body_of(r);
  }
  EXPECT_EQ(h.respond(Method::get, "/inspect/" + unknown).status, 404);
  EXPECT_EQ(h.respond(Method::get, "/inspect/nothex").status, 404);
  const auto post = h.respond(Method::post, "/api/files/" + unknown + "/contents");
  EXPECT_EQ(post.status, 405);
}

}  // namespace
}  // namespace wf::handlers
