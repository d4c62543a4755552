#include "wheelforge/core/torch_env.hpp"

#include <gtest/gtest.h>

namespace wf::core {
namespace {

TorchResolution resolved(TorchQuery q) {
  auto r = resolve_torch(q);
  EXPECT_TRUE(r) << (r ? "" : r.error().message);
  return r ? *r : TorchResolution{};
}

std::string error_of(TorchQuery q) {
  auto r = resolve_torch(q);
  EXPECT_FALSE(r) << "resolved to " << (r ? r->selector.path() : "");
  return r ? std::string() : r.error().message;
}

TEST(PypiDefaultCuda, TableOfPyTorchsPypiWheels) {
  auto cuda = [](int major, int minor) { return pypi_default_cuda(TorchSeries{major, minor}); };
  EXPECT_EQ(cuda(2, 0), (CudaVersion{11, 7}));
  for (int minor : {1, 2, 3, 4}) EXPECT_EQ(cuda(2, minor), (CudaVersion{12, 1})) << minor;
  EXPECT_EQ(cuda(2, 5), (CudaVersion{12, 4}));
  EXPECT_EQ(cuda(2, 6), (CudaVersion{12, 4}));
  EXPECT_EQ(cuda(2, 7), (CudaVersion{12, 6}));
  EXPECT_EQ(cuda(2, 8), (CudaVersion{12, 8}));
  EXPECT_EQ(cuda(2, 9), (CudaVersion{12, 8}));
  EXPECT_EQ(cuda(2, 10), (CudaVersion{12, 8}));
  EXPECT_EQ(cuda(2, 11), (CudaVersion{13, 0}));
  EXPECT_EQ(cuda(2, 12), (CudaVersion{13, 0}));
  EXPECT_EQ(cuda(2, 13), (CudaVersion{13, 0}));
  // Not in the table: before 2.0, and releases the table does not know.
  EXPECT_FALSE(cuda(1, 13));
  EXPECT_FALSE(cuda(2, 14));
  EXPECT_FALSE(cuda(3, 0));
  // Oldest first, one row per series.
  const auto table = pypi_default_cuda_table();
  ASSERT_FALSE(table.empty());
  for (std::size_t i = 1; i < table.size(); ++i) EXPECT_LT(table[i - 1].series, table[i].series);
  EXPECT_EQ((CudaVersion{12, 8}.str()), "12.8");
  EXPECT_EQ((CudaVersion{13, 0}.str()), "13.0");
}

TEST(ParseCudaValue, TorchVersionCudaSpellings) {
  auto ok = [](std::string_view v) {
    auto r = parse_cuda_value(v);
    EXPECT_TRUE(r) << v;
    return r ? *r : BackendValue{};
  };
  auto v = ok("12.8");
  EXPECT_FALSE(v.none);
  EXPECT_EQ(v.major, 12);
  EXPECT_EQ(v.minor, 8);
  v = ok("13.0");
  EXPECT_EQ(v.major, 13);
  EXPECT_EQ(v.minor, 0);
  v = ok("11.8.89");
  EXPECT_EQ(v.major, 11);
  EXPECT_EQ(v.minor, 8);
  v = ok("12");
  EXPECT_EQ(v.major, 12);
  EXPECT_FALSE(v.minor);
  v = ok("cu128");
  EXPECT_EQ(v.major, 12);
  EXPECT_EQ(v.minor, 8);
  v = ok("9.2");
  EXPECT_EQ(v.major, 9);
  EXPECT_EQ(v.minor, 2);
  // Python prints None for a CPU build; an empty value means the same.
  for (std::string_view none : {"None", "none", "", "null"}) EXPECT_TRUE(ok(none).none) << none;
  for (std::string_view bad : {"banana", "12.", "12.8.", ".8", "12.8x", "12,8", "120.1", "12.123",
                               "cu", "cu128torch2.8", "cpu", "-12.8", " 12.8", "20.1", "0.1"}) {
    auto r = parse_cuda_value(bad);
    EXPECT_FALSE(r) << bad;
    if (!r) {
      EXPECT_EQ(r.error().code, Errc::invalid);
    }
  }
  auto r = parse_cuda_value("banana");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("'banana'"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("torch.version.cuda"), std::string::npos);
}

TEST(ParseHipValue, TorchVersionHipSpellings) {
  auto r = parse_hip_value("6.4.43482-0f2d60242");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->major, 6);
  EXPECT_EQ(r->minor, 4);
  r = parse_hip_value("6.2.41133-dd7f95766");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->minor, 2);
  r = parse_hip_value("rocm6.4");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->major, 6);
  EXPECT_EQ(r->minor, 4);
  r = parse_hip_value("None");
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->none);
  for (std::string_view bad : {"six", "6.x", "rocm", "-6.4", "6.4-", "0.1"}) {
    EXPECT_FALSE(parse_hip_value(bad)) << bad;
  }
}

