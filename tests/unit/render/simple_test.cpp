#include "wheelforge/render/simple.hpp"

#include <gtest/gtest.h>
#include <zlib.h>

#include <array>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace wf::render {
namespace {

using core::FileRecord;
using core::PageFormat;
using nlohmann::json;

const std::string kSha(64, 'a');
const std::string kMetaSha(64, 'b');
// 2023-11-14T22:13:20.123456Z
constexpr Micros kUploadTime = 1'700'000'000'123'456;

FileRecord make_file(std::string filename) {
  FileRecord f;
  f.id = 1;
  f.filename = std::move(filename);
  f.project = "flash-attn";
  f.version = "2.8.3+cu128torch2.8";
  f.sha256 = kSha;
  f.size = 123456789;
  f.upload_time = kUploadTime;
  f.requires_python = ">=3.8,<4";
  f.metadata_sha256 = kMetaSha;
  f.metadata_size = 2048;
  return f;
}

std::string gunzip(std::string_view gz) {
  z_stream zs{};
  EXPECT_EQ(inflateInit2(&zs, 15 + 16), Z_OK);
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(gz.data()));
  zs.avail_in = static_cast<uInt>(gz.size());
  std::string out;
  std::array<char, 4096> buf{};
  int rc = Z_OK;
  while (rc == Z_OK) {
    zs.next_out = reinterpret_cast<Bytef*>(buf.data());
    zs.avail_out = static_cast<uInt>(buf.size());
    rc = inflate(&zs, Z_NO_FLUSH);
    out.append(buf.data(), buf.size() - zs.avail_out);
  }
  EXPECT_EQ(rc, Z_STREAM_END);
  EXPECT_EQ(zs.avail_in, 0U) << "trailing bytes after the gzip member";
  inflateEnd(&zs);
  return out;
}

bool contains(const std::string& haystack, std::string_view needle) {
  return haystack.find(needle) != std::string::npos;
}

class ProjectPageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    plain_ = make_file("flash_attn-2.8.3+cu128torch2.8-cp312-cp312-linux_x86_64.whl");
    yanked_reason_ = make_file("flash_attn-2.8.2-cp312-cp312-linux_x86_64.whl");
    yanked_reason_.yanked = "broken <build> & \"bad\" ABI";
    yanked_empty_ = make_file("flash_attn-2.8.1-cp312-cp312-linux_x86_64.whl");
    yanked_empty_.yanked = "";
    bare_ = make_file("flash_attn-2.8.0.tar.gz");
    bare_.requires_python.reset();
    bare_.metadata_sha256.clear();
    bare_.metadata_size = 0;

    page_.name = "flash-attn";
    page_.versions = {"2.8.0", "2.8.1", "2.8.2", "2.8.3+cu128torch2.8"};
    page_.files = {&plain_, &yanked_reason_, &yanked_empty_, &bare_};
  }

  FileRecord plain_, yanked_reason_, yanked_empty_, bare_;
  ProjectPage page_;
};

TEST(FileUrl, PercentEncodesLocalVersionPlus) {
  const FileRecord f = make_file("torch_x-1.0+cu128-cp312-cp312-linux_x86_64.whl");
  EXPECT_EQ(file_url(f), "/files/" + kSha + "/torch_x-1.0%2Bcu128-cp312-cp312-linux_x86_64.whl");
}

TEST_F(ProjectPageTest, HtmlExactAnchors) {
  const std::string html = render_project(PageFormat::html_legacy, page_);
  const std::string meta = " data-core-metadata=\"sha256=" + kMetaSha +
                           "\" data-dist-info-metadata=\"sha256=" + kMetaSha + "\"";
  const std::string rp = " data-requires-python=\"&gt;=3.8,&lt;4\"";
  const std::string files = "<a href=\"/files/" + kSha + "/";

  const std::string expected =
      "<!DOCTYPE html>\n"
      "<html><head><meta name=\"pypi:repository-version\" content=\"1.1\">"
      "<title>Links for flash-attn</title></head><body><h1>Links for flash-attn</h1>\n" +
      files + "flash_attn-2.8.3%2Bcu128torch2.8-cp312-cp312-linux_x86_64.whl#sha256=" + kSha +
      "\"" + rp + meta + ">flash_attn-2.8.3+cu128torch2.8-cp312-cp312-linux_x86_64.whl</a><br/>\n" +
      files + "flash_attn-2.8.2-cp312-cp312-linux_x86_64.whl#sha256=" + kSha + "\"" + rp + meta +
      " data-yanked=\"broken &lt;build&gt; &amp; &quot;bad&quot; ABI\">"
      "flash_attn-2.8.2-cp312-cp312-linux_x86_64.whl</a><br/>\n" +
      files + "flash_attn-2.8.1-cp312-cp312-linux_x86_64.whl#sha256=" + kSha + "\"" + rp + meta +
      " data-yanked=\"\">flash_attn-2.8.1-cp312-cp312-linux_x86_64.whl</a><br/>\n" + files +
      "flash_attn-2.8.0.tar.gz#sha256=" + kSha + "\">flash_attn-2.8.0.tar.gz</a><br/>\n" +
      "</body></html>\n";
  EXPECT_EQ(html, expected);
}

