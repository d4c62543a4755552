// Binary findings (core/binding.hpp) over shared objects built at test time with gcc: an
// extension bound to one torch series (it imports c10:: C++ symbols) against one built on the
// stable C ABI (aoti_torch_* only), the CUDA runtime it links (a stub libcudart.so.12 built
// here), its glibc floor, and the same objects read from inside a wheel next to a damaged one.

#include "wheelforge/core/binding.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "shell.hpp"
#include "wheelforge/archive/elf.hpp"
#include "zip_builder.hpp"

namespace wf::archive {
namespace {

namespace fs = std::filesystem;
using fixtures::have_tool;
using fixtures::quote;
using fixtures::shell;

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

class BindingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_tool("gcc") || !have_tool("g++")) {
      GTEST_SKIP() << "gcc or g++ is not on PATH (Debian package build-essential)";
    }
    dir_ = fs::temp_directory_path() /
           ("wf-binding-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!dir_.empty() && !HasFailure()) fs::remove_all(dir_);
  }

  fs::path compile(const std::string& command, const std::string& file, std::string_view source,
                   const std::string& output) {
    std::ofstream(dir_ / file, std::ios::binary) << source;
    const auto [status, log] =
        shell("cd " + quote(dir_) + " && " + command + " " + file + " -o " + output);
    EXPECT_EQ(status, 0) << command << " " << file << ":\n" << log;
    return dir_ / output;
  }

  core::BinaryFindings findings(const fs::path& so) {
    auto elf = read_elf_file(so);
    EXPECT_TRUE(elf) << elf.error().message;
    if (!elf) return {};
    return core::find_binary(core::WheelBinary{so.filename().string(), 0, *elf, ""});
  }

  // An extension module that calls c10::detail::torchCheckFail, as torch's C++ API does.
  fs::path series_bound() {
    return compile("g++ -shared -fPIC -O1", "bound.cpp",
                   "#include <string>\n"
                   "namespace c10 { namespace detail {\n"
                   "[[noreturn]] void torchCheckFail(const char*, const char*, unsigned,\n"
                   "                                 const std::string&); } }\n"
                   "extern \"C\" void* PyInit__bound() {\n"
                   "  c10::detail::torchCheckFail(\"f\", \"file\", 1, std::string(\"msg\"));\n"
                   "}\n",
                   "_bound.cpython-312-x86_64-linux-gnu.so");
  }

  // An extension module on the stable C ABI only.
  fs::path stable_abi() {
    return compile("gcc -shared -fPIC -O1", "stable.c",
                   "typedef struct AtenTensorOpaque* AtenTensorHandle;\n"
                   "int aoti_torch_get_device_type(AtenTensorHandle, int*);\n"
                   "int torch_call_dispatcher(const char*, const char*, void*, long, long);\n"
                   "int device_of(AtenTensorHandle t) {\n"
                   "  int d = 0; aoti_torch_get_device_type(t, &d);\n"
                   "  torch_call_dispatcher(\"aten::add\", \"Tensor\", 0, 0, 0); return d; }\n"
                   "void* PyInit__stable(void) { return 0; }\n",
                   "_stable.abi3.so");
  }

  fs::path dir_;
};

TEST_F(BindingTest, SeriesBoundExtensionImportsC10Symbols) {
  const auto f = findings(series_bound());
  EXPECT_EQ(f.binding, core::TorchBinding::series);
  EXPECT_THAT(f.binding_symbol, ::testing::StartsWith("_ZN3c106detail14torchCheckFail"));
  EXPECT_TRUE(f.extension_module);
  EXPECT_FALSE(f.cuda_major);
  EXPECT_EQ(f.cuda_library, "");
  // A C++ library: libstdc++ symbol versions give a GLIBCXX floor.
  EXPECT_THAT(f.glibcxx, ::testing::StartsWith("3.4."));
}

TEST_F(BindingTest, StableAbiExtensionImportsOnlyTheCShims) {
  const auto f = findings(stable_abi());
  EXPECT_EQ(f.binding, core::TorchBinding::stable_abi);
  // The first of the two in .dynsym order.
  EXPECT_THAT(f.binding_symbol,
              ::testing::AnyOf("aoti_torch_get_device_type", "torch_call_dispatcher"));
  EXPECT_TRUE(f.extension_module);
  EXPECT_EQ(f.glibcxx, "");
}

