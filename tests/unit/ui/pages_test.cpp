#include "wheelforge/ui/pages.hpp"

#include <gtest/gtest.h>

#include "wheelforge/core/variant.hpp"
#include "wheelforge/ui/assets.hpp"

namespace wf::ui {
namespace {

core::FileRecord wheel(const std::string& version, const std::string& python,
                       const std::string& abi = "") {
  core::FileRecord f;
  f.project = "flash-attn";
  f.version = version;
  const auto plus = version.find('+');
  f.filename = "flash_attn-" + version + "-" + python + "-" + (abi.empty() ? python : abi) +
               "-linux_x86_64.whl";
  f.sha256 = std::string(64, 'a');
  f.size = 2048;
  f.tags = core::WheelTags{std::nullopt, python, abi.empty() ? python : abi, "linux_x86_64",
                           std::nullopt};
  if (plus != std::string::npos) f.hints = core::parse_local_label(version.substr(plus + 1));
  return f;
}

std::shared_ptr<const snapshot::Snapshot> corpus(std::optional<std::string> yank_reason) {
  catalog::Contents c;
  c.generation = 3;
  c.projects.push_back(core::ProjectRecord{"flash-attn", "flash_attn", 1, {}});
  c.files.push_back(wheel("2.8.3+cu128torch2.8", "cp311"));
  c.files.push_back(wheel("2.8.3+cu128torch2.8", "cp312"));
  c.files.push_back(wheel("2.8.3+cu126torch2.7", "cp39", "abi3"));
  c.files.push_back(wheel("2.8.2+cu128torch2.8", "cp312"));
  c.files.back().yanked = yank_reason;
  c.files.back().requires_python = ">=3.9<script>";
  for (std::size_t i = 0; i < c.files.size(); ++i) {
    c.files[i].id = static_cast<std::int64_t>(i + 1);
    c.files[i].sha256 = std::string(63, 'a') + static_cast<char>('0' + i);
  }
  return snapshot::Snapshot::build(std::move(c));
}

TEST(UiCoverage, RowsAreTorchColumnsBackendsCellsPythons) {
  auto snap = corpus(std::nullopt);
  const auto files = snap->files_of("flash-attn");
  const Coverage c = coverage_of(files, "2.8.3");
  EXPECT_EQ(c.torch, (std::vector<std::string>{"2.7", "2.8"}));
  EXPECT_EQ(c.backends, (std::vector<std::string>{"cu126", "cu128"}));
  ASSERT_EQ(c.cells.size(), 2U);
  EXPECT_EQ(c.cells[0][0].pythons, (std::vector<std::string>{"3.9+"}));
  EXPECT_TRUE(c.cells[0][1].pythons.empty());
  EXPECT_TRUE(c.cells[1][0].pythons.empty());
  EXPECT_EQ(c.cells[1][1].pythons, (std::vector<std::string>{"3.11", "3.12"}));
  EXPECT_TRUE(c.generic.empty());
}

TEST(UiCoverage, PythonVersionsOfTags) {
  EXPECT_EQ(python_versions_of(wheel("1.0", "cp310")), (std::vector<std::string>{"3.10"}));
  EXPECT_EQ(python_versions_of(wheel("1.0", "py3", "none")), (std::vector<std::string>{"3"}));
  EXPECT_EQ(python_versions_of(wheel("1.0", "cp38", "abi3")), (std::vector<std::string>{"3.8+"}));
  EXPECT_EQ(python_versions_of(wheel("1.0", "pp39", "pypy39_pp73")),
            (std::vector<std::string>{"pp39"}));
}

TEST(UiPages, HostileValuesAreEscaped) {
  auto snap = corpus(std::string("<script>alert(1)</script>\"'"));
  const Site site{"http://h", "", false, "", false};
  const auto html = render_project(*snap, site, "flash-attn", Selection{"2.8.2", "", "", ""});
  ASSERT_TRUE(html);
  EXPECT_EQ(html->find("<script>alert"), std::string::npos);
  EXPECT_NE(html->find("&lt;script&gt;alert(1)&lt;/script&gt;&quot;&apos;"), std::string::npos);
  EXPECT_EQ(html->find(">=3.9<script>"), std::string::npos);
  const auto home = render_home(*snap, site, "<img src=x onerror=alert(1)>");
  EXPECT_EQ(home.find("<img src=x"), std::string::npos);
  const auto message = render_message(site, 404, "<b>", "<i>");
  EXPECT_EQ(message.find("<b>"), std::string::npos);
  EXPECT_EQ(message.find("<i>"), std::string::npos);
}

TEST(UiPages, PickerGivesTheViewCommandOrSaysNothingFits) {
  auto snap = corpus(std::nullopt);
  const Site site{"https://idx.example", "", false, "", false};
  const auto ok = render_project(*snap, site, "flash-attn", Selection{"", "2.8", "cu128", "3.12"});
  ASSERT_TRUE(ok);
  EXPECT_NE(ok->find("python3.12 -m pip install --extra-index-url "
                     "https://idx.example/cu128/torch2.8/simple/ --only-binary flash-attn "
                     "flash-attn==2.8.3"),
            std::string::npos);
  EXPECT_NE(ok->find("uv pip install --python 3.12 --extra-index-url "
                     "https://idx.example/cu128/torch2.8/simple/ --only-binary flash-attn "
                     "flash-attn==2.8.3"),
            std::string::npos);
  // Once chosen, no default command.
  EXPECT_EQ(ok->find("default-command"), std::string::npos);
  // abi3 wheels fit every later Python.
  const auto abi3 =
      render_project(*snap, site, "flash-attn", Selection{"", "2.7", "cu126", "3.12"});
  ASSERT_TRUE(abi3);
  EXPECT_NE(abi3->find("/cu126/torch2.7/simple/ --only-binary flash-attn flash-attn==2.8.3"),
            std::string::npos);
  // The cu128 view falls back to a lower CUDA minor of the same major, as pip would see it.
  const auto fallback =
      render_project(*snap, site, "flash-attn", Selection{"", "2.7", "cu128", "3.11"});
  ASSERT_TRUE(fallback);
  EXPECT_NE(fallback->find("flash_attn-2.8.3+cu126torch2.7-cp39-abi3"), std::string::npos);
  // Never a higher minor: nothing fits.
  const auto none =
      render_project(*snap, site, "flash-attn", Selection{"", "2.8", "cu126", "3.12"});
  ASSERT_TRUE(none);
  EXPECT_NE(none->find("No build of flash-attn 2.8.3 for torch 2.8, CUDA 12.6, Python 3.12"),
            std::string::npos);
  EXPECT_FALSE(render_project(*snap, site, "nope", Selection{}));
}

TEST(UiPages, DefaultCommandAndTorchHintBeforeAChoice) {
  auto snap = corpus(std::nullopt);
  const Site site{"https://idx.example", "", false, "", false};
  const auto html = render_project(*snap, site, "flash-attn", Selection{});
  ASSERT_TRUE(html);
  // torch 2.8's PyPI wheels are CUDA 12.8, and 2.8.3 has a build for it.
  EXPECT_NE(html->find("flash-attn 2.8.3 built for PyTorch 2.8 from PyPI (CUDA 12.8)"),
            std::string::npos);
  EXPECT_NE(html->find(R"(<code id="default-command">pip install --extra-index-url )"
                       "https://idx.example/cu128/torch2.8/simple/ --only-binary flash-attn "
                       "flash-attn==2.8.3</code>"),
            std::string::npos);
  EXPECT_NE(
      html->find(R"x(python -c "import torch; print(torch.__version__, torch.version.cuda)")x"),
      std::string::npos);
  EXPECT_NE(html->find(R"(<code id="resolve-command">curl -sS &quot;https://idx.example/)"
                       "api/resolve?project=flash-attn&amp;"),
            std::string::npos);
  // The CUDA menu speaks torch.version.cuda.
  EXPECT_NE(html->find(">12.8 (cu128)</option>"), std::string::npos);
}

TEST(UiPages, DefaultCommandFallsBackToTheWidestCell) {
  catalog::Contents c;
  c.projects.push_back(core::ProjectRecord{"flash-attn", "flash_attn", 1, {}});
  // torch 2.9's PyPI CUDA is 12.8; only CUDA 13.0 builds exist, one of them for two Pythons.
  c.files.push_back(wheel("1.0+cu130torch2.9", "cp311"));
  c.files.push_back(wheel("1.0+cu130torch2.9", "cp312"));
  c.files.push_back(wheel("1.0+cu130torch2.8", "cp312"));
  for (std::size_t i = 0; i < c.files.size(); ++i) {
    c.files[i].id = static_cast<std::int64_t>(i + 1);
    c.files[i].sha256 = std::string(63, 'c') + static_cast<char>('0' + i);
  }
  auto snap = snapshot::Snapshot::build(std::move(c));
  const auto html =
      render_project(*snap, Site{"http://h", "", false, "", false}, "flash-attn", Selection{});
  ASSERT_TRUE(html);
  EXPECT_NE(html->find("flash-attn 1.0 built for torch 2.9, CUDA 13.0"), std::string::npos);
  EXPECT_NE(html->find("http://h/cu130/torch2.9/simple/ --only-binary flash-attn flash-attn==1.0"),
            std::string::npos);
}

TEST(UiPages, SdistOnlyVersionIsNotRefusedByOnlyBinary) {
  catalog::Contents c;
  c.projects.push_back(core::ProjectRecord{"plain", "plain", 1, {}});
  core::FileRecord sdist;
  sdist.id = 1;
  sdist.project = "plain";
  sdist.version = "1.0";
  sdist.kind = core::DistKind::sdist;
  sdist.filename = "plain-1.0.tar.gz";
  sdist.sha256 = std::string(64, 'd');
  c.files.push_back(sdist);
  core::FileRecord wheel_file = sdist;
  wheel_file.id = 2;
  wheel_file.version = "2.0";
  wheel_file.kind = core::DistKind::wheel;
  wheel_file.filename = "plain-2.0-py3-none-any.whl";
  wheel_file.sha256 = std::string(64, 'e');
  wheel_file.tags = core::WheelTags{std::nullopt, "py3", "none", "any", std::nullopt};
  c.files.push_back(wheel_file);
  auto snap = snapshot::Snapshot::build(std::move(c));
  const Site site{"http://h", "", false, "", false};
  const auto latest = render_project(*snap, site, "plain", Selection{});
  ASSERT_TRUE(latest);
  EXPECT_NE(latest->find("pip install --extra-index-url http://h/simple/ --only-binary plain "
                         "plain==2.0"),
            std::string::npos);
  const auto old = render_project(*snap, site, "plain", Selection{"1.0", "", "", ""});
  ASSERT_TRUE(old);
  EXPECT_NE(old->find("pip install --extra-index-url http://h/simple/ plain==1.0</code>"),
            std::string::npos);
  EXPECT_EQ(old->find("torch-hint"), std::string::npos) << "no torch hint without variants";
}

TEST(UiPages, FilesWithProvenanceLinkIt) {
  catalog::Contents c;
  c.generation = 3;
  c.projects.push_back(core::ProjectRecord{"flash-attn", "flash_attn", 1, {}});
  c.files.push_back(wheel("2.8.3+cu128torch2.8", "cp312"));
  c.files.back().id = 1;
  c.files.back().provenance_sha256 = std::string(64, 'c');
  c.files.back().provenance_size = 700;
  c.files.push_back(wheel("2.8.3+cu128torch2.8", "cp311"));
  c.files.back().id = 2;
  c.files.back().sha256 = std::string(64, 'b');
  auto snap = snapshot::Snapshot::build(std::move(c));
  const auto html =
      render_project(*snap, Site{"http://h", "", false, "", false}, "flash-attn", Selection{});
  ASSERT_TRUE(html);
  const std::string link =
      "<a href=\"/integrity/flash-attn/2.8.3%2Bcu128torch2.8/"
      "flash_attn-2.8.3%2Bcu128torch2.8-cp312-cp312-linux_x86_64.whl/provenance\" "
      "class=\"provenance-link\" aria-label=\"Provenance of "
      "flash_attn-2.8.3+cu128torch2.8-cp312-cp312-linux_x86_64.whl\">provenance</a>";
  EXPECT_NE(html->find(link), std::string::npos) << *html;
  // Only there: the other file came without attestations.
  EXPECT_EQ(html->find("provenance-link"), html->rfind("provenance-link"));
  EXPECT_EQ(html->find("Provenance of flash_attn-2.8.3+cu128torch2.8-cp311"), std::string::npos);
}

TEST(UiPages, HomeCommandsArePinnedAndPassTorchVersionCuda) {
  auto snap = corpus(std::nullopt);
  const auto home = render_home(*snap, Site{"http://h", "", false, "", false}, "");
  EXPECT_NE(home.find("pip install --extra-index-url http://h/simple/ --only-binary PROJECT "
                      "PROJECT==VERSION"),
            std::string::npos);
  EXPECT_NE(home.find("cuda=torch.version.cuda, hip=torch.version.hip"), std::string::npos);
  EXPECT_NE(home.find("poetry source add --priority=explicit wheelforge http://h/simple/"),
            std::string::npos);
  EXPECT_NE(home.find("poetry source add --secondary wheelforge http://h/simple/"),
            std::string::npos);
  EXPECT_EQ(resolve_command("http://h", "x"),
            "curl -sS \"http://h/api/resolve?project=x&$(python -c 'import torch, urllib.parse "
            "as p; print(p.urlencode(dict(torch=torch.__version__, cuda=torch.version.cuda, "
            "hip=torch.version.hip, abi=int(torch._C._GLIBCXX_USE_CXX11_ABI))))')\"");
}

TEST(UiPages, CanonicalSelectionDropsValuesOffTheAxes) {
  auto snap = corpus(std::nullopt);
  const auto s = canonical_selection(*snap, "flash-attn", Selection{"9.9", "2.8", "cu999", "3.12"});
  EXPECT_EQ(s.version, "");
  EXPECT_EQ(s.torch, "2.8");
  EXPECT_EQ(s.backend, "");
  EXPECT_EQ(s.python, "3.12");
}

TEST(UiAssets, TemplatesAndStaticFilesAreEmbedded) {
  for (const char* name : {"layout", "home", "project", "login", "message", "builds", "job"}) {
    EXPECT_FALSE(template_text(name).empty()) << name;
  }
  const StaticFile* css = find_static("style.css");
  ASSERT_NE(css, nullptr);
  EXPECT_EQ(css->content_type, "text/css; charset=utf-8");
  EXPECT_EQ(static_url("style.css"), "/static/" + css->hash + "/style.css");
  EXPECT_NE(find_static("job.js"), nullptr);
  EXPECT_EQ(find_static("../CMakeLists.txt"), nullptr);
}

TEST(UiFormat, SizesAndDurations) {
  EXPECT_EQ(human_size(512), "512 B");
  EXPECT_EQ(human_size(1536), "1.5 KiB");
  EXPECT_EQ(human_size(5ULL << 30U), "5.0 GiB");
  EXPECT_EQ(human_duration(3'200'000), "3.2 s");
  EXPECT_EQ(human_duration(65'000'000), "1 min 05 s");
}

}  // namespace
}  // namespace wf::ui