TEST_F(ProjectPageTest, HtmlFlavoursAreIdentical) {
  EXPECT_EQ(render_project(PageFormat::html_legacy, page_),
            render_project(PageFormat::html_v1, page_));
}

TEST_F(ProjectPageTest, HtmlOmitsAbsentAttributes) {
  page_.files = {&bare_};
  const std::string html = render_project(PageFormat::html_v1, page_);
  EXPECT_FALSE(contains(html, "data-core-metadata"));
  EXPECT_FALSE(contains(html, "data-dist-info-metadata"));
  EXPECT_FALSE(contains(html, "data-requires-python"));
  EXPECT_FALSE(contains(html, "data-yanked"));
  EXPECT_TRUE(contains(html, "#sha256=" + kSha + "\">flash_attn-2.8.0.tar.gz</a>"));
}

TEST_F(ProjectPageTest, JsonFieldByField) {
  const json doc = json::parse(render_project(PageFormat::json_v1, page_));
  EXPECT_EQ(doc.at("meta"), json({{"api-version", "1.1"}}));
  EXPECT_EQ(doc.at("name"), "flash-attn");
  EXPECT_EQ(doc.at("versions"), json::array({"2.8.0", "2.8.1", "2.8.2", "2.8.3+cu128torch2.8"}));
  ASSERT_EQ(doc.at("files").size(), 4U);

  const json& f = doc.at("files").at(0);
  EXPECT_EQ(f.at("filename"), plain_.filename);
  EXPECT_EQ(f.at("url"),
            "/files/" + kSha + "/flash_attn-2.8.3%2Bcu128torch2.8-cp312-cp312-linux_x86_64.whl");
  EXPECT_EQ(f.at("hashes"), json({{"sha256", kSha}}));
  EXPECT_EQ(f.at("requires-python"), ">=3.8,<4");
  EXPECT_EQ(f.at("core-metadata"), json({{"sha256", kMetaSha}}));
  EXPECT_FALSE(f.contains("dist-info-metadata"));
  EXPECT_EQ(f.at("yanked"), false);
  EXPECT_EQ(f.at("size"), 123456789U);
  EXPECT_EQ(f.at("upload-time"), "2023-11-14T22:13:20.123456Z");
  EXPECT_EQ(f.size(), 8U) << f.dump();
}

TEST_F(ProjectPageTest, JsonYankedVariants) {
  const json doc = json::parse(render_project(PageFormat::json_v1, page_));
  const json& files = doc.at("files");
  EXPECT_EQ(files.at(0).at("yanked"), false);
  EXPECT_EQ(files.at(1).at("yanked"), "broken <build> & \"bad\" ABI");
  EXPECT_EQ(files.at(2).at("yanked"), true);
  EXPECT_EQ(files.at(3).at("yanked"), false);
}

TEST_F(ProjectPageTest, JsonAbsentFields) {
  const json doc = json::parse(render_project(PageFormat::json_v1, page_));
  const json& f = doc.at("files").at(3);
  EXPECT_FALSE(f.contains("requires-python"));
  EXPECT_EQ(f.at("core-metadata"), false);
  EXPECT_FALSE(f.contains("dist-info-metadata"));
  EXPECT_FALSE(contains(render_project(PageFormat::json_v1, page_), "dist-info-metadata"));
}

TEST_F(ProjectPageTest, JsonExactBytes) {
  page_.versions = {"2.8.0"};
  page_.files = {&bare_};
  EXPECT_EQ(render_project(PageFormat::json_v1, page_),
            R"({"meta":{"api-version":"1.1"},"name":"flash-attn","versions":["2.8.0"],)"
            R"("files":[{"filename":"flash_attn-2.8.0.tar.gz","url":"/files/)" +
                kSha + R"(/flash_attn-2.8.0.tar.gz","hashes":{"sha256":")" + kSha +
                R"("},"core-metadata":false,"yanked":false,"size":123456789,)"
                R"("upload-time":"2023-11-14T22:13:20.123456Z"}]})");
}

