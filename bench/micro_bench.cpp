// Google Benchmark micro-benchmarks of the hot pure functions: PEP 503 name normalization,
// PEP 440 parsing and ordering, local-label parsing, view selection, and the rendering (and
// gzip) of a variant-heavy project page shaped like bench/gen_corpus.py's flash-attn, and the
// route table's lookup (once per request), and a snapshot's update for one project's change
// against the whole catalog indexed.

#include <benchmark/benchmark.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "wheelforge/core/filename.hpp"
#include "wheelforge/core/name.hpp"
#include "wheelforge/core/negotiate.hpp"
#include "wheelforge/core/records.hpp"
#include "wheelforge/core/variant.hpp"
#include "wheelforge/core/version.hpp"
#include "wheelforge/handlers/routes.hpp"
#include "wheelforge/render/simple.hpp"
#include "wheelforge/snapshot/snapshot.hpp"

namespace {

using wf::core::Version;

constexpr std::array<std::string_view, 8> kNames = {
    "flash-attn",        "Flash_Attn",
    "zope.interface",    "ruamel.yaml.clib",
    "typing_extensions", "Django-REST--framework",
    "xformers",          "nvidia-cuda-runtime-cu12"};

constexpr std::array<std::string_view, 10> kVersions = {"2.8.3+cu128torch2.8",
                                                        "1.0",
                                                        "1.0rc1",
                                                        "2024.1.post3.dev2",
                                                        "v2.8.3+CU128_torch2.8",
                                                        "1!2.0.0b3",
                                                        "0.0.28.post1",
                                                        "2.10.0+cu130sm89torch2.10.0",
                                                        "3.1.4",
                                                        "1.26.4"};

constexpr std::array<std::string_view, 8> kLabels = {
    "cu128torch2.8",    "cu121torch2.5cxx11abiFALSE",
    "cpu.cxx11.abi",    "cu130sm89torch2.10.0",
    "rocm6.4.torch2.8", "cu12.torch28",
    "pt28cu126",        "git.1a2b3c4.20250101"};

void BM_NormalizeName(benchmark::State& state) {
  std::size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(wf::core::normalize_name(kNames[i++ % kNames.size()]));
  }
}
BENCHMARK(BM_NormalizeName);

void BM_VersionParse(benchmark::State& state) {
  std::size_t i = 0;
  for (auto _ : state) {
    auto v = Version::parse(kVersions[i++ % kVersions.size()]);
    benchmark::DoNotOptimize(v);
  }
}
BENCHMARK(BM_VersionParse);

std::vector<Version> corpus_versions(std::size_t n) {
  std::mt19937 rng(440);
  std::vector<Version> out;
  out.reserve(n);
  constexpr std::array<std::string_view, 5> kLocal = {"", "+cu118torch2.5", "+cu128torch2.8",
                                                      "+cpu", "+cu126torch2.7"};
  for (std::size_t i = 0; i < n; ++i) {
    std::string text = std::to_string(rng() % 3) + "." + std::to_string(rng() % 20) + "." +
                       std::to_string(rng() % 10);
    if (rng() % 8 == 0) text += "rc" + std::to_string(rng() % 3);
    text += kLocal[rng() % kLocal.size()];
    out.push_back(*Version::parse(text));
  }
  return out;
}

void BM_VersionCompare(benchmark::State& state) {
  const auto versions = corpus_versions(1024);
  std::size_t i = 0;
  for (auto _ : state) {
    const auto& a = versions[i % versions.size()];
    const auto& b = versions[(i * 7 + 3) % versions.size()];
    benchmark::DoNotOptimize(a <=> b);
    ++i;
  }
}
BENCHMARK(BM_VersionCompare);

void BM_VersionSort(benchmark::State& state) {
  const auto versions = corpus_versions(static_cast<std::size_t>(state.range(0)));
  for (auto _ : state) {
    auto copy = versions;
    std::sort(copy.begin(), copy.end());
    benchmark::DoNotOptimize(copy.data());
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_VersionSort)->Arg(400)->Arg(4000);

void BM_ParseLocalLabel(benchmark::State& state) {
  std::size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(wf::core::parse_local_label(kLabels[i++ % kLabels.size()]));
  }
}
BENCHMARK(BM_ParseLocalLabel);