namespace wf::ui {
namespace {

TEST(UiJob, ShowsTheVerifiedToolchainOnceRecorded) {
  const Site site{"http://h", "token", true, "", false};
  JobPage page;
  page.job.id = 7;
  page.job.build_id = 3;
  page.job.recipe = "flash-attn";
  page.job.version = "2.8.3";
  page.job.cell = core::Cell{"3.12", {2, 8}, {12, 8}};
  page.job.state = core::JobState::building;
  const std::string before = render_job(site, page);
  EXPECT_EQ(before.find("<dt>nvcc</dt>"), std::string::npos);
  page.job.toolchain =
      catalog::Toolchain{"/usr/local/cuda-12.8/bin/nvcc", "12.8.93", "2.8.0+cu128", "12.8",
                         "/usr/bin/python3.12",           "3.12.1"};
  const std::string after = render_job(site, page);
  EXPECT_NE(after.find("/usr/local/cuda-12.8/bin/nvcc (12.8.93)"), std::string::npos) << after;
  EXPECT_NE(after.find("2.8.0+cu128 (CUDA 12.8)"), std::string::npos) << after;
  EXPECT_NE(after.find("/usr/bin/python3.12 (3.12.1)"), std::string::npos) << after;
}

TEST(UiJob, ShowsTheBuildNumberAndGlibcFloorOnceKnown) {
  const Site site{"http://h", "token", true, "", false};
  JobPage page;
  page.job.id = 8;
  page.job.build_id = 3;
  page.job.recipe = "flash-attn";
  page.job.version = "2.8.3";
  page.job.cell = core::Cell{"3.12", {2, 8}, {12, 8}};
  page.job.state = core::JobState::testing;
  page.job.glibc_floor = "2.34";
  const std::string testing = render_job(site, page);
  EXPECT_EQ(testing.find("<dt>Build number</dt>"), std::string::npos) << "nothing published yet";
  EXPECT_NE(testing.find("<dt>glibc floor</dt><dd>2.34</dd>"), std::string::npos) << testing;
  page.job.state = core::JobState::succeeded;
  page.job.wheel = "flash_attn-2.8.3+cu128torch2.8-1-cp312-cp312-manylinux_2_34_x86_64.whl";
  page.job.build_number = 1;
  const std::string done = render_job(site, page);
  EXPECT_NE(done.find("<dt>Build number</dt><dd>1 (build tag -1-)</dd>"), std::string::npos)
      << done;
  page.job.build_number = 0;
  EXPECT_NE(render_job(site, page).find("<dd>0 (the first build of its file name)</dd>"),
            std::string::npos);
}

}  // namespace
}  // namespace wf::ui
