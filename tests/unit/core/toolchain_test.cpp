#include "wheelforge/core/toolchain.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace wf::core {
namespace {

using ::testing::HasSubstr;

Cell cell(const char* python, TorchSeries torch, CudaVersion cuda) {
  return Cell{python, torch, cuda};
}

TEST(NvccVersion, ReadsTheReleaseAndTheFullVersion) {
  const auto v13 = parse_nvcc_version(
      "nvcc: NVIDIA (R) Cuda compiler driver\n"
      "Copyright (c) 2005-2025 NVIDIA Corporation\n"
      "Built on Wed_Aug_20_01:58:59_PM_PDT_2025\n"
      "Cuda compilation tools, release 13.0, V13.0.88\n"
      "Build cuda_13.0.r13.0/compiler.36424714_0\n");
  ASSERT_TRUE(v13);
  EXPECT_EQ(v13->release, (CudaVersion{13, 0}));
  EXPECT_EQ(v13->full, "13.0.88");
  const auto v12 = parse_nvcc_version("Cuda compilation tools, release 12.8, V12.8.93\r\n");
  ASSERT_TRUE(v12);
  EXPECT_EQ(v12->release, (CudaVersion{12, 8}));
  EXPECT_EQ(v12->full, "12.8.93");
  // Without a V-number the release stands for the full version.
  const auto bare = parse_nvcc_version("Cuda compilation tools, release 11.8\n");
  ASSERT_TRUE(bare);
  EXPECT_EQ(bare->full, "11.8");
}

TEST(NvccVersion, NothingToReadIsNullopt) {
  EXPECT_FALSE(parse_nvcc_version(""));
  EXPECT_FALSE(parse_nvcc_version("nvcc: NVIDIA (R) Cuda compiler driver\n"));
  EXPECT_FALSE(parse_nvcc_version("bash: nvcc: command not found\n"));
  EXPECT_FALSE(parse_nvcc_version("Cuda compilation tools, release banana\n"));
  EXPECT_FALSE(parse_nvcc_version("Cuda compilation tools, release 012.8\n"));
}

TEST(EnvironmentProbe, ParsesTheProbeOutput) {
  const auto p = parse_environment_probe(
      "some sitecustomize chatter\n"
      "python_version=3.12.1\n"
      "python_executable=/data/builds/envs/x/bin/python\n"
      "torch_version=2.8.0+cu128\n"
      "torch_cuda=12.8\n");
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->python_version, "3.12.1");
  EXPECT_EQ(p->python_executable, "/data/builds/envs/x/bin/python");
  EXPECT_EQ(p->torch_version, "2.8.0+cu128");
  EXPECT_EQ(p->torch_cuda, "12.8");
  EXPECT_EQ(p->torch_error, "");

  const auto cpu =
      parse_environment_probe("python_version=3.11.7\ntorch_version=2.8.0+cpu\ntorch_cuda=None\n");
  ASSERT_TRUE(cpu);
  EXPECT_FALSE(cpu->torch_cuda);

  const auto missing = parse_environment_probe(
      "python_version=3.11.7\ntorch_error=ModuleNotFoundError: No module named 'torch'\n");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->torch_version, "");
  EXPECT_EQ(missing->torch_error, "ModuleNotFoundError: No module named 'torch'");

  // The torch wheel's tags, platform parts only, each once (a compressed tag set counts each).
  const auto tagged = parse_environment_probe(
      "python_version=3.12.1\ntorch_version=2.5.1\ntorch_cuda=12.4\n"
      "torch_wheel_tags=cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64 "
      "cp312-cp312-manylinux2014_x86_64 oddity\n");
  ASSERT_TRUE(tagged);
  EXPECT_EQ(tagged->torch_platform_tags,
            (std::vector<std::string>{"manylinux_2_17_x86_64", "manylinux2014_x86_64"}));
  EXPECT_TRUE(p->torch_platform_tags.empty());
  const auto built = parse_environment_probe("python_version=3.12.1\ntorch_wheel_tags=\n");
  ASSERT_TRUE(built);
  EXPECT_TRUE(built->torch_platform_tags.empty());

  const auto nothing = parse_environment_probe("Traceback (most recent call last):\n");
  ASSERT_FALSE(nothing);
  EXPECT_EQ(nothing.error().code, Errc::invalid);
}