void BM_ParseFilename(benchmark::State& state) {
  for (auto _ : state) {
    benchmark::DoNotOptimize(wf::core::parse_dist_filename(
        "flash_attn-2.8.3+cu128torch2.8-cp312-cp312-linux_x86_64.whl"));
  }
}
BENCHMARK(BM_ParseFilename);

// The variant-heavy project of the corpus: 4 versions x 4 torch x 5 CUDA x 5 CPython = 400 wheels.
struct VariantProject {
  std::vector<wf::core::FileRecord> files;
  std::vector<std::string> versions;

  VariantProject() {
    std::mt19937_64 rng(658);
    auto hex64 = [&rng] {
      static constexpr char kHex[] = "0123456789abcdef";
      std::string s(64, '0');
      for (auto& c : s) c = kHex[rng() % 16];
      return s;
    };
    versions = {"2.6.3", "2.7.4", "2.8.0", "2.8.3"};
    std::int64_t id = 1;
    for (const auto& v : versions) {
      for (const std::string_view torch : {"2.5", "2.6", "2.7", "2.8"}) {
        for (const std::string_view cu : {"118", "121", "124", "126", "128"}) {
          for (const std::string_view py : {"cp39", "cp310", "cp311", "cp312", "cp313"}) {
            const std::string label = "cu" + std::string(cu) + "torch" + std::string(torch);
            const std::string filename = "flash_attn-" + v + "+" + label + "-" + std::string(py) +
                                         "-" + std::string(py) + "-linux_x86_64.whl";
            auto parsed = wf::core::parse_dist_filename(filename);
            wf::core::FileRecord f;
            f.id = id++;
            f.filename = filename;
            f.project = "flash-attn";
            f.version = parsed->version.str();
            f.sha256 = hex64();
            f.size = 180'000'000 + rng() % 1'000'000;
            f.upload_time = 1'750'000'000'000'000 + static_cast<std::int64_t>(id) * 1'000'000;
            f.requires_python = ">=3.9";
            f.metadata_sha256 = hex64();
            f.metadata_size = 2'000;
            f.tags = parsed->tags;
            f.hints = wf::core::parse_local_label(label);
            files.push_back(std::move(f));
          }
        }
      }
    }
  }

  [[nodiscard]] wf::render::ProjectPage page() const {
    wf::render::ProjectPage p;
    p.name = "flash-attn";
    p.versions = versions;
    for (const auto& f : files) p.files.push_back(&f);
    return p;
  }
};

const VariantProject& variant_project() {
  static const VariantProject project;
  return project;
}

