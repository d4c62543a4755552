// failure_cause over logs shaped like the ones real builds write: pip's framing around a PEP
// 517 backend, torch.utils.cpp_extension with ninja, setuptools, nvcc and gcc errors, the OOM
// killer, and pip failing to find a requirement.

#include "wheelforge/core/build_failure.hpp"

#include <gtest/gtest.h>

#include <string>

namespace wf::core {
namespace {

TEST(FailureCause, NvccErrorInsidePipsFraming) {
  const std::string log =
      "==> [building] attempt 1 with MAX_JOBS=2 NVCC_THREADS=1\n"
      "Processing /data/builds/job-7/src\n"
      "  Preparing metadata (pyproject.toml): started\n"
      "  Preparing metadata (pyproject.toml): finished with status 'done'\n"
      "Building wheels for collected packages: wf-demo-ext\n"
      "  Building wheel for wf-demo-ext (pyproject.toml): started\n"
      "  Building wheel for wf-demo-ext (pyproject.toml): finished with status 'error'\n"
      "  error: subprocess-exited-with-error\n"
      "  \n"
      "  \xc3\x97 Building wheel for wf-demo-ext (pyproject.toml) did not run successfully.\n"
      "  \xe2\x94\x82 exit code: 1\n"
      "  \xe2\x95\xb0\xe2\x94\x80> [9 lines of output]\n"
      "      wf_backend: /usr/local/cuda/bin/nvcc -shared -Xcompiler -fPIC -O2 -o _kernel.so "
      "kernel.cu\n"
      "      kernel.cu(3): error: identifier \"x\" is undefined\n"
      "      kernel.cu(9): error: expected a \";\"\n"
      "      \n"
      "      2 errors detected in the compilation of \"kernel.cu\".\n"
      "      Traceback (most recent call last):\n"
      "        File \"/data/builds/job-7/src/wf_backend.py\", line 120, in _compile\n"
      "      subprocess.CalledProcessError: Command '['/usr/local/cuda/bin/nvcc', '-shared']' "
      "returned non-zero exit status 2.\n"
      "      [end of output]\n"
      "  \n"
      "  note: This error originates from a subprocess, and is likely not a problem with pip.\n"
      "  ERROR: Failed building wheel for wf-demo-ext\n"
      "Failed to build wf-demo-ext\n"
      "ERROR: Failed to build one or more wheels\n";
  EXPECT_EQ(failure_cause(log), "kernel.cu(3): error: identifier \"x\" is undefined");
}

TEST(FailureCause, GccErrorUnderNinjaAndCppExtension) {
  const std::string log =
      "running bdist_wheel\n"
      "running build_ext\n"
      "/venv/lib/python3.12/site-packages/torch/utils/cpp_extension.py:2356: UserWarning: "
      "TORCH_CUDA_ARCH_LIST is not set\n"
      "Emitting ninja build file "
      "/data/builds/job-3/src/build/temp.linux-x86_64-cpython-312/build.ninja...\n"
      "[1/2] c++ -MMD -MF /tmp/b/csrc/ops.o.d -c /src/csrc/ops.cpp -o /tmp/b/csrc/ops.o\n"
      "FAILED: /tmp/b/csrc/ops.o\n"
      "c++ -MMD -MF /tmp/b/csrc/ops.o.d -c /src/csrc/ops.cpp -o /tmp/b/csrc/ops.o\n"
      "/src/csrc/ops.cpp: In function \xe2\x80\x98"
      "at::Tensor scale(const at::Tensor&)\xe2\x80\x99:\n"
      "/src/csrc/ops.cpp:7:10: error: \xe2\x80\x98y\xe2\x80\x99 was not declared in this scope\n"
      "    7 |   return y;\n"
      "      |          ^\n"
      "ninja: build stopped: subcommand failed.\n"
      "Traceback (most recent call last):\n"
      "  File \"/venv/lib/python3.12/site-packages/torch/utils/cpp_extension.py\", line 2209, in "
      "_run_ninja_build\n"
      "subprocess.CalledProcessError: Command '['ninja', '-v']' returned non-zero exit status 1.\n"
      "\n"
      "The above exception was the direct cause of the following exception:\n"
      "\n"
      "RuntimeError: Error compiling objects for extension\n";
  EXPECT_EQ(
      failure_cause(log),
      "/src/csrc/ops.cpp:7:10: error: \xe2\x80\x98y\xe2\x80\x99 was not declared in this scope");
}

TEST(FailureCause, MissingHeaderIsAFatalError) {
  EXPECT_EQ(failure_cause("In file included from csrc/ops.cu:2:\n"
                          "csrc/common.h:4:10: fatal error: cutlass/cutlass.h: No such file or "
                          "directory\n"
                          "compilation terminated.\n"),
            "csrc/common.h:4:10: fatal error: cutlass/cutlass.h: No such file or directory");
}

TEST(FailureCause, PipCannotFindARequirement) {
  const std::string log =
      "Looking in indexes: http://127.0.0.1:8080/cu128/torch2.8/simple/\n"
      "Collecting torch==2.8.*\n"
      "  Downloading http://127.0.0.1:8080/files/ab/torch-2.8.0+cu128-py3-none-any.whl (1.2 kB)\n"
      "ERROR: Could not find a version that satisfies the requirement setuptools (from "
      "versions: none)\n"
      "ERROR: No matching distribution found for setuptools\n";
  EXPECT_EQ(failure_cause(log), "No matching distribution found for setuptools");
}

TEST(FailureCause, ModuleNotFoundInASetupScript) {
  const std::string log =
      "  Preparing metadata (setup.py): started\n"
      "  error: subprocess-exited-with-error\n"
      "  \n"
      "  \xc3\x97 python setup.py egg_info did not run successfully.\n"
      "  \xe2\x94\x82 exit code: 1\n"
      "  \xe2\x95\xb0\xe2\x94\x80> [6 lines of output]\n"
      "      Traceback (most recent call last):\n"
      "        File \"<string>\", line 2, in <module>\n"
      "        File \"/data/builds/job-1/src/setup.py\", line 3, in <module>\n"
      "          from torch.utils.cpp_extension import BuildExtension, CUDAExtension\n"
      "      ModuleNotFoundError: No module named 'torch'\n"
      "      [end of output]\n"
      "  ERROR: Failed building wheel for demo\n";
  EXPECT_EQ(failure_cause(log), "ModuleNotFoundError: No module named 'torch'");
}

TEST(FailureCause, CompilersKilledForMemory) {
  EXPECT_EQ(failure_cause("[12/40] /usr/local/cuda/bin/nvcc -c flash_fwd_hdim128.cu\n"
                          "nvcc error   : 'cicc' died due to signal 9 (Kill signal)\n"
                          "ninja: build stopped: subcommand failed.\n"),
            "nvcc error   : 'cicc' died due to signal 9 (Kill signal)");
  EXPECT_EQ(failure_cause("x86_64-linux-gnu-g++: fatal error: Killed signal terminated program "
                          "cc1plus\ncompilation terminated.\n"),
            "x86_64-linux-gnu-g++: fatal error: Killed signal terminated program cc1plus");
  EXPECT_EQ(failure_cause("Killed signal terminated program cicc\n"),
            "Killed signal terminated program cicc");
}

TEST(FailureCause, LinkerErrors) {
  EXPECT_EQ(failure_cause("/usr/bin/ld: cannot find -lcudart: No such file or directory\n"
                          "collect2: error: ld returned 1 exit status\n"),
            "/usr/bin/ld: cannot find -lcudart: No such file or directory");
  EXPECT_EQ(failure_cause("/usr/bin/ld: ops.o: in function `scale':\n"
                          "ops.cpp:(.text+0x1d): undefined reference to `launch_kernel'\n"
                          "collect2: error: ld returned 1 exit status\n"),
            "ops.cpp:(.text+0x1d): undefined reference to `launch_kernel'");
}

TEST(FailureCause, GenericErrorLinesWhenNothingSpecific) {
  // setuptools without the wheel package.
  EXPECT_EQ(failure_cause("usage: setup.py [global_opts] cmd1 [cmd1_opts] [cmd2 [cmd2_opts] ...]\n"
                          "   or: setup.py --help [cmd1 cmd2 ...]\n"
                          "error: invalid command 'bdist_wheel'\n"),
            "error: invalid command 'bdist_wheel'");
  EXPECT_EQ(failure_cause("ERROR: Directory '/src' is not installable. Neither 'setup.py' nor "
                          "'pyproject.toml' found.\n"),
            "Directory '/src' is not installable. Neither 'setup.py' nor 'pyproject.toml' found.");
  // A specific cause later in the log still wins over an earlier generic line.
  EXPECT_EQ(failure_cause("error: something vague\nRuntimeError: CUDA_HOME is not set\n"),
            "RuntimeError: CUDA_HOME is not set");
  EXPECT_EQ(failure_cause("/bin/cp: cannot stat '/src/x/.': No such file or directory\n"),
            "/bin/cp: cannot stat '/src/x/.': No such file or directory");
}

TEST(FailureCause, SummariesAloneNameNoCause) {
  EXPECT_EQ(failure_cause(""), "");
  EXPECT_EQ(failure_cause("some output\nmore output\n"), "");
  EXPECT_EQ(failure_cause("  error: subprocess-exited-with-error\n"
                          "  ERROR: Failed building wheel for demo\n"
                          "error: command '/usr/bin/gcc' failed with exit code 1\n"
                          "collect2: error: ld returned 1 exit status\n"
                          "FAILED: build/ops.o\n"
                          "ninja: build stopped: subcommand failed.\n"),
            "");
  // The runner's own marked lines are not tool output.
  EXPECT_EQ(failure_cause("==> failed: build failed (exit 1): kernel.cu(1): error: x\n"), "");
}

TEST(FailureCause, PythonExceptionLines) {
  EXPECT_EQ(
      failure_cause(
          "Traceback (most recent call last):\n  File \"<string>\", line 1\nAssertionError\n"),
      "AssertionError");
  EXPECT_EQ(failure_cause("OSError: CUDA_HOME environment variable is not set.\n"),
            "OSError: CUDA_HOME environment variable is not set.");
  // Not exceptions: warnings, prose.
  EXPECT_EQ(failure_cause("UserWarning: TORCH_CUDA_ARCH_LIST is not set\n"
                          "Error handling is hard: a sentence\n"
                          "3Error: not a name\n"),
            "");
}

TEST(FailureCause, ColourCodesAreStrippedAndLongLinesCut) {
  EXPECT_EQ(failure_cause("\x1b[01m\x1b[Kops.cpp:7:10:\x1b[m\x1b[K \x1b[01;31m\x1b[Kerror: "
                          "\x1b[m\x1b[K'y' was not declared\n"),
            "ops.cpp:7:10: error: 'y' was not declared");
  const std::string long_line = "kernel.cu(1): error: " + std::string(400, 'x');
  const std::string cause = failure_cause(long_line + "\n");
  EXPECT_EQ(cause, long_line.substr(0, 300) + "\xe2\x80\xa6");
  // Cut at a character boundary: an é straddling byte 300 is dropped whole.
  const std::string accented = "kernel.cu(1): error: " + std::string(278, 'x') + "\xc3\xa9tail";
  ASSERT_EQ(accented.size(), 305U);
  EXPECT_EQ(failure_cause(accented), accented.substr(0, 299) + "\xe2\x80\xa6");
}

}  // namespace
}  // namespace wf::core
