#include "wheelforge/core/variant.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <initializer_list>
#include <ostream>
#include <random>
#include <string>
#include <vector>

namespace wf::core {

// Readable failure output for EXPECT_EQ on hints.
void PrintTo(const VariantHints& h, std::ostream* os) {
  *os << "{" << h.describe() << " | extra:";
  for (const auto& e : h.extra) *os << " " << e;
  *os << "}";
}

namespace {

struct LabelCase {
  std::string label;
  std::string describe;  // expected selecting hints in canonical form
  std::vector<std::string> extra;
};

// Every label of docs/torch-labels.md, "Labels extension projects use".
const std::vector<LabelCase> kDomainLabels = {
    {"+cu128torch2.8", "cu128 torch2.8", {}},
    {"+cu12torch2.8cxx11abiTRUE", "cu12 torch2.8 cxx11abi1", {}},
    {"+cu122torch2.3cxx11abiFALSE", "cu122 torch2.3 cxx11abi0", {}},
    {"+cu130.torch29", "cu130 torch2.9", {}},
    {"+cu128torch2.8.0.post2", "cu128 torch2.8", {"post2"}},
    {"+cu128torch2.9.0cxx11abi1", "cu128 torch2.9 cxx11abi1", {}},
    {"+pt28cu126", "cu126 torch2.8", {}},
    {"+pt211cu128", "cu128 torch2.11", {}},
    {"+cu128torch2.7gite2743ab", "cu128 torch2.7", {"gite2743ab"}},
    {"+20260126.cu129torch280cxx11abitrue.438325",
     "cu129 torch2.8 cxx11abi1",
     {"20260126", "438325"}},
    {"+cu128", "cu128", {}},
    {"+cu12", "cu12", {}},
    {"+cpu", "cpu", {}},
    {"+cpu.cxx11.abi", "cpu cxx11abi1", {}},
    {"+rocm6.4", "rocm6.4", {}},
    {"+rocm63torch2.6cxx11abiTRUE", "rocm6.3 torch2.6 cxx11abi1", {}},
    {"+cu130sm89torch2.10.0", "cu130 torch2.10", {"sm89"}},
    {"+cu130torch2.9.0andhigher.post4", "cu130 torch2.9", {"andhigher", "post4"}},
    {"+gaa384b3c0.cu130", "cu130", {"gaa384b3c0"}},
    {"+cuda11.cudnn86", "cu11", {"cudnn86"}},
};

// What PEP 440 normalization makes of a label: lower case, '-' and '_' as '.'.
std::string normalized(std::string_view label) {
  std::string out;
  for (char c : label.substr(label.starts_with('+') ? 1 : 0)) {
    if (c == '-' || c == '_') c = '.';
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    out += c;
  }
  return out;
}

TEST(VariantLabel, EveryDomainLabelRawAndNormalized) {
  for (const auto& c : kDomainLabels) {
    for (const auto& spelling : {c.label, normalized(c.label)}) {
      const VariantHints h = parse_local_label(spelling);
      EXPECT_EQ(h.describe(), c.describe) << spelling;
      EXPECT_EQ(h.extra, c.extra) << spelling;
      EXPECT_TRUE(h.selects()) << spelling;
    }
  }
}

TEST(VariantLabel, FieldsOfTypicalLabels) {
  const VariantHints a = parse_local_label("+cu128torch2.8");
  EXPECT_EQ(a.backend, Backend::cuda);
  EXPECT_EQ(a.cuda_major, 12);
  EXPECT_EQ(a.cuda_minor, 8);
  EXPECT_FALSE(a.rocm_major);
  EXPECT_EQ(a.torch, (TorchSeries{2, 8}));
  EXPECT_FALSE(a.cxx11_abi);

  const VariantHints b = parse_local_label("cu12torch2.8cxx11abiTRUE");
  EXPECT_EQ(b.cuda_major, 12);
  EXPECT_FALSE(b.cuda_minor);
  EXPECT_EQ(b.cxx11_abi, true);

  const VariantHints r = parse_local_label("rocm63torch2.6cxx11abiTRUE");
  EXPECT_EQ(r.backend, Backend::rocm);
  EXPECT_EQ(r.rocm_major, 6);
  EXPECT_EQ(r.rocm_minor, 3);
  EXPECT_FALSE(r.cuda_major);

  const VariantHints c = parse_local_label("cpu.cxx11.abi");
  EXPECT_EQ(c.backend, Backend::cpu);
  EXPECT_EQ(c.cxx11_abi, true);
  EXPECT_FALSE(c.torch);
}

TEST(VariantLabel, DigitRunRules) {
  struct Case {
    const char* label;
    const char* describe;
  };
  const Case cases[] = {
      // CUDA: a leading 1 means a two-digit major.
      {"cu11", "cu11"},
      {"cu13", "cu13"},
      {"cu118", "cu118"},
      {"cu121", "cu121"},
      {"cu1210", "cu1210"},
      {"cu92", "cu92"},
      {"cu102", "cu102"},
      {"cu12.8", "cu128"},
      {"cuda12.8", "cu128"},
      {"cuda128", "cu128"},
      // torch: undotted digits are major, minor, patch run together.
      {"torch28", "torch2.8"},
      {"torch280", "torch2.8"},
      {"torch210", "torch2.1"},
      {"torch2100", "torch2.10"},
      {"torch2.10", "torch2.10"},
      {"torch2.1.0", "torch2.1"},
      {"pt28", "torch2.8"},
      {"pt211", "torch2.11"},
      {"pt2.8", "torch2.8"},
      // ROCm: one-digit major.
      {"rocm6", "rocm6"},
      {"rocm64", "rocm6.4"},
      {"rocm641", "rocm6.4"},
      {"rocm6.4.1", "rocm6.4"},
      // ABI values.
      {"cxx11abi0", "cxx11abi0"},
      {"cxx11abiFalse", "cxx11abi0"},
      {"cxx11abi-TRUE", "cxx11abi1"},
      {"cxx11abi_0", "cxx11abi0"},
      {"cxx11abi", "cxx11abi1"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(parse_local_label(c.label).describe(), c.describe) << c.label;
  }
}

TEST(VariantLabel, SeparatorsAndCaseDoNotMatter) {
  for (const char* label :
       {"CU128_Torch2.8", "cu128-torch2.8", "cu128.torch2.8", "+CU128TORCH2.8"}) {
    EXPECT_EQ(parse_local_label(label).describe(), "cu128 torch2.8") << label;
  }
}

TEST(VariantLabel, AgreeingRepeatsMergeConflictsAreDropped) {
  EXPECT_EQ(parse_local_label("cuda11.cu118").describe(), "cu118");
  EXPECT_EQ(parse_local_label("torch2.8.pt28").describe(), "torch2.8");

  const VariantHints backends = parse_local_label("cu128.rocm6.4.torch2.8");
  EXPECT_EQ(backends.describe(), "torch2.8");
  EXPECT_EQ(backends.extra, (std::vector<std::string>{"cu128", "rocm6.4"}));

  const VariantHints minors = parse_local_label("cu126.cu128");
  EXPECT_EQ(minors.backend, Backend::none);
  EXPECT_FALSE(minors.cuda_major);
  EXPECT_EQ(minors.extra, (std::vector<std::string>{"cu126", "cu128"}));

  EXPECT_EQ(parse_local_label("cpu.cu128").describe(), "");
  EXPECT_EQ(parse_local_label("cu128torch2.7torch2.8").describe(), "cu128");
  EXPECT_EQ(parse_local_label("cxx11abi0.cxx11abi1.cpu").describe(), "cpu");
}

TEST(VariantLabel, GarbageGivesNoHints) {
  const std::vector<std::string> garbage = {
      "",
      "+",
      "+abc",
      "+cu",
      "+cuda",
      "+torch",
      "+pt",
      "+rocm",
      "+cxx11",
      "+cuXYZ",
      "+cu1",
      "+cu0128",
      "+cu12345",
      "+cu999999999999999999999",
      "+torch2",
      "+torch99999",
      "+torch999999999999.8",
      "+pt2",
      "+rocm1234",
      "+....",
      "+-_-_",
      "+opt28",
      "+xcu128",
      "+gdeadbeef",
      std::string("+\xff\x00\x01cu", 6),
      std::string(100000, 'a'),
      std::string(100000, '9'),
  };
  for (const auto& label : garbage) {
    const VariantHints h = parse_local_label(label);
    EXPECT_FALSE(h.selects()) << label.substr(0, 40);
    EXPECT_EQ(h.describe(), "");
  }
}

TEST(VariantLabel, VeryLongLabelsStayLinearAndTotal) {
  std::string mixed;
  std::string glued;
  std::string numbers;
  for (int i = 0; i < 20000; ++i) {
    mixed += "1a.cu1x";
    glued += "torch2.8";
    numbers += "1cu99999";
  }
  EXPECT_FALSE(parse_local_label(mixed).selects());
  EXPECT_EQ(parse_local_label(glued).describe(), "torch2.8");
  EXPECT_FALSE(parse_local_label(numbers).selects());
}

// Labels glued from keyword fragments: parsing must stay total (the sanitizer build checks
// memory and overflow) and the canonical form of what it found must read back the same.
TEST(VariantLabel, RandomFragmentsParseAndDescribeRoundTrips) {
  const std::vector<std::string> fragments = {
      "cu", "cuda", "torch", "pt", "rocm", "cpu", "cxx11", "abi", "true", "false", "1", "2",
      "8",  "0",    "9",     "12", "128",  "130", ".",     "_",   "-",    "x",     "g"};
  std::mt19937 rng(20260126);
  for (int n = 0; n < 20000; ++n) {
    std::string label = "+";
    const auto len = std::uniform_int_distribution<int>(0, 12)(rng);
    for (int k = 0; k < len; ++k) {
      label += fragments[std::uniform_int_distribution<std::size_t>(0, fragments.size() - 1)(rng)];
    }
    const VariantHints h = parse_local_label(label);
    std::string canonical = h.describe();
    std::replace(canonical.begin(), canonical.end(), ' ', '.');
    EXPECT_EQ(parse_local_label(canonical).describe(), h.describe()) << label;
  }
}

TEST(VariantLabel, GarbagePartsAreKeptAsExtra) {
  EXPECT_EQ(parse_local_label("+abc").extra, (std::vector<std::string>{"abc"}));
  EXPECT_EQ(parse_local_label("+cu999999999999999999999").extra,
            (std::vector<std::string>{"cu999999999999999999999"}));
  EXPECT_TRUE(parse_local_label("+").extra.empty());
}

TEST(VariantTorch, SeriesOfVersion) {
  EXPECT_EQ(torch_series_of_version("2.8.0"), (TorchSeries{2, 8}));
  EXPECT_EQ(torch_series_of_version("2.10.0rc1"), (TorchSeries{2, 10}));
  EXPECT_EQ(torch_series_of_version("2.8.0+cu128"), (TorchSeries{2, 8}));
  EXPECT_EQ(torch_series_of_version("2.9"), (TorchSeries{2, 9}));
  EXPECT_FALSE(torch_series_of_version("2"));
  EXPECT_FALSE(torch_series_of_version("1!2.8.0"));
  EXPECT_FALSE(torch_series_of_version(""));
  EXPECT_FALSE(torch_series_of_version("x.y"));
}

TEST(VariantTorch, DefaultAbiBySeries) {
  EXPECT_FALSE(default_cxx11_abi({1, 13}));
  EXPECT_FALSE(default_cxx11_abi({2, 6}));
  EXPECT_TRUE(default_cxx11_abi({2, 7}));
  EXPECT_TRUE(default_cxx11_abi({2, 11}));
}

std::optional<TorchSeries> pin(std::initializer_list<std::string> reqs) {
  const std::vector<std::string> v(reqs);
  const auto p = torch_pin_from_requirements(v);
  return p ? std::optional(p->series) : std::nullopt;
}

TEST(VariantTorch, PinsThatDetermineOneSeries) {
  const TorchSeries s28{2, 8};
  EXPECT_EQ(pin({"torch==2.8.*"}), s28);
  EXPECT_EQ(pin({"torch==2.8.0"}), s28);
  EXPECT_EQ(pin({"torch (==2.8.0)"}), s28);
  EXPECT_EQ(pin({"torch>=2.8,<2.9"}), s28);
  EXPECT_EQ(pin({"torch >= 2.8.0, < 2.9.0"}), s28);
  EXPECT_EQ(pin({"torch>=2.8.0,<2.8.5"}), s28);
  EXPECT_EQ(pin({"torch~=2.8.0"}), s28);
  EXPECT_EQ(pin({"Torch[opt-einsum]==2.8.0"}), s28);
  EXPECT_EQ(pin({"torch==2.8.0+cu128"}), s28);
  EXPECT_EQ(pin({"numpy>=1.26", "torch>=2.8", "torch<2.9"}), s28);
  EXPECT_EQ(pin({"torch==2.8.*;"}), s28);
  EXPECT_EQ(pin({"torch>=2.8,!=2.8.1,<2.9"}), s28);
  EXPECT_EQ(pin({"torch>=1.13,<2"}), std::nullopt);
  EXPECT_EQ(pin({"torch>=2.10,<=2.10.1"}), (TorchSeries{2, 10}));
}

TEST(VariantTorch, RequirementsThatDoNotPin) {
  EXPECT_FALSE(pin({}));
  EXPECT_FALSE(pin({"torch"}));
  EXPECT_FALSE(pin({"torch>=2.8"}));
  EXPECT_FALSE(pin({"torch~=2.8"}));
  EXPECT_FALSE(pin({"torch==2.*"}));
  EXPECT_FALSE(pin({"torch>=2.7,<2.9"}));
  EXPECT_FALSE(pin({"torch==2.8.*; python_version >= \"3.9\""}));
  EXPECT_FALSE(pin({"torch==2.8.*; extra == \"gpu\""}));
  EXPECT_FALSE(pin({"torch @ https://example.invalid/torch-2.8.0-cp312-cp312-linux_x86_64.whl"}));
  EXPECT_FALSE(pin({"torchvision==0.23.0"}));
  EXPECT_FALSE(pin({"pytorch-triton==3.4.0"}));
  EXPECT_FALSE(pin({"torch==2.8.0rc1"}));
  EXPECT_FALSE(pin({"torch>=2.9,<2.8"}));
  EXPECT_FALSE(pin({"torch==2.8.*", "torch==2.9.*"}));
  EXPECT_FALSE(pin({"torch<0"}));
  EXPECT_FALSE(pin({"torch[unclosed==2.8.0"}));
}

TEST(VariantTorch, PinKeepsRequirementTextForMessages) {
  const std::vector<std::string> reqs = {"torch>=2.8", "torch<2.9", "numpy"};
  const auto p = torch_pin_from_requirements(reqs);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->requirement, "torch>=2.8, torch<2.9");
}

TEST(VariantDistribution, PinFillsMissingTorchSeries) {
  const std::vector<std::string> reqs = {"torch==2.8.*"};
  const auto h = hints_for_distribution("flash-attn", "2.8.3", "cu128", reqs);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->describe(), "cu128 torch2.8");

