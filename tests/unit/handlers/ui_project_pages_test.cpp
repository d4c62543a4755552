// The web UI's project pages through the route table: the description from METADATA (and
// nothing executable out of it), the project list with its refusals, the "did you mean" 404,
// the navigation's signed-in state and the empty index's first steps.

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "build/runner_bed.hpp"
#include "handlers/handler_bed.hpp"
#include "wheelforge/snapshot/snapshot.hpp"

namespace wf::handlers {
namespace {

using testing::basic;
using testing::body_of;
using testing::HandlerBed;
using testing::Headers;
using testing::wheel_name;

bool has(const std::string& s, std::string_view part) {
  return s.find(part) != std::string::npos;
}

class UiProjectPages : public ::testing::Test {
 protected:
  UiProjectPages() : h("ui-project-pages") {}

  /// Uploads a pure wheel of `project` whose METADATA is `headers` (after Name and Version)
  /// and `body` (the description, after a blank line).
  void upload(const std::string& project, const std::string& version, const std::string& headers,
              const std::string& body = {}) {
    std::string dist = project;
    std::replace(dist.begin(), dist.end(), '-', '_');
    const std::string metadata = "Metadata-Version: 2.1\nName: " + project +
                                 "\nVersion: " + version + "\n" + headers +
                                 (body.empty() ? "" : "\n" + body);
    const auto path = build::testing::write_wheel_with(
        h.bed.data_dir / "custom", project, version, "py3-none-any",
        {{dist + "/__init__.py", "X = 1\n"},
         {dist + "-" + version + ".dist-info/METADATA", metadata}});
    std::ifstream in(path, std::ios::binary);
    std::stringstream bytes;
    bytes << in.rdbuf();
    ASSERT_EQ(h.put(path.filename().string(), bytes.str(), h.upload).status, 201) << project;
  }
  Response get(const std::string& target, const std::string& token = {}) {
    Headers headers;
    if (!token.empty()) headers.emplace_back("authorization", basic(token));
    return h.respond(Method::get, target, std::move(headers));
  }