void BM_RenderVariantPageHtml(benchmark::State& state) {
  const auto page = variant_project().page();
  std::size_t bytes = 0;
  for (auto _ : state) {
    auto html = wf::render::render_project(wf::core::PageFormat::html_legacy, page);
    bytes = html.size();
    benchmark::DoNotOptimize(html);
  }
  state.counters["page_bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_RenderVariantPageHtml);

void BM_RenderVariantPageJson(benchmark::State& state) {
  const auto page = variant_project().page();
  std::size_t bytes = 0;
  for (auto _ : state) {
    auto json = wf::render::render_project(wf::core::PageFormat::json_v1, page);
    bytes = json.size();
    benchmark::DoNotOptimize(json);
  }
  state.counters["page_bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_RenderVariantPageJson);

void BM_GzipVariantPageHtml(benchmark::State& state) {
  const auto html =
      wf::render::render_project(wf::core::PageFormat::html_legacy, variant_project().page());
  std::size_t bytes = 0;
  for (auto _ : state) {
    auto gz = wf::render::gzip(html);
    bytes = gz.size();
    benchmark::DoNotOptimize(gz);
  }
  state.counters["gzip_bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_GzipVariantPageHtml);

void BM_SelectForView(benchmark::State& state) {
  const auto& project = variant_project();
  std::vector<wf::core::Candidate> candidates;
  for (const auto& f : project.files) {
    wf::core::Candidate c;
    c.hints = f.hints;
    c.group_key = f.version.substr(0, f.version.find('+')) + " " + f.tags.python_tag + " " +
                  f.tags.abi_tag + " " + f.tags.platform_tag;
    c.upload_time = f.upload_time;
    c.filename = f.filename;
    candidates.push_back(std::move(c));
  }
  const std::array<std::string_view, 2> segments = {"cu128", "torch2.8"};
  const auto view = *wf::core::parse_view_selector(segments);
  for (auto _ : state) {
    benchmark::DoNotOptimize(wf::core::select_for_view(view, candidates));
  }
}
BENCHMARK(BM_SelectForView);

void BM_Negotiate(benchmark::State& state) {
  constexpr std::string_view kPipAccept =
      "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html; q=0.1, "
      "text/html; q=0.01";
  for (auto _ : state) {
    benchmark::DoNotOptimize(wf::core::negotiate(kPipAccept, ""));
  }
}
BENCHMARK(BM_Negotiate);

// The route lookup of a request's path (parsed once by the transport): a file, a project page
// (rows near the top), a view page and a miss (behind every family, at the end of the table).
void BM_FindRoute(benchmark::State& state) {
  static const std::array<std::string_view, 4> kTargets = {
      "/files/0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef/"
      "flash_attn-2.8.3+cu128torch2.8-cp312-cp312-linux_x86_64.whl",
      "/simple/flash-attn/", "/cu128/torch2.8/simple/flash-attn/", "/nothing/here"};
  const auto parsed =
      wf::handlers::parse_target(kTargets[static_cast<std::size_t>(state.range(0))]);
  const std::vector<std::string> segments = parsed ? parsed->first : std::vector<std::string>{};
  for (auto _ : state) {
    benchmark::DoNotOptimize(wf::handlers::find_route(wf::handlers::Method::get, segments));
  }
  state.SetLabel(std::string(kTargets[static_cast<std::size_t>(state.range(0))].substr(0, 24)));
}
BENCHMARK(BM_FindRoute)->DenseRange(0, 3);

// A catalog of `files` files, 20 a project (PyPI's shape), named as wheels are; with
// `extra`, the last project has one file more.
wf::catalog::Contents synthetic_catalog(std::size_t files, std::size_t first_project = 0,
                                        bool extra = false) {
  wf::catalog::Contents c;
  constexpr std::size_t kPerProject = 20;
  const std::size_t projects = std::max<std::size_t>(1, files / kPerProject);
  c.projects.reserve(projects);
  c.files.reserve(projects * kPerProject + 1);
  for (std::size_t p = first_project; p < first_project + projects; ++p) {
    std::string name = std::to_string(p);
    name.insert(0, name.size() < 7 ? 7 - name.size() : 0, '0');
    name.insert(0, 1, 'p');
    c.projects.push_back(wf::core::ProjectRecord{name, name, 1, {}});
    const std::size_t count = kPerProject + (extra && p + 1 == first_project + projects ? 1 : 0);
    for (std::size_t v = 0; v < count; ++v) {
      wf::core::FileRecord f;
      f.project = name;
      f.version = "1." + std::to_string(v);
      f.filename = name + "-" + f.version + "-cp312-cp312-manylinux_2_28_x86_64.whl";
      f.sha256 = std::to_string(std::hash<std::string>{}(f.filename));
      f.sha256.resize(64, '0');
      f.size = 1'000'000;
      f.tags = wf::core::WheelTags{std::nullopt, "cp312", "cp312", "manylinux_2_28_x86_64",
                                   std::nullopt};
      c.files.push_back(std::move(f));
    }
  }
  return c;
}

// One project's change (a 21st file) applied to a snapshot of N files: what a feed batch
// naming one project, or an upload's own install, costs a replica. It should not grow with N.
void BM_SnapshotUpdate(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const auto base = wf::snapshot::Snapshot::build(synthetic_catalog(n));
  const auto change = synthetic_catalog(20, n / 20 / 2, true);
  const std::string name = change.projects.front().name;
  for (auto _ : state) {
    auto contents = change;
    benchmark::DoNotOptimize(wf::snapshot::Snapshot::update(*base, name, std::move(contents)));
  }
}
BENCHMARK(BM_SnapshotUpdate)
    ->Arg(20'000)
    ->Arg(200'000)
    ->Arg(1'000'000)
    ->Unit(benchmark::kMicrosecond);

// The whole catalog indexed (a full load's snapshot; before the parted indexes, every update
// re-indexed all files, which is most of this).
void BM_SnapshotBuild(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const auto catalog = synthetic_catalog(n);
  for (auto _ : state) {
    state.PauseTiming();
    auto contents = catalog;
    state.ResumeTiming();
    benchmark::DoNotOptimize(wf::snapshot::Snapshot::build(std::move(contents)));
  }
}
BENCHMARK(BM_SnapshotBuild)
    ->Arg(20'000)
    ->Arg(200'000)
    ->Arg(1'000'000)
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