  const auto plain = hints_for_distribution("helper", "1.0", "", reqs);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->describe(), "torch2.8");
}

TEST(VariantDistribution, AgreeingLabelAndPinAreAccepted) {
  const std::vector<std::string> reqs = {"torch (==2.8.0)"};
  const auto h = hints_for_distribution("flash-attn", "2.8.3", "+cu128torch2.8", reqs);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->describe(), "cu128 torch2.8");
}

TEST(VariantDistribution, LabelContradictingPinIsRejectedNamingBoth) {
  const std::vector<std::string> reqs = {"torch==2.9.*"};
  const auto h = hints_for_distribution("flash-attn", "2.8.3", "cu128torch2.8", reqs);
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.error().code, Errc::invalid);
  EXPECT_NE(h.error().message.find("torch 2.8"), std::string::npos) << h.error().message;
  EXPECT_NE(h.error().message.find("torch==2.9.*"), std::string::npos) << h.error().message;
  EXPECT_NE(h.error().message.find("+cu128torch2.8"), std::string::npos) << h.error().message;
}

TEST(VariantDistribution, TorchItselfCountsAsItsOwnSeries) {
  const auto h = hints_for_distribution("torch", "2.8.0", "cu128", {});
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->describe(), "cu128 torch2.8");

  const auto cpu = hints_for_distribution("torch", "2.10.0", "+cpu", {});
  ASSERT_TRUE(cpu.ok());
  EXPECT_EQ(cpu->describe(), "cpu torch2.10");

  const auto wrong = hints_for_distribution("torch", "2.8.0", "cu128torch2.7", {});
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.error().message.find("2.7"), std::string::npos);
  EXPECT_NE(wrong.error().message.find("2.8"), std::string::npos);
}