TEST(ResolveTorch, ExplicitCudaWinsOverTheTable) {
  // A torch from PyPI: no label, torch.version.cuda says 12.8.
  auto r = resolved({"2.9.0", "12.8", std::nullopt, std::nullopt});
  EXPECT_EQ(r.selector.path(), "cu128/torch2.9");
  EXPECT_EQ(r.source, BackendSource::cuda);
  EXPECT_TRUE(r.notes.empty());
  // The table would say 13.0 for 2.11; the value says 12.8.
  r = resolved({"2.11.0", "12.8", std::nullopt, "1"});
  EXPECT_EQ(r.selector.path(), "cu128/torch2.11/cxx11abi1");
  r = resolved({"2.9.1", "13.0", std::nullopt, std::nullopt});
  EXPECT_EQ(r.selector.path(), "cu130/torch2.9");
  r = resolved({"2.9.0", "12", std::nullopt, std::nullopt});
  EXPECT_EQ(r.selector.path(), "cu12/torch2.9");
}

TEST(ResolveTorch, LabelGivesTheBackendWhenNoValueIsGiven) {
  auto r = resolved({"2.8.0+cu128", std::nullopt, std::nullopt, std::nullopt});
  EXPECT_EQ(r.selector.path(), "cu128/torch2.8");
  EXPECT_EQ(r.source, BackendSource::label);
  EXPECT_TRUE(r.notes.empty());
  r = resolved({"2.8.0+cpu", std::nullopt, std::nullopt, "0"});
  EXPECT_EQ(r.selector.path(), "cpu/torch2.8/cxx11abi0");
  r = resolved({"2.7.1+rocm6.3", std::nullopt, std::nullopt, std::nullopt});
  EXPECT_EQ(r.selector.path(), "rocm6.3/torch2.7");
  // PyTorch's own cxx11-ABI CPU builds say so in the label.
  r = resolved({"2.6.0+cpu.cxx11.abi", std::nullopt, std::nullopt, std::nullopt});
  EXPECT_EQ(r.selector.path(), "cpu/torch2.6/cxx11abi1");
}

TEST(ResolveTorch, ValuesThatAgreeWithTheLabel) {
  EXPECT_EQ(resolved({"2.8.0+cu128", "12.8", "None", "1"}).selector.path(),
            "cu128/torch2.8/cxx11abi1");
  // A major-only value takes the label's minor; a major-only label the value's.
  EXPECT_EQ(resolved({"2.8.0+cu128", "12", std::nullopt, std::nullopt}).selector.path(),
            "cu128/torch2.8");
  EXPECT_EQ(resolved({"2.8.0+cu12", "12.6", std::nullopt, std::nullopt}).selector.path(),
            "cu126/torch2.8");
  // CPU builds: torch.version.cuda is None.
  auto r = resolved({"2.8.0+cpu", "None", "None", std::nullopt});
  EXPECT_EQ(r.selector.path(), "cpu/torch2.8");
  EXPECT_EQ(r.source, BackendSource::label);
  r = resolved({"2.7.1+rocm6.3", "None", "6.3.42131-fa1d09cbd", std::nullopt});
  EXPECT_EQ(r.selector.path(), "rocm6.3/torch2.7");
  EXPECT_EQ(r.source, BackendSource::hip);
}

