// Binary findings (core/binding.hpp) over hand-made ELF facts, the label checks, the stored
// form, torch minimums, and what the findings and the inferred C++ ABI change in view
// selection. The same findings over objects built with gcc: tests/unit/archive/binding_test.cpp.

#include "wheelforge/core/binding.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace wf::core {
namespace {

ElfSymbol undefined(std::string name) {
  ElfSymbol s;
  s.name = std::move(name);
  s.defined = false;
  return s;
}

ElfSymbol exported(std::string name) {
  ElfSymbol s;
  s.name = std::move(name);
  s.defined = true;
  s.type = SymbolType::func;
  return s;
}

WheelBinary binary(std::string path, std::vector<std::string> needed,
                   std::vector<ElfSymbol> symbols) {
  ElfInfo elf;
  elf.machine = 62;  // EM_X86_64
  elf.has_dynamic = true;
  elf.needed = std::move(needed);
  elf.symbols = std::move(symbols);
  return WheelBinary{std::move(path), 1000, elf, ""};
}

WheelFindings findings_of(std::vector<WheelBinary> binaries, const VariantHints& hints = {},
                          std::vector<std::string> requires_dist = {}) {
  return find_wheel(binaries, hints, requires_dist);
}

TEST(TorchSymbols, CxxNamespacesAreSeriesBound) {
  for (const char* name :
       {"_ZN3c106detail14torchCheckFailEPKcS2_jRKSs", "_ZNK2at10TensorBase4sizeEl",
        "_ZN2at4_ops3add4callERKNS_6TensorES4_RKN3c106ScalarE", "_ZTVN3c1011StorageImplE",
        "_ZTIN5torch8autograd4NodeE", "_ZN5torch3jit8tracer9warn_implEv"}) {
    EXPECT_TRUE(is_torch_cxx_symbol(name)) << name;
  }
  for (const char* name : {"_ZN4c10x3fooEv", "_ZN3c1", "_ZN8pybind116detail5errorEv", "c10_foo",
                           "_ZNSt6vectorIiSaIiEE9push_backERKi", "_ZN6atomic3fooEv"}) {
    EXPECT_FALSE(is_torch_cxx_symbol(name)) << name;
  }
  EXPECT_TRUE(is_torch_stable_symbol("aoti_torch_get_device_type"));
  EXPECT_TRUE(is_torch_stable_symbol("torch_call_dispatcher"));
  EXPECT_FALSE(is_torch_stable_symbol("_ZN5torch6stable6TensorD1Ev"));
}

TEST(BinaryFindings, BindingCudaAndExtensionModule) {
  const auto bound = find_binary(binary(
      "pkg/_C.cpython-312-x86_64-linux-gnu.so", {"libc10.so", "libcudart.so.12", "libc.so.6"},
      {undefined("memcpy"), undefined("aoti_torch_empty_strided"),
       undefined("_ZN3c1019UndefinedTensorImpl10_singletonE"), exported("PyInit__C")}));
  EXPECT_EQ(bound.binding, TorchBinding::series);
  EXPECT_EQ(bound.binding_symbol, "_ZN3c1019UndefinedTensorImpl10_singletonE");
  EXPECT_EQ(bound.cuda_major, 12);
  EXPECT_EQ(bound.cuda_library, "libcudart.so.12");
  EXPECT_TRUE(bound.extension_module);
  EXPECT_EQ(bound.arch, "x86_64");

  const auto stable = find_binary(
      binary("pkg/_C.abi3.so", {"libtorch.so"},
             {undefined("aoti_torch_get_device_type"), undefined("torch_new_list_reserve_size")}));
  EXPECT_EQ(stable.binding, TorchBinding::stable_abi);
  EXPECT_EQ(stable.binding_symbol, "aoti_torch_get_device_type");
  EXPECT_FALSE(stable.cuda_major);
  EXPECT_EQ(stable.cuda_library, "");
  EXPECT_FALSE(stable.extension_module);

  // A torch-defined symbol exported by the binary itself binds nothing.
  const auto own = find_binary(binary("libx.so", {"libcuda.so.1"}, {exported("_ZN3c103fooEv")}));
  EXPECT_EQ(own.binding, TorchBinding::none);
  EXPECT_EQ(own.cuda_library, "libcuda.so.1");
  EXPECT_FALSE(own.cuda_major);

  const auto unreadable = find_binary(WheelBinary{"bad.so", 7, std::nullopt, "not an ELF file"});
  EXPECT_EQ(unreadable.problem, "not an ELF file");
  EXPECT_EQ(unreadable.binding, TorchBinding::none);
}

TEST(BinaryFindings, WheelSummaryAndStableSpan) {
  const std::vector<std::string> requires_dist = {"torch>=2.9", "numpy"};
  auto stable = findings_of({binary("a.so", {}, {undefined("aoti_torch_new_tensor_handle")})}, {},
                            requires_dist);
  EXPECT_EQ(stable.binding(), TorchBinding::stable_abi);
  ASSERT_TRUE(stable.torch_from);
  EXPECT_EQ(stable.torch_from->str(), "2.9");

  // A label that names a series has no span.
  VariantHints labelled;
  labelled.torch = TorchSeries{2, 9};
  EXPECT_FALSE(
      findings_of({binary("a.so", {}, {undefined("aoti_torch_x")})}, labelled, requires_dist)
          .torch_from);
  // Nor has a series-bound wheel, nor one without a lower bound.
  auto mixed = findings_of({binary("a.so", {}, {undefined("aoti_torch_x")}),
                            binary("b.so", {}, {undefined("_ZNK2at6Tensor3dimEv")})},
                           {}, requires_dist);
  EXPECT_EQ(mixed.binding(), TorchBinding::series);
  EXPECT_EQ(mixed.binding_evidence()->path, "b.so");
  EXPECT_FALSE(mixed.torch_from);
  EXPECT_FALSE(
      findings_of({binary("a.so", {}, {undefined("aoti_torch_x")})}, {}, {"torch"}).torch_from);
}

TEST(TorchMinimum, LowerBounds) {
  const auto min = [](std::vector<std::string> r) {
    const auto s = torch_minimum_from_requirements(r);
    return s ? s->str() : std::string("none");
  };
  EXPECT_EQ(min({"torch>=2.9"}), "2.9");
  EXPECT_EQ(min({"torch>=2.9.1,<3"}), "2.9");
  EXPECT_EQ(min({"torch (>=2.10)"}), "2.10");
  EXPECT_EQ(min({"torch~=2.9"}), "2.9");
  EXPECT_EQ(min({"torch==2.8.*"}), "2.8");
  EXPECT_EQ(min({"torch"}), "none");
  EXPECT_EQ(min({"torch<3"}), "none");
  EXPECT_EQ(min({"torch>=2.9; python_version>'3.9'"}), "none");
  EXPECT_EQ(min({"numpy>=2.9"}), "none");
  EXPECT_EQ(min({"torch>=2.10,<2.9"}), "none");
}

TEST(LabelCheck, CudaMajorMustAgree) {
  const auto wheel = findings_of({binary("pkg/_C.so", {"libcudart.so.13"}, {})});
  const auto check = [&](std::string_view label) {
    return check_label_against_binaries(parse_local_label(label), label, wheel);
  };
  EXPECT_TRUE(check("cu130"));
  EXPECT_TRUE(check("cu13torch2.9"));
  EXPECT_TRUE(check("torch2.9"));  // no backend in the label: nothing to contradict
  EXPECT_TRUE(check(""));
  const auto wrong = check("cu128torch2.8");
  ASSERT_FALSE(wrong);
  EXPECT_EQ(wrong.error().code, Errc::invalid);
  EXPECT_NE(wrong.error().message.find("'+cu128torch2.8'"), std::string::npos);
  EXPECT_NE(wrong.error().message.find("pkg/_C.so links libcudart.so.13 (CUDA 13)"),
            std::string::npos)
      << wrong.error().message;
  const auto cpu = check("cpu");
  ASSERT_FALSE(cpu);
  EXPECT_NE(cpu.error().message.find("says cpu, but pkg/_C.so links libcudart.so.13"),
            std::string::npos)
      << cpu.error().message;
  EXPECT_FALSE(check("rocm6.4"));

  // The driver library alone says CUDA without a major: only CPU and ROCm labels are wrong.
  const auto driver = findings_of({binary("k.so", {"libcuda.so.1"}, {})});
  EXPECT_TRUE(check_label_against_binaries(parse_local_label("cu128"), "cu128", driver));
  EXPECT_FALSE(check_label_against_binaries(parse_local_label("cpu"), "+cpu", driver));
  // A CPU build that links no CUDA library passes, whatever torch it binds to.
  const auto cpu_ok = findings_of({binary("k.so", {"libc10.so"}, {undefined("_ZN3c103fooEv")})});
  EXPECT_TRUE(check_label_against_binaries(parse_local_label("cpu"), "cpu", cpu_ok));
}

TEST(StoredFindings, RoundTrip) {
  auto w =
      findings_of({binary("pkg/_C.so", {"libcudart.so.12", "libc.so.6"},
                          {undefined("aoti_torch_x"), exported("PyInit__C")}),
                   WheelBinary{"pkg/bad.so", 9, std::nullopt, "the ELF header\tis\ntruncated"}},
                  {}, {"torch>=2.10"});
  w.binaries[0].glibc = "2.17";
  w.binaries[0].glibcxx = "3.4.21";
  const std::string text = encode_findings(w);
  const auto back = decode_findings(text);
  ASSERT_TRUE(back) << text;
  EXPECT_EQ(back->binaries.at(1).problem, "the ELF header?is?truncated");
  w.binaries[1].problem = back->binaries[1].problem;
  EXPECT_EQ(*back, w);
  EXPECT_EQ(back->torch_from->str(), "2.10");
  EXPECT_FALSE(decode_findings(""));
  EXPECT_FALSE(decode_findings("something else\n"));
  EXPECT_FALSE(decode_findings("wf-binaries 1\t\nonly\tthree\tfields\n"));
  const auto empty = decode_findings("wf-binaries 1\t\n");
  ASSERT_TRUE(empty);
  EXPECT_TRUE(empty->binaries.empty());
}

// ---- views ------------------------------------------------------------------------------------

Candidate candidate(std::string_view label, std::string filename) {
  Candidate c;
  c.hints = parse_local_label(label);
  c.group_key = "1.0|cp312|cp312|linux_x86_64";
  c.filename = std::move(filename);
  c.linux_binary = true;
  return c;
}

std::vector<std::string> listed(std::string_view view_path, const std::vector<Candidate>& cs) {
  std::vector<std::string_view> segments;
  const std::string path(view_path);
  std::vector<std::string> owned;
  std::size_t start = 0;
  while (start < path.size()) {
    const auto slash = path.find('/', start);
    owned.push_back(path.substr(start, slash - start));
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  for (const auto& s : owned) segments.push_back(s);
  auto view = parse_view_selector(segments);
  EXPECT_TRUE(view) << view_path;
  std::vector<std::string> out;
  for (const auto i : select_for_view(*view, cs)) out.push_back(cs[i].filename);
  return out;
}

TEST(ViewAbiInference, ExactMinorBeatsMajorOnlyOnceTheAbiIsInferred) {
  const std::vector<Candidate> cs = {candidate("cu12torch2.8cxx11abiTRUE", "major-only-true"),
                                     candidate("cu128torch2.8", "exact")};
  EXPECT_EQ(listed("cu128/torch2.8", cs), std::vector<std::string>{"exact"});
  EXPECT_EQ(listed("cu128/torch2.8/cxx11abi1", cs), std::vector<std::string>{"exact"});
  // The inferred ABI is TRUE: an old-ABI view takes neither.
  EXPECT_TRUE(listed("cu128/torch2.8/cxx11abi0", cs).empty());
  // Up to 2.6 nothing is inferred: the series' default (FALSE) outranks the unknown ABI.
  const std::vector<Candidate> old = {candidate("cu12torch2.6cxx11abiFALSE", "major-only-false"),
                                      candidate("cu126torch2.6", "exact")};
  EXPECT_EQ(listed("cu126/torch2.6", old), std::vector<std::string>{"major-only-false"});
  EXPECT_EQ(listed("cu126/torch2.6/cxx11abi1", old), std::vector<std::string>{"exact"});
  // Not a Linux wheel: no inference, so the label's TRUE wins as before.
  auto mac = cs;
  for (auto& c : mac) c.linux_binary = false;
  EXPECT_EQ(listed("cu128/torch2.8", mac), std::vector<std::string>{"major-only-true"});
}

TEST(ViewStableSpan, FromItsMinimumOnAndBelowSeriesBoundBuilds) {
  Candidate stable = candidate("cu130", "stable");
  stable.torch_from = TorchSeries{2, 9};
  const std::vector<Candidate> only = {stable};
  EXPECT_TRUE(listed("cu130/torch2.8", only).empty());
  for (const char* view : {"cu130/torch2.9", "cu130/torch2.10", "cu130/torch2.13", "cu130"}) {
    EXPECT_EQ(listed(view, only), std::vector<std::string>{"stable"}) << view;
  }
  EXPECT_TRUE(listed("cu128/torch2.9", only).empty());  // another CUDA major
  const std::vector<Candidate> both = {stable, candidate("cu130torch2.10", "bound")};
  EXPECT_EQ(listed("cu130/torch2.10", both), std::vector<std::string>{"bound"});
  EXPECT_EQ(listed("cu130/torch2.9", both), std::vector<std::string>{"stable"});
}

}  // namespace
}  // namespace wf::core