TEST(VariantDistribution, UnderstoodNothingIsNotAnError) {
  const auto h = hints_for_distribution("helper", "1.0", "+weird.label", {});
  ASSERT_TRUE(h.ok());
  EXPECT_FALSE(h->selects());
  EXPECT_EQ(h->extra, (std::vector<std::string>{"weird", "label"}));
}

// ---- view selectors --------------------------------------------------------------------------

Result<ViewSelector> parse_view(std::initializer_list<std::string_view> segments) {
  const std::vector<std::string_view> v(segments);
  return parse_view_selector(v);
}

TEST(VariantSelector, ValidCombinations) {
  const auto v = parse_view({"cu128", "torch2.8", "cxx11abi1"});
  ASSERT_TRUE(v.ok()) << v.error().message;
  EXPECT_EQ(v->backend, Backend::cuda);
  EXPECT_EQ(v->cuda_major, 12);
  EXPECT_EQ(v->cuda_minor, 8);
  EXPECT_EQ(v->torch, (TorchSeries{2, 8}));
  EXPECT_EQ(v->cxx11_abi, true);
  EXPECT_EQ(v->path(), "cu128/torch2.8/cxx11abi1");

  for (const auto& segs : std::vector<std::vector<std::string_view>>{{"cu12"},
                                                                     {"cu130"},
                                                                     {"cu118", "torch2.6"},
                                                                     {"cpu"},
                                                                     {"cpu", "cxx11abi0"},
                                                                     {"rocm6.4", "torch2.9"},
                                                                     {"torch2.10"},
                                                                     {"cxx11abi0"},
                                                                     {"cu92"}}) {
    const auto s = parse_view_selector(segs);
    ASSERT_TRUE(s.ok()) << segs.front() << ": " << s.error().message;
    std::string joined;
    for (const auto seg : segs) joined += (joined.empty() ? "" : "/") + std::string(seg);
    EXPECT_EQ(s->path(), joined);
  }
}