TEST(ResolveTorch, NoneWithoutLabelIsTheCpuView) {
  // macOS wheels from PyPI: 2.9.0, torch.version.cuda None.
  auto r = resolved({"2.9.0", "None", "None", std::nullopt});
  EXPECT_EQ(r.selector.path(), "cpu/torch2.9");
  EXPECT_EQ(r.source, BackendSource::none_given);
  r = resolved({"2.9.0", "", std::nullopt, std::nullopt});
  EXPECT_EQ(r.selector.path(), "cpu/torch2.9");
  // A ROCm value decides even when cuda is None.
  r = resolved({"2.9.0", "None", "6.4.43482-0f2d60242", std::nullopt});
  EXPECT_EQ(r.selector.path(), "rocm6.4/torch2.9");
}

TEST(ResolveTorch, NothingGivenUsesThePypiDefaultWithANote) {
  auto r = resolved({"2.9.0", std::nullopt, std::nullopt, std::nullopt});
  EXPECT_EQ(r.selector.path(), "cu128/torch2.9");
  EXPECT_EQ(r.source, BackendSource::pypi_default);
  ASSERT_EQ(r.notes.size(), 1U);
  EXPECT_NE(r.notes[0].find("assumed CUDA 12.8"), std::string::npos) << r.notes[0];
  EXPECT_NE(r.notes[0].find("PyPI"), std::string::npos) << r.notes[0];
  EXPECT_EQ(resolved({"2.11.0", std::nullopt, std::nullopt, std::nullopt}).selector.path(),
            "cu130/torch2.11");
  EXPECT_EQ(resolved({"2.7.1", std::nullopt, std::nullopt, "1"}).selector.path(),
            "cu126/torch2.7/cxx11abi1");
  // hip=None says only "not ROCm": still the table.
  EXPECT_EQ(resolved({"2.10.0", std::nullopt, "None", std::nullopt}).selector.path(),
            "cu128/torch2.10");
  // A label without a backend (a git build) is no backend either.
  EXPECT_EQ(
      resolved({"2.8.0+gitabc1234", std::nullopt, std::nullopt, std::nullopt}).selector.path(),
      "cu128/torch2.8");
}

TEST(ResolveTorch, SeriesOutsideTheTableSelectsBySeriesWithANote) {
  auto r = resolved({"2.14.0", std::nullopt, std::nullopt, std::nullopt});
  EXPECT_EQ(r.selector.path(), "torch2.14");
  EXPECT_EQ(r.source, BackendSource::unknown);
  ASSERT_EQ(r.notes.size(), 1U);
  EXPECT_NE(r.notes[0].find("not in wheelforge's table"), std::string::npos) << r.notes[0];
  EXPECT_NE(r.notes[0].find("cuda="), std::string::npos);
  // With the value it is an ordinary answer.
  EXPECT_EQ(resolved({"2.14.0", "13.0", std::nullopt, std::nullopt}).selector.path(),
            "cu130/torch2.14");
}