  HandlerBed h;
};

TEST_F(UiProjectPages, ProjectPageShowsTheMetadataAndTheMarkdownDescription) {
  upload("desc-pkg", "1.0",
         "Summary: Fast kernels <b>bold</b>\nLicense-Expression: MIT\nRequires-Python: >=3.9\n"
         "Author: Ada\nAuthor-email: ada@example.com\n"
         "Project-URL: Source, https://example.com/src\nProject-URL: Evil, javascript:alert(1)\n"
         "Requires-Dist: torch>=2.4\nClassifier: Programming Language :: Python :: 3\n"
         "Description-Content-Type: text/markdown\n",
         "# Usage\n\nCall **it**.\n\n<script>alert(1)</script>\n\n[x](javascript:alert(2))\n");
  const auto r = get("/project/desc-pkg/");
  ASSERT_EQ(r.status, 200);
  const std::string page = body_of(r);
  EXPECT_TRUE(
      has(page, "<p class=\"summary\" id=\"summary\">Fast kernels &lt;b&gt;bold&lt;/b&gt;</p>"))
      << page;
  EXPECT_TRUE(has(page, "<dd id=\"license\">MIT</dd>"));
  EXPECT_TRUE(has(page, "<code>&gt;=3.9</code>"));
  EXPECT_TRUE(has(page, "Ada &lt;ada@example.com&gt;"));
  EXPECT_TRUE(has(page, "href=\"https://example.com/src\""));
  EXPECT_TRUE(has(page, "<code>torch&gt;=2.4</code>"));
  EXPECT_TRUE(has(page, "Programming Language :: Python :: 3"));
  EXPECT_TRUE(has(page, "<h3>Usage</h3>"));
  EXPECT_TRUE(has(page, "<strong>it</strong>"));
  // Nothing executable: raw HTML omitted, javascript: neither linked nor in a link.
  EXPECT_FALSE(has(page, "<script>alert"));
  EXPECT_FALSE(has(page, "href=\"javascript:"));
  EXPECT_TRUE(has(page, "Evil: <code>javascript:alert(1)</code>"));
}

TEST_F(UiProjectPages, RestructuredTextAndUntypedDescriptionsArePreformatted) {
  upload("rst-pkg", "1.0", "Description-Content-Type: text/x-rst\n",
         "Title\n=====\n\n.. raw:: html\n\n   <script>alert(1)</script>\n");
  upload("bare-pkg", "1.0", "Summary: no type\n", "<img src=x onerror=alert(1)>\n");
  for (const std::string name : {"rst-pkg", "bare-pkg"}) {
    const std::string page = body_of(get("/project/" + name + "/"));
    EXPECT_TRUE(has(page, "<pre class=\"description-text\">")) << name;
    EXPECT_FALSE(has(page, "<script>alert")) << name;
    EXPECT_FALSE(has(page, "<img src=x")) << name;
  }
  EXPECT_TRUE(has(body_of(get("/project/rst-pkg/")), "Title\n=====\n"));
}

TEST_F(UiProjectPages, TheRenderedDescriptionIsKeptPerFile) {
  upload("desc-pkg", "1.0", "Description-Content-Type: text/markdown\n", "Hello *there*\n");
  const auto snap = h.snapshot();
  const auto files = snap->files_of("desc-pkg");
  ASSERT_EQ(files.size(), 1U);
  int made = 0;
  const auto first = snap->file_derived(*files[0], "k", [&] { return std::to_string(++made); });
  const auto again = snap->file_derived(*files[0], "k", [&] { return std::to_string(++made); });
  EXPECT_EQ(made, 1);
  EXPECT_EQ(first, again);
  // Another upload elsewhere gives a new snapshot that shares this project's data and cache.
  upload("other-pkg", "1.0", "");
  const auto next = snapshot::Snapshot::update(*snap, "other-pkg", [&] {
    catalog::Contents c;
    auto p = h.snapshot();
    for (const auto* pr : p->projects()) c.projects.push_back(*pr);
    for (const auto* f : p->files_of("other-pkg")) c.files.push_back(*f);
    return c;
  }());
  const auto shared = next->file_derived(*next->files_of("desc-pkg")[0], "k",
                                         [&] { return std::to_string(++made); });
  EXPECT_EQ(made, 1);
  EXPECT_EQ(*shared, "1");
  // A record that is not the snapshot's own is made each time and not kept.
  core::FileRecord stranger = *files[0];
  (void)snap->file_derived(stranger, "k", [&] { return std::to_string(++made); });
  (void)snap->file_derived(stranger, "k", [&] { return std::to_string(++made); });
  EXPECT_EQ(made, 3);
}

TEST_F(UiProjectPages, ProjectListSortsSearchesAndPages) {
  for (int i = 0; i < 53; ++i) upload("proj-" + std::to_string(100 + i), "1.0", "");
  upload("zeta-kernels", "1.0", "");
  auto r = get("/projects/");
  ASSERT_EQ(r.status, 200);
  std::string page = body_of(r);
  EXPECT_TRUE(has(page, "54 projects, 1–50 shown")) << page;
  EXPECT_TRUE(has(page, "href=\"/project/proj-100/\""));
  EXPECT_FALSE(has(page, "href=\"/project/zeta-kernels/\""));  // on page 2 by name
  EXPECT_TRUE(has(page, "Page 1 of 2"));
  EXPECT_TRUE(has(page, "href=\"/projects/?page=2\""));
  page = body_of(get("/projects/?page=2"));
  EXPECT_TRUE(has(page, "href=\"/project/zeta-kernels/\""));
  EXPECT_TRUE(has(page, "rel=\"prev\""));
  // Newest upload first.
  page = body_of(get("/projects/?sort=updated"));
  EXPECT_LT(page.find("/project/zeta-kernels/"), page.find("/project/proj-152/"));
  EXPECT_LT(page.find("/project/proj-152/"), page.find("/project/proj-151/"));
  // Searching by any spelling.
  page = body_of(get("/projects/?q=Zeta_Kernels"));
  EXPECT_TRUE(has(page, "1 project."));
  EXPECT_TRUE(has(page, "/project/zeta-kernels/"));
  EXPECT_TRUE(has(body_of(get("/projects/?q=nothing-like-it")), "No projects match."));
  // A page past the end is the last one.
  EXPECT_TRUE(has(body_of(get("/projects/?page=99")), "Page 2 of 2"));
}

TEST_F(UiProjectPages, ProjectListRefusalsAndRedirects) {
  upload("demo-pkg", "1.0", "");
  EXPECT_EQ(get("/projects/?sort=size").status, 400);
  EXPECT_TRUE(has(body_of(get("/projects/?sort=size")), "sort must be name or updated"));
  EXPECT_EQ(get("/projects/?page=0").status, 400);
  EXPECT_EQ(get("/projects/?page=two").status, 400);
  auto r = get("/projects?sort=updated");
  EXPECT_EQ(r.status, 301);
  EXPECT_EQ(r.header("Location"), "/projects/?sort=updated");
  EXPECT_EQ(get("/projects/more").status, 404);
  EXPECT_EQ(h.respond(Method::post, "/projects/").status, 405);
  h.env.private_reads = true;
  EXPECT_EQ(get("/projects/").status, 401);
  EXPECT_EQ(get("/projects/", h.read).status, 200);
}

TEST_F(UiProjectPages, ProjectsWithoutFilesAreNotListed) {
  upload("kept-pkg", "1.0", "");
  upload("gone-pkg", "1.0", "");
  ASSERT_EQ(h.respond(Method::del, "/admin/files/" + wheel_name("gone-pkg", "1.0"),
                      {{"authorization", basic(h.admin)}})
                .status,
            200);
  const std::string page = body_of(get("/projects/"));
  EXPECT_TRUE(has(page, "/project/kept-pkg/"));
  EXPECT_FALSE(has(page, "/project/gone-pkg/"));
  EXPECT_TRUE(has(page, "1 project."));
}

TEST_F(UiProjectPages, UnknownProjectSuggestsCloseNames) {
  upload("flash-attn", "2.8.3", "");
  upload("xformers", "0.0.30", "");
  auto r = get("/project/flash-atn/");
  EXPECT_EQ(r.status, 404);
  std::string page = body_of(r);
  EXPECT_TRUE(has(page, "There is no project named flash-atn on this index.")) << page;
  EXPECT_TRUE(has(page, "Did you mean <a href=\"/project/flash-attn/\">flash-attn</a>?")) << page;
  page = body_of(get("/project/completely-different/"));
  EXPECT_FALSE(has(page, "Did you mean"));
}

TEST_F(UiProjectPages, NavigationShowsTheSignedInState) {
  upload("demo-pkg", "1.0", "");
  for (const std::string target : {"/", "/projects/", "/project/demo-pkg/", "/builds/"}) {
    const std::string admin = body_of(get(target, h.admin));
    EXPECT_TRUE(has(admin, "Signed in: admin token (HTTP auth)")) << target;
    EXPECT_FALSE(has(admin, ">Log in</a>")) << target;
  }
  for (const std::string target : {"/", "/projects/", "/project/demo-pkg/"}) {
    const std::string anonymous = body_of(get(target));
    EXPECT_TRUE(has(anonymous, ">Log in</a>")) << target;
    EXPECT_FALSE(has(anonymous, "Signed in")) << target;
    EXPECT_TRUE(has(body_of(get(target, h.read)), "Signed in: read token (HTTP auth)")) << target;
  }
  // A login session: the log-out button with the session's own form token.
  const std::string id = h.sessions.create(h.upload);
  const auto r = h.respond(Method::get, "/project/demo-pkg/", {{"cookie", "wf_session=" + id}});
  const std::string page = body_of(r);
  EXPECT_TRUE(has(page, "Signed in: upload token<"));
  EXPECT_TRUE(has(page, h.sessions.form_token("session:" + id)));
  EXPECT_TRUE(has(page, ">Log out</button>"));
}

TEST_F(UiProjectPages, AnEmptyIndexSaysHowToUploadTheFirstWheel) {
  std::string page = body_of(get("/"));
  EXPECT_TRUE(has(page, "Upload your first wheel")) << page;
  EXPECT_TRUE(has(page, "wheelforge token create --data-dir"));
  EXPECT_TRUE(has(page, "/legacy/ -u __token__"));
  upload("demo-pkg", "1.0", "");
  page = body_of(get("/"));
  EXPECT_FALSE(has(page, "Upload your first wheel"));
  EXPECT_TRUE(has(page, "href=\"/projects/\""));
}

}  // namespace
}  // namespace wf::handlers