TEST(VariantSelector, OrderDoesNotMatterAndPathIsCanonical) {
  const auto a = parse_view({"cxx11abi0", "torch2.6", "cu126"});
  const auto b = parse_view({"torch2.6", "cu126", "cxx11abi0"});
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*a, *b);
  EXPECT_EQ(a->path(), "cu126/torch2.6/cxx11abi0");
}

TEST(VariantSelector, PathRoundTrips) {
  for (const auto& p : {"cu12", "cu128", "cu1210", "cpu", "rocm6.4", "torch2.11", "cxx11abi1"}) {
    const auto v = parse_view({p});
    ASSERT_TRUE(v.ok()) << p;
    EXPECT_EQ(v->path(), p);
  }
}

TEST(VariantSelector, EmptySelector) {
  const auto v = parse_view({});
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->empty());
  EXPECT_EQ(v->path(), "");
  EXPECT_FALSE(parse_view({"cpu"})->empty());
}

void expect_invalid(std::initializer_list<std::string_view> segments, std::string_view mention) {
  const auto v = parse_view(segments);
  ASSERT_FALSE(v.ok()) << mention;
  EXPECT_EQ(v.error().code, Errc::not_found);
  const std::string& m = v.error().message;
  EXPECT_NE(m.find(mention), std::string::npos) << m;
  for (const char* form : {"cuXY", "cpu", "rocmX.Y", "torchX.Y", "cxx11abi0", "cxx11abi1"}) {
    EXPECT_NE(m.find(form), std::string::npos) << form << " missing in: " << m;
  }
}