TEST_F(ProjectPageTest, JsonUploadTimeKeepsLeadingZeroMicros) {
  plain_.upload_time = 1'700'000'000'000'042;
  page_.files = {&plain_};
  const json doc = json::parse(render_project(PageFormat::json_v1, page_));
  EXPECT_EQ(doc.at("files").at(0).at("upload-time"), "2023-11-14T22:13:20.000042Z");
}

TEST_F(ProjectPageTest, JsonReplacesInvalidUtf8InsteadOfThrowing) {
  yanked_reason_.yanked = std::string("bad \xff byte");
  page_.files = {&yanked_reason_};
  std::string out;
  ASSERT_NO_THROW(out = render_project(PageFormat::json_v1, page_));
  const json doc = json::parse(out);
  EXPECT_EQ(doc.at("files").at(0).at("yanked"), "bad \xEF\xBF\xBD byte");
}

TEST_F(ProjectPageTest, JsonEscapesQuotesControlsAndKeepsUtf8) {
  yanked_reason_.yanked = std::string("caf\xC3\xA9 \"x\"\\\n");
  page_.files = {&yanked_reason_};
  const std::string out = render_project(PageFormat::json_v1, page_);
  EXPECT_TRUE(contains(out, "\"yanked\":\"caf\xC3\xA9 \\\"x\\\"\\\\\\n\"")) << out;
  EXPECT_EQ(json::parse(out).at("files").at(0).at("yanked"), *yanked_reason_.yanked);
}

const std::string kProvenanceUrl =
    "/integrity/flash-attn/2.8.3%2Bcu128torch2.8/"
    "flash_attn-2.8.3%2Bcu128torch2.8-cp312-cp312-linux_x86_64.whl/provenance";

TEST(ProvenanceUrl, IntegrityPathPercentEncodedOrEmpty) {
  FileRecord f = make_file("flash_attn-2.8.3+cu128torch2.8-cp312-cp312-linux_x86_64.whl");
  EXPECT_EQ(provenance_url(f), "");
  f.provenance_sha256 = std::string(64, 'c');
  f.provenance_size = 700;
  EXPECT_EQ(provenance_url(f), kProvenanceUrl);
  // An upstream's file never has one.
  f.upstream = "pypi";
  EXPECT_EQ(provenance_url(f), "");
}

TEST_F(ProjectPageTest, HtmlProvenanceAttributeOnlyWhereThereIsOne) {
  plain_.provenance_sha256 = std::string(64, 'c');
  plain_.provenance_size = 700;
  page_.files = {&plain_, &bare_};
  const std::string html = render_project(PageFormat::html_v1, page_);
  const std::string meta = " data-core-metadata=\"sha256=" + kMetaSha +
                           "\" data-dist-info-metadata=\"sha256=" + kMetaSha + "\"";
  EXPECT_TRUE(contains(html, "<a href=\"/files/" + kSha +
                                 "/flash_attn-2.8.3%2Bcu128torch2.8-cp312-cp312-linux_x86_64.whl"
                                 "#sha256=" +
                                 kSha + "\" data-requires-python=\"&gt;=3.8,&lt;4\"" + meta +
                                 " data-provenance=\"" + kProvenanceUrl +
                                 "\">flash_attn-2.8.3+cu128torch2.8-cp312-cp312-linux_x86_64.whl"
                                 "</a><br/>\n"))
      << html;
  EXPECT_TRUE(contains(html, "#sha256=" + kSha + "\">flash_attn-2.8.0.tar.gz</a>")) << html;
  EXPECT_EQ(html.find("data-provenance"), html.rfind("data-provenance")) << html;
  EXPECT_EQ(html, render_project(PageFormat::html_legacy, page_));
  // An upstream's file is listed without one, whatever its record says.
  plain_.upstream = "pypi";
  EXPECT_FALSE(contains(render_project(PageFormat::html_v1, page_), "data-provenance"));
}

TEST_F(ProjectPageTest, JsonProvenanceKeyOnlyWhereThereIsOne) {
  yanked_reason_.provenance_sha256 = std::string(64, 'c');
  yanked_reason_.provenance_size = 700;
  yanked_reason_.filename = plain_.filename;
  const std::string out = render_project(PageFormat::json_v1, page_);
  const json doc = json::parse(out);
  const json& files = doc.at("files");
  EXPECT_FALSE(files.at(0).contains("provenance"));
  EXPECT_EQ(files.at(1).at("provenance"), kProvenanceUrl);
  EXPECT_EQ(files.at(1).size(), 9U) << files.at(1).dump();
  EXPECT_FALSE(files.at(2).contains("provenance"));
  EXPECT_FALSE(files.at(3).contains("provenance"));
  // The key comes last, after the fields every file has.
  EXPECT_TRUE(contains(out, R"(,"upload-time":"2023-11-14T22:13:20.123456Z","provenance":")" +
                                kProvenanceUrl + "\"}"))
      << out;
  yanked_reason_.upstream = "pypi";
  EXPECT_FALSE(contains(render_project(PageFormat::json_v1, page_), "provenance"));
}