TEST(EnvironmentProbe, ScriptPrintsEveryKeyTheParserReads) {
  const std::string_view script = environment_probe_script();
  for (const char* key : {"python_version=", "python_executable=", "torch_version=", "torch_cuda=",
                          "torch_error=", "torch_wheel_tags="}) {
    EXPECT_THAT(std::string(script), HasSubstr(std::string("'") + key)) << key;
  }
}

TEST(CheckPython, MajorMinorMustMatch) {
  const Cell c = cell("3.12", {2, 8}, {12, 8});
  EXPECT_TRUE(check_python(c, "3.12.1"));
  EXPECT_TRUE(check_python(c, "3.12.0rc1"));
  const auto other = check_python(c, "3.11.7");
  ASSERT_FALSE(other);
  EXPECT_EQ(other.error().message, "Python 3.12 cell, but the interpreter is Python 3.11.7");
  EXPECT_FALSE(check_python(c, "3.1"));
  EXPECT_FALSE(check_python(c, "3.120.1"));
  EXPECT_FALSE(check_python(c, ""));
}

EnvironmentProbe torch(std::string version, std::optional<std::string> cuda) {
  EnvironmentProbe p;
  p.python_version = "3.12.1";
  p.torch_version = std::move(version);
  p.torch_cuda = std::move(cuda);
  return p;
}

TEST(CheckTorch, SeriesAndCudaMajorMustMatch) {
  const Cell cu128 = cell("3.12", {2, 8}, {12, 8});
  EXPECT_TRUE(check_torch(cu128, torch("2.8.0+cu128", "12.8")));
  EXPECT_TRUE(check_torch(cu128, torch("2.8.1+cu126", "12.6"))) << "same major, older minor";
  EXPECT_TRUE(check_torch(cu128, torch("2.8.0", "12.9"))) << "same major, newer minor";

  const auto cu130 = check_torch(cu128, torch("2.8.0+cu130", "13.0"));
  ASSERT_FALSE(cu130);
  EXPECT_EQ(cu130.error().message,
            "torch 2.8.0+cu130 was built for CUDA 13.0, the cell is CUDA 12.8 (the CUDA major "
            "must match)");
  const auto cpu = check_torch(cu128, torch("2.8.0+cpu", std::nullopt));
  ASSERT_FALSE(cpu);
  EXPECT_EQ(cpu.error().message,
            "torch 2.8.0+cpu is a CPU build (torch.version.cuda is None), the cell is CUDA 12.8");
  const auto series = check_torch(cu128, torch("2.9.0+cu128", "12.8"));
  ASSERT_FALSE(series);
  EXPECT_EQ(series.error().message, "torch 2.9.0+cu128 is not of the cell's series 2.8");
  EXPECT_FALSE(check_torch(cu128, torch("2.80.0+cu128", "12.8")));
  EXPECT_FALSE(check_torch(cu128, torch("garbage", "12.8")));

  EnvironmentProbe none;
  none.python_version = "3.12.1";
  none.torch_error = "ModuleNotFoundError: No module named 'torch'";
  const auto missing = check_torch(cu128, none);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().message,
            "torch cannot be imported in the build environment (ModuleNotFoundError: No module "
            "named 'torch')");
}

TEST(CheckNvcc, ReleaseMustBeTheCellsCuda) {
  const Cell cu128 = cell("3.12", {2, 8}, {12, 8});
  EXPECT_TRUE(check_nvcc(cu128, NvccVersion{{12, 8}, "12.8.93"}, "/usr/local/cuda-12.8/bin/nvcc"));
  const auto other = check_nvcc(cu128, NvccVersion{{13, 0}, "13.0.88"}, "/usr/local/cuda/bin/nvcc");
  ASSERT_FALSE(other);
  EXPECT_EQ(other.error().message,
            "CUDA 12.8 cell, but /usr/local/cuda/bin/nvcc is CUDA 13.0 (V13.0.88)");
  EXPECT_FALSE(check_nvcc(cu128, NvccVersion{{12, 6}, "12.6.85"}, "nvcc"))
      << "the minor must match too: the label names it";
}

}  // namespace
}  // namespace wf::core