TEST(VariantSelector, InvalidSegmentsListValidForms) {
  expect_invalid({"gpu"}, "'gpu'");
  expect_invalid({""}, "empty view segment");
  expect_invalid({"cu"}, "'cu'");
  expect_invalid({"cu0128"}, "'cu0128'");
  expect_invalid({"cu99999999999999"}, "'cu99999999999999'");
  expect_invalid({"rocm6"}, "'rocm6'");
  expect_invalid({"cxx11abi2"}, "'cxx11abi2'");
  expect_invalid({"cu128", "simple"}, "'simple'");
  expect_invalid({"a\nb"}, "'a?b'");
}

TEST(VariantSelector, NonCanonicalSpellingsSuggestTheCanonicalOne) {
  expect_invalid({"torch28"}, "did you mean 'torch2.8'");
  expect_invalid({"torch2.8.0"}, "did you mean 'torch2.8'");
  expect_invalid({"CU128"}, "did you mean 'cu128'");
  expect_invalid({"cxx11abiTRUE"}, "did you mean 'cxx11abi1'");
  expect_invalid({"cu128torch2.8"}, "did you mean 'cu128/torch2.8'");
  expect_invalid({"torch2.08"}, "'torch2.08'");
}

TEST(VariantSelector, DuplicatesAndConflicts) {
  expect_invalid({"cu128", "cu126"}, "'cu126' and 'cu128'");
  expect_invalid({"cpu", "cu128"}, "'cu128' and 'cpu'");
  expect_invalid({"rocm6.4", "cpu"}, "'cpu' and 'rocm6.4'");
  expect_invalid({"torch2.8", "torch2.9"}, "torch series");
  expect_invalid({"cxx11abi0", "cxx11abi1"}, "C++ ABI");
  expect_invalid({"torch2.8", "torch2.8"}, "'torch2.8' and 'torch2.8'");
}

TEST(VariantSelector, EveryProblemIsReported) {
  const auto v = parse_view({"gpu", "cu128", "cpu", "torchX"});
  ASSERT_FALSE(v.ok());
  const std::string& m = v.error().message;
  EXPECT_NE(m.find("'gpu'"), std::string::npos) << m;
  EXPECT_NE(m.find("'cpu' and 'cu128'"), std::string::npos) << m;
  EXPECT_NE(m.find("'torchX'"), std::string::npos) << m;
}

TEST(VariantSelector, ManyBadSegmentsKeepTheMessageShort) {
  std::vector<std::string_view> segs(1000, "bogus");
  const auto v = parse_view_selector(segs);
  ASSERT_FALSE(v.ok());
  EXPECT_LT(v.error().message.size(), 1000U);
  EXPECT_NE(v.error().message.find("and 992 more"), std::string::npos) << v.error().message;
}

// ---- selection -------------------------------------------------------------------------------

constexpr std::string_view kGroup = "2.8.3|cp312|cp312|linux_x86_64";

Candidate cand(std::string label, std::string group = std::string(kGroup), std::string build = "",
               std::int64_t upload = 0) {
  Candidate c;
  c.hints = parse_local_label(label);
  c.group_key = std::move(group);
  c.build_tag = std::move(build);
  c.upload_time = upload;
  c.filename = std::move(label);
  return c;
}

