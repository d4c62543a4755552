#include "build/runner_bed.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <thread>

#include "archive/zip_builder.hpp"
#include "wheelforge/core/name.hpp"
#include "wheelforge/crypto/digest.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::build::testing {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

void script_host(FakeExecutor& fake, const HostScript& host) {
  fake.on("bin/nvcc --version", Outcome::prints("nvcc: NVIDIA (R) Cuda compiler driver\n"
                                                "Copyright (c) 2005-2025 NVIDIA Corporation\n"
                                                "Cuda compilation tools, release " +
                                                host.nvcc_release + ", V" + host.nvcc_full + "\n"));
  std::string probe =
      "python_version=" + host.python_version + "\npython_executable=/data/envs/bin/python\n";
  if (host.torch_version.empty()) {
    probe += "torch_error=ModuleNotFoundError: No module named 'torch'\n";
  } else {
    probe += "torch_version=" + host.torch_version + "\ntorch_cuda=" + host.torch_cuda +
             "\ntorch_wheel_tags=" + host.torch_wheel_tags + "\n";
  }
  fake.on("print('python_version=", Outcome::prints(probe));
  fake.on("command -v ninja",
          host.ninja_on_path ? Outcome::prints("/usr/bin/ninja\n") : Outcome::exit(1));
  fake.on("rev-parse HEAD", Outcome::prints(std::string(kCommit) + "\n"));
}

fs::path write_wheel_with(const fs::path& dir, std::string_view project, std::string_view version,
                          std::string_view tag,
                          const std::vector<std::pair<std::string, std::string>>& payload) {
  std::string dist = core::normalize_name(project);
  std::replace(dist.begin(), dist.end(), '-', '_');
  const std::string info = dist + "-" + std::string(version) + ".dist-info";
  const bool pure = tag.ends_with("-any");
  std::vector<std::pair<std::string, std::string>> files = payload;
  const bool own_metadata = std::any_of(
      files.begin(), files.end(), [&](const auto& f) { return f.first == info + "/METADATA"; });
  if (!own_metadata) {
    files.emplace_back(info + "/METADATA", "Metadata-Version: 2.1\nName: " + std::string(project) +
                                               "\nVersion: " + std::string(version) + "\n");
  }
  files.emplace_back(info + "/WHEEL", "Wheel-Version: 1.0\nGenerator: wf-test\nRoot-Is-Purelib: " +
                                          std::string(pure ? "true" : "false") +
                                          "\nTag: " + std::string(tag) + "\n");
  std::string record;
  for (const auto& [name, data] : files) {
    record += name + ",sha256=" + base64url_nopad_encode(crypto::sha256_raw(data)) + "," +
              std::to_string(data.size()) + "\n";
  }
  record += info + "/RECORD,,\n";
  files.emplace_back(info + "/RECORD", record);
  std::vector<archive::fixtures::ZipEntry> entries;
  for (auto& [name, data] : files) entries.emplace_back(name, data);
  fs::create_directories(dir);
  const fs::path path = dir / (dist + "-" + std::string(version) + "-" + std::string(tag) + ".whl");
  archive::fixtures::write_file(path, archive::fixtures::build_zip(entries));
  return path;
}

fs::path write_wheel(const fs::path& dir, std::string_view project, std::string_view version,
                     std::string_view init) {
  std::string dist = core::normalize_name(project);
  std::replace(dist.begin(), dist.end(), '-', '_');
  return write_wheel_with(dir, project, version, "py3-none-any",
                          {{dist + "/__init__.py", std::string(init)}});
}

namespace {

// The job's out directory, from the build command's environment (HOME is the work directory).
fs::path out_dir_of(const ProcessSpec& spec) {
  for (const auto& [k, v] : spec.env) {
    if (k == "HOME") return fs::path(v) / "out";
  }
  return {};
}

}  // namespace

void script_build(FakeExecutor& fake, std::string project, std::string version, std::string init,
                  int times) {
  fake.on("fake-build", Outcome::does([project, version, init](const ProcessSpec& spec) {
            write_wheel(out_dir_of(spec), project, version, init);
          }),
          times);
}

void script_build_copies(FakeExecutor& fake, fs::path wheel, int times) {
  fake.on("fake-build", Outcome::does([wheel](const ProcessSpec& spec) {
            const fs::path out = out_dir_of(spec);
            fs::create_directories(out);
            fs::copy_file(wheel, out / wheel.filename(), fs::copy_options::overwrite_existing);
          }),
          times);
}