TEST_F(BindingTest, CudaRuntimeFromAStubLibcudart) {
  compile("gcc -shared -fPIC -Wl,-soname,libcudart.so.12", "cudart.c",
          "int cudaGetDeviceCount(int* n) { *n = 0; return 0; }\n", "libcudart.so.12");
  const fs::path so = compile("gcc -shared -fPIC -L. -l:libcudart.so.12", "ext.c",
                              "int cudaGetDeviceCount(int*);\n"
                              "int devices(void) { int n; cudaGetDeviceCount(&n); return n; }\n",
                              "_ext.so");
  // -l before the source drops an unused library with --as-needed; make sure it is there.
  auto f = findings(so);
  if (f.needed.empty() || f.needed.front() != "libcudart.so.12") {
    const auto [status, log] = shell("cd " + quote(dir_) +
                                     " && gcc -shared -fPIC ext.c -o _ext.so -Wl,--no-as-needed"
                                     " -L. -l:libcudart.so.12");
    ASSERT_EQ(status, 0) << log;
    f = findings(so);
  }
  EXPECT_THAT(f.needed, ::testing::Contains("libcudart.so.12"));
  EXPECT_EQ(f.cuda_major, 12);
  EXPECT_EQ(f.cuda_library, "libcudart.so.12");

  core::WheelFindings wheel;
  wheel.binaries.push_back(f);
  const auto check = [&](std::string_view label) {
    return core::check_label_against_binaries(core::parse_local_label(label), label, wheel);
  };
  EXPECT_TRUE(check("cu128torch2.8"));
  EXPECT_TRUE(check("cu12"));
  const auto wrong = check("cu130torch2.9");
  ASSERT_FALSE(wrong);
  EXPECT_THAT(wrong.error().message, ::testing::HasSubstr("_ext.so links libcudart.so.12"));
  EXPECT_FALSE(check("cpu"));
}

TEST_F(BindingTest, NvccSharedRuntimeNamesTheToolkitsMajor) {
  const fs::path nvcc = "/usr/local/cuda/bin/nvcc";
  if (!fs::exists(nvcc)) GTEST_SKIP() << nvcc << " is not installed";
  const auto [status, version] = shell(quote(nvcc) + " --version");
  ASSERT_EQ(status, 0) << version;
  // "Cuda compilation tools, release 12.8, V12.8.93" (docs/torch-labels.md).
  const auto at = version.find("release ");
  ASSERT_NE(at, std::string::npos) << version;
  const int major = std::stoi(version.substr(at + 8));
  const fs::path so =
      compile(nvcc.string() + " -Xcompiler -fPIC -shared -cudart shared", "kernel.cu",
              "__global__ void add(float* x) { x[threadIdx.x] += 1.0f; }\n"
              "extern \"C\" void launch(float* x) { add<<<1, 32>>>(x); }\n",
              "libkernel.so");
  const auto f = findings(so);
  EXPECT_EQ(f.cuda_major, major);
  EXPECT_EQ(f.cuda_library, "libcudart.so." + std::to_string(major));
  core::WheelFindings wheel;
  wheel.binaries.push_back(f);
  const std::string matching = "cu" + std::to_string(major) + "0";
  const std::string other = "cu" + std::to_string(major == 12 ? 13 : 12) + "0";
  EXPECT_TRUE(
      core::check_label_against_binaries(core::parse_local_label(matching), matching, wheel));
  EXPECT_FALSE(core::check_label_against_binaries(core::parse_local_label(other), other, wheel));
}

TEST_F(BindingTest, GlibcFloorOfAnObjectThatCallsGetrandom) {
  // getrandom appeared in glibc 2.25 (GLIBC_2.25 on every architecture).
  const fs::path so =
      compile("gcc -shared -fPIC -O1", "rnd.c",
              "#include <sys/random.h>\n"
              "long fill(void* p, unsigned long n) { return getrandom(p, n, 0); }\n",
              "librnd.so");
  const auto f = findings(so);
  EXPECT_EQ(f.glibc, "2.25");
  EXPECT_EQ(f.binding, core::TorchBinding::none);
  EXPECT_FALSE(f.extension_module);
}

TEST_F(BindingTest, WheelWithADamagedBinaryIsStillAnswered) {
  const std::string bound = read_bytes(series_bound());
  const std::string stable = read_bytes(stable_abi());
  std::string truncated = bound.substr(0, 40);  // the magic, then nothing readable
  std::string garbage =
      "\x7f"
      "ELF";
  garbage += std::string(200, '\xff');
  const fs::path wheel = dir_ / "demo-1.0-cp312-cp312-linux_x86_64.whl";
  std::ofstream(wheel, std::ios::binary) << fixtures::build_zip({
      {"demo/_bound.so", bound, fixtures::Compression::deflate},
      {"demo/_stable.so", stable},
      {"demo/_truncated.so", truncated},
      {"demo/garbage.so", garbage, fixtures::Compression::deflate},
      {"demo-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n"},
  });
  auto binaries = inspect_wheel_binaries(wheel);
  ASSERT_TRUE(binaries) << binaries.error().message;
  const auto w = core::find_wheel(*binaries, {}, std::vector<std::string>{"torch>=2.9"});
  ASSERT_EQ(w.binaries.size(), 4U);
  EXPECT_EQ(w.binaries[0].binding, core::TorchBinding::series);
  EXPECT_EQ(w.binaries[1].binding, core::TorchBinding::stable_abi);
  EXPECT_THAT(w.binaries[2].problem, ::testing::HasSubstr("truncated"));
  EXPECT_THAT(w.binaries[3].problem, ::testing::HasSubstr("unsupported ELF class"));
  EXPECT_EQ(w.binding(), core::TorchBinding::series);
  EXPECT_FALSE(w.torch_from);  // series-bound: no span
  const auto back = core::decode_findings(core::encode_findings(w));
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, w);
}

}  // namespace
}  // namespace wf::archive