ViewSelector view(std::initializer_list<std::string_view> segments) {
  auto v = parse_view(segments);
  EXPECT_TRUE(v.ok()) << v.error().message;
  return v.ok() ? *v : ViewSelector{};
}

// File names (here: the labels) of the selected candidates, in result order.
std::vector<std::string> selected(const ViewSelector& v, const std::vector<Candidate>& cands) {
  std::vector<std::string> out;
  for (const auto i : select_for_view(v, cands)) out.push_back(cands.at(i).filename);
  return out;
}

using Names = std::vector<std::string>;

TEST(VariantSelect, ExactMinorPreferred) {
  const std::vector<Candidate> cands = {cand("cu126torch2.8"), cand("cu128torch2.8"),
                                        cand("cu129torch2.8"), cand("cu130torch2.8"),
                                        cand("cu12torch2.8")};
  EXPECT_EQ(selected(view({"cu128", "torch2.8"}), cands), Names{"cu128torch2.8"});
}

TEST(VariantSelect, HighestLowerMinorFallback) {
  const std::vector<Candidate> cands = {cand("cu124torch2.8"), cand("cu126torch2.8"),
                                        cand("cu129torch2.8"), cand("cu12torch2.8")};
  EXPECT_EQ(selected(view({"cu128", "torch2.8"}), cands), Names{"cu126torch2.8"});
}

TEST(VariantSelect, MajorOnlyFallback) {
  const std::vector<Candidate> cands = {cand("cu12torch2.8"), cand("cu129torch2.8"),
                                        cand("cu118torch2.8")};
  EXPECT_EQ(selected(view({"cu128", "torch2.8"}), cands), Names{"cu12torch2.8"});
}

TEST(VariantSelect, NeverHigherMinorNorOtherMajorNorOtherBackend) {
  const std::vector<Candidate> cands = {cand("cu129torch2.8"), cand("cu130torch2.8"),
                                        cand("cu118torch2.8"), cand("cpu.torch2.8"),
                                        cand("rocm6.4torch2.8")};
  EXPECT_TRUE(selected(view({"cu128", "torch2.8"}), cands).empty());
  EXPECT_TRUE(selected(view({"cu126"}), {cand("cu128")}).empty());
  EXPECT_EQ(selected(view({"cu13"}), cands), Names{"cu130torch2.8"});
}

TEST(VariantSelect, OtherTorchSeriesNeverListed) {
  const std::vector<Candidate> cands = {cand("cu128torch2.9"), cand("cu128torch2.7", "other-group"),
                                        cand("cu128torch2.8", "third-group")};
  EXPECT_EQ(selected(view({"cu128", "torch2.8"}), cands), Names{"cu128torch2.8"});
  EXPECT_TRUE(selected(view({"torch2.10"}), cands).empty());
}

TEST(VariantSelect, GenericWheelsAlwaysListed) {
  const std::vector<Candidate> cands = {cand("", "1.0|py3|none|any"), cand("cu128torch2.9"),
                                        cand("gdeadbeef", "1.1|py3|none|any")};
  for (const auto& v : {view({"cu128", "torch2.8"}), view({"cpu"}), view({"rocm6.4"}),
                        view({"cxx11abi0"}), ViewSelector{}}) {
    const Names got = selected(v, cands);
    EXPECT_TRUE(std::find(got.begin(), got.end(), "") != got.end()) << v.path();
    EXPECT_TRUE(std::find(got.begin(), got.end(), "gdeadbeef") != got.end()) << v.path();
  }
}

TEST(VariantSelect, SpecificBuildBeatsGenericBuildOfSameGroup) {
  const std::vector<Candidate> cands = {cand(""), cand("cu128"), cand("cpu")};
  EXPECT_EQ(selected(view({"cu128"}), cands), Names{"cu128"});
  EXPECT_EQ(selected(view({"cpu"}), cands), Names{"cpu"});
  EXPECT_EQ(selected(view({"cu126"}), cands), Names{""});

  const std::vector<Candidate> torch_only = {cand(""), cand("torch2.8")};
  EXPECT_EQ(selected(view({"cu128", "torch2.8"}), torch_only), Names{"torch2.8"});
}

TEST(VariantSelect, WheelsWithoutBackendHintAreEligibleEverywhere) {
  const std::vector<Candidate> cands = {cand("torch2.8cxx11abi1")};
  for (const auto& v : {view({"cu128"}), view({"cpu"}), view({"rocm6.4", "torch2.8"})}) {
    EXPECT_EQ(selected(v, cands), Names{"torch2.8cxx11abi1"}) << v.path();
  }
}