TEST(ProjectPage, NoFiles) {
  ProjectPage page;
  page.name = "empty-project";
  EXPECT_EQ(render_project(PageFormat::html_legacy, page),
            "<!DOCTYPE html>\n"
            "<html><head><meta name=\"pypi:repository-version\" content=\"1.1\">"
            "<title>Links for empty-project</title></head><body>"
            "<h1>Links for empty-project</h1>\n</body></html>\n");
  const json doc = json::parse(render_project(PageFormat::json_v1, page));
  EXPECT_EQ(doc.at("name"), "empty-project");
  EXPECT_EQ(doc.at("versions"), json::array());
  EXPECT_EQ(doc.at("files"), json::array());
}

TEST(RootPage, HtmlDefaultPrefix) {
  const std::vector<std::string> names = {"flash-attn", "torch-scatter"};
  EXPECT_EQ(render_root(PageFormat::html_legacy, names, "/simple/"),
            "<!DOCTYPE html>\n"
            "<html><head><meta name=\"pypi:repository-version\" content=\"1.1\">"
            "<title>Simple index</title></head><body><h1>Simple index</h1>\n"
            "<a href=\"/simple/flash-attn/\">flash-attn</a><br/>\n"
            "<a href=\"/simple/torch-scatter/\">torch-scatter</a><br/>\n"
            "</body></html>\n");
}

TEST(RootPage, HtmlVariantPrefix) {
  const std::vector<std::string> names = {"flash-attn"};
  const std::string html = render_root(PageFormat::html_v1, names, "/cu128/torch2.8/simple/");
  EXPECT_TRUE(
      contains(html, "<a href=\"/cu128/torch2.8/simple/flash-attn/\">flash-attn</a><br/>\n"));
  EXPECT_EQ(html, render_root(PageFormat::html_legacy, names, "/cu128/torch2.8/simple/"));
}

TEST(RootPage, Json) {
  const std::vector<std::string> names = {"flash-attn", "torch-scatter"};
  const std::string out = render_root(PageFormat::json_v1, names, "/simple/");
  EXPECT_EQ(out, R"({"meta":{"api-version":"1.1"},"projects":[{"name":"flash-attn"},)"
                 R"({"name":"torch-scatter"}]})");
}

TEST(RootPage, Empty) {
  const std::vector<std::string> none;
  const std::string html = render_root(PageFormat::html_legacy, none, "/simple/");
  EXPECT_TRUE(contains(html, "<h1>Simple index</h1>\n</body></html>\n"));
  EXPECT_FALSE(contains(html, "<a "));
  EXPECT_EQ(render_root(PageFormat::json_v1, none, "/simple/"),
            R"({"meta":{"api-version":"1.1"},"projects":[]})");
}

TEST(Gzip, RoundTrip) {
  std::string text;
  for (int i = 0; i < 5000; ++i)
    text += "<a href=\"/files/x\">line " + std::to_string(i) + "</a>\n";
  const std::string gz = gzip(text);
  ASSERT_GE(gz.size(), 18U);
  EXPECT_EQ(static_cast<unsigned char>(gz[0]), 0x1FU);
  EXPECT_EQ(static_cast<unsigned char>(gz[1]), 0x8BU);
  EXPECT_EQ(gz[2], '\x08') << "deflate method";
  EXPECT_LT(gz.size(), text.size() / 4);
  EXPECT_EQ(gunzip(gz), text);
}

TEST(Gzip, EveryLevelAndBinaryBytes) {
  std::string bytes;
  for (int i = 0; i < 70000; ++i) bytes.push_back(static_cast<char>((i * 7919) & 0xFF));
  for (int level = 1; level <= 9; ++level) EXPECT_EQ(gunzip(gzip(bytes, level)), bytes) << level;
}

TEST(Gzip, EmptyInputAndOutOfRangeLevel) {
  EXPECT_EQ(gunzip(gzip("")), "");
  EXPECT_EQ(gunzip(gzip("abc", 0)), "abc");
  EXPECT_EQ(gunzip(gzip("abc", 42)), "abc");
}

}  // namespace
}  // namespace wf::render