TEST(ResolveTorch, ContradictionsAreRefusedNamingBothSides) {
  auto message = error_of({"2.8.0+cu128", "12.6", std::nullopt, std::nullopt});
  EXPECT_NE(message.find("cuda=12.6"), std::string::npos) << message;
  EXPECT_NE(message.find("2.8.0+cu128"), std::string::npos) << message;
  EXPECT_NE(message.find("CUDA 12.8"), std::string::npos) << message;
  message = error_of({"2.8.0+cu128", "None", std::nullopt, std::nullopt});
  EXPECT_NE(message.find("cuda=None"), std::string::npos) << message;
  message = error_of({"2.8.0+cpu", "12.8", std::nullopt, std::nullopt});
  EXPECT_NE(message.find("a CPU build"), std::string::npos) << message;
  error_of({"2.8.0+cu128", "13.0", std::nullopt, std::nullopt});
  error_of({"2.7.1+rocm6.3", "12.8", std::nullopt, std::nullopt});
  error_of({"2.7.1+rocm6.3", std::nullopt, "6.2.41133", std::nullopt});
  error_of({"2.7.1+rocm6.3", std::nullopt, "None", std::nullopt});
  error_of({"2.8.0+cu128", std::nullopt, "6.4", std::nullopt});
  message = error_of({"2.9.0", "12.8", "6.4.43482", std::nullopt});
  EXPECT_NE(message.find("two backends"), std::string::npos) << message;
}

TEST(ResolveTorch, BadValuesAreNamed) {
  EXPECT_NE(error_of({"", std::nullopt, std::nullopt, std::nullopt}).find("missing torch="),
            std::string::npos);
  EXPECT_NE(error_of({"banana", std::nullopt, std::nullopt, std::nullopt}).find("torch:"),
            std::string::npos);
  EXPECT_NE(error_of({"2.8.0", "twelve", std::nullopt, std::nullopt}).find("cuda: 'twelve'"),
            std::string::npos);
  EXPECT_NE(error_of({"2.8.0", std::nullopt, "x", std::nullopt}).find("hip: 'x'"),
            std::string::npos);
  EXPECT_NE(error_of({"2.8.0", std::nullopt, std::nullopt, "maybe"}).find("abi: 'maybe'"),
            std::string::npos);
  // Values are cut and cleaned before they are echoed.
  const std::string long_value(500, '9');
  const auto message = error_of({"2.8.0", long_value, std::nullopt, std::nullopt});
  EXPECT_LT(message.size(), 300U) << message;
  EXPECT_EQ(error_of({"2.8.0", std::string("1\n2", 3), std::nullopt, std::nullopt}).find('\n'),
            std::string::npos);
}

TEST(NearestCells, SameSeriesAndMajorFirst) {
  auto view = [](std::string_view path) {
    std::vector<std::string_view> parts;
    std::size_t start = 0;
    while (start <= path.size()) {
      const auto slash = path.find('/', start);
      parts.push_back(path.substr(start, slash - start));
      if (slash == std::string_view::npos) break;
      start = slash + 1;
    }
    auto v = parse_view_selector(parts);
    EXPECT_TRUE(v) << path;
    return v ? *v : ViewSelector{};
  };
  const std::vector<ViewSelector> cells{
      view("cu130/torch2.9"),           view("cu126/torch2.8"), view("cu128/torch2.10"),
      view("cu126/torch2.9"),           view("cu128/torch2.8"), view("cpu/torch2.9"),
      view("cu128/torch2.9/cxx11abi0"),
  };
  const auto order = nearest_cells(view("cu129/torch2.9"), cells);
  std::vector<std::string> paths;
  for (const auto i : order) paths.push_back(cells[i].path());
  EXPECT_EQ(paths, (std::vector<std::string>{
                       // torch 2.9, CUDA 12: by minor distance (12.8 before 12.6)
                       "cu128/torch2.9/cxx11abi0", "cu126/torch2.9",
                       // torch 2.9, another CUDA major, then another backend
                       "cu130/torch2.9", "cpu/torch2.9",
                       // other series: CUDA 12 first, nearer minor, then nearer series
                       "cu128/torch2.10", "cu128/torch2.8", "cu126/torch2.8"}));
  EXPECT_TRUE(nearest_cells(view("cu128/torch2.9"), {}).empty());
}

}  // namespace
}  // namespace wf::core