TEST(VariantSelect, CpuAndRocmViews) {
  const std::vector<Candidate> cands = {cand("cpu.torch2.8"), cand("cu128torch2.8"),
                                        cand("rocm6.3torch2.8"), cand("rocm6.4torch2.8"),
                                        cand("rocm7.0torch2.8")};
  EXPECT_EQ(selected(view({"cpu", "torch2.8"}), cands), Names{"cpu.torch2.8"});
  EXPECT_EQ(selected(view({"rocm6.4"}), cands), Names{"rocm6.4torch2.8"});
  EXPECT_EQ(selected(view({"rocm6.3"}), cands), Names{"rocm6.3torch2.8"});
  EXPECT_TRUE(selected(view({"rocm6.2"}), cands).empty());
  EXPECT_EQ(selected(view({"rocm7.1"}), cands), Names{"rocm7.0torch2.8"});
}

TEST(VariantSelect, AbiMustMatchWhenNamed) {
  const std::vector<Candidate> cands = {cand("cu128torch2.8cxx11abiTRUE")};
  EXPECT_TRUE(selected(view({"cu128", "torch2.8", "cxx11abi0"}), cands).empty());
  EXPECT_EQ(selected(view({"cu128", "torch2.8", "cxx11abi1"}), cands).size(), 1U);
}

TEST(VariantSelect, UnknownAbiEligibleButBelowAMatch) {
  const std::vector<Candidate> both = {cand("cu128torch2.6"), cand("cu128torch2.6cxx11abi1")};
  EXPECT_EQ(selected(view({"cu128", "torch2.6", "cxx11abi1"}), both),
            Names{"cu128torch2.6cxx11abi1"});
  const std::vector<Candidate> unknown_only = {cand("cu128torch2.6")};
  EXPECT_EQ(selected(view({"cu128", "torch2.6", "cxx11abi1"}), unknown_only),
            Names{"cu128torch2.6"});
}

TEST(VariantSelect, AbiPreferenceFollowsTorchSeries) {
  const std::vector<Candidate> s26 = {cand("cu126torch2.6cxx11abiTRUE"),
                                      cand("cu126torch2.6cxx11abiFALSE"), cand("cu126torch2.6")};
  EXPECT_EQ(selected(view({"cu126", "torch2.6"}), s26), Names{"cu126torch2.6cxx11abiFALSE"});
  // Without a torch segment the wheel's own series decides.
  EXPECT_EQ(selected(view({"cu126"}), s26), Names{"cu126torch2.6cxx11abiFALSE"});

  const std::vector<Candidate> s27 = {cand("cu126torch2.7cxx11abiFALSE"),
                                      cand("cu126torch2.7cxx11abiTRUE"), cand("cu126torch2.7")};
  EXPECT_EQ(selected(view({"cu126", "torch2.7"}), s27), Names{"cu126torch2.7cxx11abiTRUE"});

  // Unknown ABI ranks between the default and the other one.
  const std::vector<Candidate> no_default = {cand("cu126torch2.7cxx11abiFALSE"),
                                             cand("cu126torch2.7")};
  EXPECT_EQ(selected(view({"cu126", "torch2.7"}), no_default), Names{"cu126torch2.7"});
}

TEST(VariantSelect, AbiOutranksCudaMinor) {
  const std::vector<Candidate> cands = {cand("cu128torch2.7cxx11abiFALSE"),
                                        cand("cu126torch2.7cxx11abiTRUE")};
  EXPECT_EQ(selected(view({"cu128", "torch2.7"}), cands), Names{"cu126torch2.7cxx11abiTRUE"});
}

TEST(VariantSelect, ViewWithoutTorchPrefersHighestSeries) {
  const std::vector<Candidate> cands = {cand("cu128torch2.7"), cand("cu128torch2.9"),
                                        cand("cu128torch2.8"), cand("cu128")};
  EXPECT_EQ(selected(view({"cu128"}), cands), Names{"cu128torch2.9"});
}

TEST(VariantSelect, MajorOnlyViewPrefersMajorOnlyThenLowestMinor) {
  EXPECT_EQ(selected(view({"cu12"}), {cand("cu128"), cand("cu12"), cand("cu126")}), Names{"cu12"});
  EXPECT_EQ(selected(view({"cu12"}), {cand("cu128"), cand("cu126"), cand("cu130")}),
            Names{"cu126"});
}

TEST(VariantSelect, ViewWithoutBackendPrefersNewestCuda) {
  const std::vector<Candidate> cands = {cand("cpu.torch2.8"), cand("torch2.8"),
                                        cand("cu126torch2.8"), cand("cu129torch2.8"),
                                        cand("rocm6.4torch2.8")};
  EXPECT_EQ(selected(view({"torch2.8"}), cands), Names{"cu129torch2.8"});
  EXPECT_EQ(selected(view({"torch2.8"}), {cand("cpu.torch2.8"), cand("torch2.8")}),
            Names{"torch2.8"});
}