RecipeConfig demo_recipe(std::string name, std::string project) {
  RecipeConfig rc;
  rc.recipe.name = std::move(name);
  rc.recipe.project = std::move(project);
  rc.recipe.source = {core::SourceSpec::Kind::path, std::string(kSource), ""};
  rc.recipe.build_command = "fake-build {out}";
  rc.recipe.arch_variable = "TORCH_CUDA_ARCH_LIST";
  rc.recipe.arch_value = "8.0";
  rc.recipe.import_check = "import demo_pkg";
  rc.recipe.gb_per_job = 1.0;
  rc.recipe.timeout = std::chrono::seconds(60);
  rc.matrix.python = {"3.12"};
  rc.matrix.torch = {core::TorchSeries{2, 8}};
  rc.matrix.cuda = {core::CudaVersion{13, 0}};
  return rc;
}

RunnerBed::RunnerBed(std::string_view name)
    : data_dir(fs::path(::testing::TempDir()) /
               ("wf-runner-" + std::string(name) + "-" + std::to_string(::getpid()))) {
  fs::remove_all(data_dir);
  fs::create_directories(data_dir);
  auto c = catalog::open_sqlite_catalog(data_dir / "wheelforge.db");
  EXPECT_TRUE(c) << c.error().message;
  catalog = std::move(*c);
  auto s = store::BlobStore::open(data_dir);
  EXPECT_TRUE(s) << s.error().message;
  store = std::move(*s);
  auto j = catalog::open_sqlite_job_store(data_dir / "wheelforge.db");
  EXPECT_TRUE(j) << j.error().message;
  jobs = std::move(*j);
  ingestor = std::make_unique<ingest::Ingestor>(*store, *catalog, ingest::Limits{});
  config.host.pythons = {{"3.12", fs::path(kPython)}};
  config.host.cuda_homes = {{"13.0", fs::path(kCudaHome)}};
  config.host.memory_reserve_bytes = 0;
  config.recipes = {{"demo", demo_recipe()}};
}

RunnerBed::~RunnerBed() {
  runner_.reset();
  std::error_code ec;
  // Leftovers of tests that took permissions away.
  fs::permissions(data_dir, fs::perms::owner_all, fs::perm_options::add, ec);
  fs::remove_all(data_dir, ec);
}

std::unique_ptr<Runner> RunnerBed::make_runner(Executor* executor) {
  auto r = std::make_unique<Runner>(config, executor ? *executor : fake, *jobs, *catalog, *store,
                                    *ingestor, data_dir, [this] { ++ingested; });
  r->set_server_url(std::string(kServer));
  return r;
}

Runner& RunnerBed::runner() {
  if (!runner_) runner_ = make_runner();
  return *runner_;
}

Runner& RunnerBed::start(Runner::Recovery recovery) {
  auto st = runner().start(recovery);
  EXPECT_TRUE(st) << st.error().message;
  return *runner_;
}

catalog::JobRecord RunnerBed::submit(Runner& r, const std::string& recipe, bool force,
                                     std::optional<bool> yank_superseded) {
  core::BuildRequest request;
  request.recipe = recipe;
  request.version = "1.0.0";
  request.force = force;
  request.yank_superseded = yank_superseded;
  auto created = r.submit(request);
  EXPECT_TRUE(created) << created.error().message;
  if (!created || created->second.size() != 1) {
    ADD_FAILURE() << "expected one job";
    return {};
  }
  return created->second.front();
}

catalog::JobRecord RunnerBed::wait_until(
    std::int64_t id, const std::function<bool(const catalog::JobRecord&)>& done) {
  catalog::JobRecord last;
  const auto until = std::chrono::steady_clock::now() + 60s;
  while (std::chrono::steady_clock::now() < until) {
    auto job = jobs->find_job(id);
    if (job && job->has_value()) {
      last = **job;
      if (done(last)) return last;
    }
    std::this_thread::sleep_for(10ms);
  }
  ADD_FAILURE() << "job " << id << " did not reach the expected state; it is "
                << core::state_name(last.state) << "\n"
                << log(id);
  return last;
}

catalog::JobRecord RunnerBed::wait_terminal(std::int64_t id) {
  return wait_until(id, [](const catalog::JobRecord& j) { return core::is_terminal(j.state); });
}

std::string RunnerBed::log(std::int64_t id) const {
  std::ifstream in(data_dir / "builds" / ("job-" + std::to_string(id)) / "log.txt");
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

catalog::JobRecord RunnerBed::rebuild(std::optional<bool> yank_superseded) {
  if (!runner_) start();
  const auto job = submit(runner(), "demo", true, yank_superseded);
  return wait_terminal(job.id);
}

catalog::JobRecord RunnerBed::run_one(const std::string& recipe) {
  if (!runner_) start();
  const auto job = submit(recipe);
  return wait_terminal(job.id);
}

}  // namespace wf::build::testing