TEST(VariantSelect, TorchWheelsThemselves) {
  auto torch_wheel = [](std::string version, std::string label) {
    Candidate c;
    c.hints = hints_for_distribution("torch", version, label, {}).value();
    c.group_key = version + "|cp312|cp312|manylinux_2_28_x86_64";
    c.filename = "torch-" + version + "+" + label;
    return c;
  };
  const std::vector<Candidate> cands = {torch_wheel("2.8.0", "cu128"),
                                        torch_wheel("2.8.0", "cu126"),
                                        torch_wheel("2.9.0", "cu128"), torch_wheel("2.8.0", "cpu")};
  EXPECT_EQ(selected(view({"cu128", "torch2.8"}), cands), Names{"torch-2.8.0+cu128"});
  EXPECT_EQ(selected(view({"cu126", "torch2.9"}), cands), Names{});
  EXPECT_EQ(selected(view({"cpu", "torch2.8"}), cands), Names{"torch-2.8.0+cpu"});
}

TEST(VariantSelect, OneBestPerGroupInInputOrder) {
  const std::vector<Candidate> cands = {cand("cu126torch2.8", "b"), cand("cu128torch2.8", "a"),
                                        cand("cu128torch2.8", "b"), cand("cu126torch2.8", "a"),
                                        cand("cu128torch2.8", "c")};
  const auto idx = select_for_view(view({"cu128", "torch2.8"}), cands);
  EXPECT_EQ(idx, (std::vector<std::size_t>{1, 2, 4}));
}

TEST(VariantSelect, YankedBuildDoesNotHideWorkingFallback) {
  std::vector<Candidate> cands = {cand("cu128torch2.8"), cand("cu126torch2.8")};
  cands[0].yanked = true;
  EXPECT_EQ(selected(view({"cu128", "torch2.8"}), cands), Names{"cu126torch2.8"});
  cands.pop_back();
  EXPECT_EQ(selected(view({"cu128", "torch2.8"}), cands), Names{"cu128torch2.8"});
}

TEST(VariantSelect, TiesBreakByBuildTagThenUploadThenFilename) {
  const auto v = view({"cu128", "torch2.8"});
  // Build tags compare by their numeric prefix: 10 > 9, and any tag beats none.
  std::vector<Candidate> tags = {cand("cu128torch2.8", std::string(kGroup), "9"),
                                 cand("cu128torch2.8", std::string(kGroup), "10"),
                                 cand("cu128torch2.8", std::string(kGroup), "")};
  EXPECT_EQ(select_for_view(v, tags), (std::vector<std::size_t>{1}));
  tags = {cand("cu128torch2.8", std::string(kGroup), "1b"),
          cand("cu128torch2.8", std::string(kGroup), "01a")};
  EXPECT_EQ(select_for_view(v, tags), (std::vector<std::size_t>{0}));

  const std::vector<Candidate> uploads = {cand("cu128torch2.8", std::string(kGroup), "1", 200),
                                          cand("cu128torch2.8", std::string(kGroup), "1", 300),
                                          cand("cu128torch2.8", std::string(kGroup), "1", 100)};
  EXPECT_EQ(select_for_view(v, uploads), (std::vector<std::size_t>{1}));

  const std::vector<Candidate> names = {cand("cu128torch2.8"), cand("cu128.torch2.8"),
                                        cand("cu128torch2.8.0")};
  EXPECT_EQ(selected(v, names), Names{"cu128torch2.8.0"});
}

TEST(VariantSelect, ResultIndependentOfInputOrder) {
  std::vector<Candidate> cands = {cand("cu126torch2.8", std::string(kGroup), "", 5),
                                  cand("cu128torch2.8", std::string(kGroup), "", 1),
                                  cand("cu128torch2.8.0", std::string(kGroup), "", 1),
                                  cand("cu12torch2.8"), cand("")};
  const auto v = view({"cu128", "torch2.8"});
  const Names forward = selected(v, cands);
  std::reverse(cands.begin(), cands.end());
  EXPECT_EQ(selected(v, cands), forward);
  EXPECT_EQ(forward, Names{"cu128torch2.8.0"});
}

TEST(VariantSelect, EmptyInputAndEmptyView) {
  EXPECT_TRUE(select_for_view(view({"cu128"}), {}).empty());
  const std::vector<Candidate> cands = {cand("cu128torch2.8"), cand("cpu", "other")};
  EXPECT_EQ(select_for_view(ViewSelector{}, cands), (std::vector<std::size_t>{0, 1}));
}

}  // namespace
}  // namespace wf::core
