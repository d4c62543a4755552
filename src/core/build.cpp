#include "wheelforge/core/build.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <csignal>
#include <limits>
#include <set>

#include "core/label_scan.hpp"
#include "wheelforge/core/name.hpp"
#include "wheelforge/util/strings.hpp"

namespace wf::core {
namespace {

using label_scan::is_digit;
bool is_alnum(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

// Numbers written by people in a config: digits only, no sign, no leading zero (so that "3.011"
// and "3.11" cannot both appear as different spellings of one value).
std::optional<int> parse_small_number(std::string_view digits) {
  if (digits.empty() || digits.size() > 4) return std::nullopt;
  if (digits.size() > 1 && digits[0] == '0') return std::nullopt;
  int v = 0;
  for (const char c : digits) {
    if (!is_digit(c)) return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

std::optional<std::pair<int, int>> parse_major_minor(std::string_view text) {
  const std::size_t dot = text.find('.');
  if (dot == std::string_view::npos) return std::nullopt;
  const auto major = parse_small_number(text.substr(0, dot));
  const auto minor = parse_small_number(text.substr(dot + 1));
  if (!major || !minor) return std::nullopt;
  return std::pair{*major, *minor};
}

bool valid_cuda(const CudaVersion& c) {
  return c.major >= 1 && c.major <= 19 && c.minor >= 0 && c.minor <= 99;
}
bool valid_torch(const TorchSeries& t) {
  return t.major >= 1 && t.minor >= 0;
}

bool is_variable_name(std::string_view s) {
  if (s.empty() || is_digit(s[0])) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return is_alnum(c) || c == '_'; });
}

std::string in_quotes(std::string_view s) {
  return "\"" + sanitize_for_log(s, 80) + "\"";
}

template <class T, class Str>
void check_duplicates(const std::vector<T>& values, std::string_view axis, Str to_string,
                      Problems& problems) {
  for (std::size_t i = 0; i < values.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (values[i] == values[j]) {
        problems.add(std::string(axis) + " " + to_string(values[i]) + " is listed twice");
        break;
      }
    }
  }
}

template <class T>
bool contains(const std::vector<T>& values, const T& v) {
  return std::find(values.begin(), values.end(), v) != values.end();
}

bool excluded(const Cell& cell, const MatrixExclusion& e) {
  return (!e.python || *e.python == cell.python) && (!e.torch || *e.torch == cell.torch) &&
         (!e.cuda || *e.cuda == cell.cuda);
}

std::string describe(const MatrixExclusion& e) {
  std::string out;
  const auto part = [&](const std::string& s) { out += (out.empty() ? "" : " ") + s; };
  if (e.python) part("python " + *e.python);
  if (e.torch) part("torch " + e.torch->str());
  if (e.cuda) part("cuda " + e.cuda->str());
  return out.empty() ? "{}" : "{" + out + "}";
}

// Exclusion values are checked against `axes` (the full matrix), where a typo would otherwise
// exclude nothing without anyone noticing.
void check_exclusions(const std::vector<MatrixExclusion>& exclusions, const Matrix& axes,
                      Problems& problems) {
  for (std::size_t i = 0; i < exclusions.size(); ++i) {
    const MatrixExclusion& e = exclusions[i];
    const std::string where = "exclusion " + std::to_string(i + 1) + " " + describe(e);
    if (!e.python && !e.torch && !e.cuda) {
      problems.add(where + " names no axis and would exclude every cell");
    }
    if (e.python && !contains(axes.python, *e.python)) {
      problems.add(where + ": python " + in_quotes(*e.python) + " is not in the matrix");
    }
    if (e.torch && !contains(axes.torch, *e.torch)) {
      problems.add(where + ": torch " + e.torch->str() + " is not in the matrix");
    }
    if (e.cuda && !contains(axes.cuda, *e.cuda)) {
      problems.add(where + ": cuda " + e.cuda->str() + " is not in the matrix");
    }
    for (std::size_t j = 0; j < i; ++j) {
      if (exclusions[j] == e) {
        problems.add(where + " repeats exclusion " + std::to_string(j + 1));
        break;
      }
    }
  }
}

void check_axis_values(const Matrix& m, Problems& problems) {
  for (const auto& p : m.python) {
    if (!is_valid_python_version(p)) {
      problems.add("python " + in_quotes(p) + " is not a version like \"3.11\"");
    }
  }
  for (const auto& t : m.torch) {
    if (!valid_torch(t)) problems.add("torch " + t.str() + " is not a valid torch series");
  }
  for (const auto& c : m.cuda) {
    if (!valid_cuda(c)) {
      problems.add("cuda " + c.str() + " is out of range (major 1-19, minor 0-99)");
    }
  }
  check_duplicates(
      m.python, "python", [](const std::string& s) { return in_quotes(s); }, problems);
  check_duplicates(
      m.torch, "torch", [](const TorchSeries& t) { return t.str(); }, problems);
  check_duplicates(
      m.cuda, "cuda", [](const CudaVersion& c) { return c.str(); }, problems);
}

template <class T>
std::vector<T> unique_in_order(const std::vector<T>& values) {
  std::vector<T> out;
  for (const auto& v : values) {
    if (!contains(out, v)) out.push_back(v);
  }
  return out;
}

template <class T>
bool selected(const std::vector<T>& axis, const T& v) {
  return axis.empty() || contains(axis, v);
}

std::uint64_t saturating_sub(std::uint64_t a, std::uint64_t b) {
  return a > b ? a - b : 0;
}

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// Rounded up so that the planned peak is never under-stated by a rounding.
std::uint64_t bytes_for(double gb_per_job, unsigned jobs, unsigned threads) {
  const double bytes =
      std::ceil(gb_per_job * kGiB * static_cast<double>(jobs) * static_cast<double>(threads));
  if (bytes >= static_cast<double>(std::numeric_limits<std::uint64_t>::max())) {
    return std::numeric_limits<std::uint64_t>::max();
  }
  return static_cast<std::uint64_t>(bytes);
}

// Build-log phrases of a compiler that the kernel's OOM killer took down, or that failed to
// allocate. Matched on lower-cased lines.
constexpr std::array<std::string_view, 7> kOomPhrases{
    "killed signal terminated program",  // gcc driver: cicc, cc1plus, ptxas, ...
    "internal compiler error: killed",
    "died due to signal 9",      // nvcc: 'cicc' died due to signal 9 (Kill signal)
    "terminated with signal 9",  // collect2: ld terminated with signal 9 [Killed]
    "std::bad_alloc",
    "virtual memory exhausted",
    "cannot allocate memory",
};

bool line_reports_oom(std::string_view line) {
  const std::string lower = to_lower(line);
  for (const auto phrase : kOomPhrases) {
    if (lower.find(phrase) != std::string::npos) return true;
  }
  // "CUDA out of memory" / "CUDA error: out of memory" is the GPU's memory, which less host
  // parallelism does not help (docs/torch-labels.md, "Building extensions").
  return lower.find("out of memory") != std::string::npos &&
         lower.find("cuda") == std::string::npos;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Recipes

Result<Recipe> validate_recipe(const Recipe& recipe) {
  Problems problems;
  Recipe out = recipe;

  if (recipe.name.empty()) {
    problems.add("the recipe has no name");
  } else if (!is_alnum(recipe.name[0]) ||
             !std::all_of(recipe.name.begin(), recipe.name.end(),
                          [](char c) { return is_alnum(c) || c == '.' || c == '_' || c == '-'; })) {
    problems.add("recipe name " + in_quotes(recipe.name) +
                 " may only contain letters, digits, '.', '_' and '-', starting with a letter or "
                 "digit");
  }
  if (!is_valid_project_name(recipe.project)) {
    problems.add("project " + in_quotes(recipe.project) + " is not a valid project name");
  } else {
    out.project = normalize_name(recipe.project);
  }

  switch (recipe.source.kind) {
    case SourceSpec::Kind::index_sdist:
      if (!recipe.source.location.empty()) {
        problems.add("an index_sdist source takes no location");
      }
      break;
    case SourceSpec::Kind::path:
    case SourceSpec::Kind::git:
      if (recipe.source.location.empty()) problems.add("the source has no location");
      break;
  }
  if (recipe.source.kind != SourceSpec::Kind::git && !recipe.source.ref.empty()) {
    problems.add("only a git source takes a ref");
  }
  if (recipe.source.kind != SourceSpec::Kind::git &&
      (recipe.source.submodules != SourceSpec::Submodules::recursive ||
       !recipe.source.credentials.empty())) {
    problems.add("only a git source takes submodules and credentials");
  }

  if (trim(recipe.build_command).empty()) {
    problems.add("the build command is empty");
  } else {
    std::string_view rest = recipe.build_command;
    for (std::size_t open = rest.find('{'); open != std::string_view::npos; open = rest.find('{')) {
      const std::size_t close = rest.find('}', open);
      if (close == std::string_view::npos) {
        problems.add("the build command has an unclosed '{'");
        break;
      }
      const std::string_view placeholder = rest.substr(open, close - open + 1);
      if (placeholder != "{python}" && placeholder != "{out}" && placeholder != "{src}") {
        problems.add("the build command has an unknown placeholder " + in_quotes(placeholder) +
                     " (known: {python}, {out}, {src})");
      }
      rest = rest.substr(close + 1);
    }
  }

  std::set<std::string> env_names;
  for (const auto& [key, value] : recipe.env) {
    if (!is_variable_name(key)) {
      problems.add("environment name " + in_quotes(key) + " is not a valid variable name");
    } else if (!env_names.insert(key).second) {
      problems.add("environment variable " + key + " is set twice");
    }
  }
  if (!recipe.arch_variable.empty() && !is_variable_name(recipe.arch_variable)) {
    problems.add("arch variable " + in_quotes(recipe.arch_variable) +
                 " is not a valid variable name");
  }
  if (!recipe.arch_variable.empty() && trim(recipe.arch_value).empty()) {
    problems.add("arch variable " + recipe.arch_variable + " has no value");
  }
  if (recipe.arch_variable.empty() && !trim(recipe.arch_value).empty()) {
    problems.add("an arch value is given without an arch variable");
  }
  if (!recipe.local_version_variable.empty() && !is_variable_name(recipe.local_version_variable)) {
    problems.add("local version variable " + in_quotes(recipe.local_version_variable) +
                 " is not a valid variable name");
  }
  if (!std::isfinite(recipe.gb_per_job) || recipe.gb_per_job <= 0.0) {
    problems.add("gb_per_job must be a number greater than 0");
  }
  if (recipe.timeout.count() <= 0) problems.add("the timeout must be positive");
  for (const auto& requirement : recipe.build_requires.value_or(std::vector<std::string>{})) {
    if (trim(requirement).empty()) problems.add("a build requirement is empty");
  }
  if (recipe.cpus && *recipe.cpus == 0) problems.add("cpus must be at least 1");

  if (!problems.empty()) return problems.to_error();
  return out;
}

unsigned count_archs(std::string_view arch_value) {
  unsigned count = 0;
  bool in_entry = false;
  for (const char c : arch_value) {
    const bool separator = c == ';' || c == ',' || c == ' ' || c == '\t' || c == '\n';
    if (!separator && !in_entry) ++count;
    in_entry = !separator;
  }
  return count;
}

// ---------------------------------------------------------------------------------------------
// Matrix

std::string CudaVersion::str() const {
  return std::to_string(major) + "." + std::to_string(minor);
}

std::string CudaVersion::tag() const {
  return "cu" + std::to_string(major) + std::to_string(minor);
}

std::optional<CudaVersion> parse_cuda_version(std::string_view text) {
  const auto mm = parse_major_minor(text);
  if (!mm) return std::nullopt;
  const CudaVersion v{mm->first, mm->second};
  if (!valid_cuda(v)) return std::nullopt;
  return v;
}

std::optional<TorchSeries> parse_torch_series(std::string_view text) {
  const auto mm = parse_major_minor(text);
  if (!mm) return std::nullopt;
  const TorchSeries t{mm->first, mm->second};
  if (!valid_torch(t)) return std::nullopt;
  return t;
}

bool is_valid_python_version(std::string_view text) {
  const auto mm = parse_major_minor(text);
  return mm.has_value() && mm->first >= 1;
}

std::string Cell::label() const {
  return local_label(*this);
}

std::string Cell::key() const {
  return "py" + python + "-torch" + torch.str() + "-" + cuda.tag();
}

Result<Matrix> validate_matrix(const Matrix& matrix) {
  Problems problems;
  if (matrix.python.empty()) problems.add("the matrix lists no python version");
  if (matrix.torch.empty()) problems.add("the matrix lists no torch series");
  if (matrix.cuda.empty()) problems.add("the matrix lists no cuda version");
  check_axis_values(matrix, problems);
  check_exclusions(matrix.exclude, matrix, problems);
  if (problems.empty() && expand_matrix(matrix).empty()) {
    problems.add("the exclusions leave no cell of the matrix");
  }
  if (!problems.empty()) return problems.to_error();
  return matrix;
}

Result<Matrix> validate_matrix_subset(const Matrix& subset, const Matrix& full) {
  Problems problems;
  check_axis_values(subset, problems);
  for (const auto& p : subset.python) {
    if (is_valid_python_version(p) && !contains(full.python, p)) {
      problems.add("python " + in_quotes(p) + " is not in the recipe's matrix");
    }
  }
  for (const auto& t : subset.torch) {
    if (!contains(full.torch, t)) {
      problems.add("torch " + t.str() + " is not in the recipe's matrix");
    }
  }
  for (const auto& c : subset.cuda) {
    if (!contains(full.cuda, c)) problems.add("cuda " + c.str() + " is not in the recipe's matrix");
  }
  check_exclusions(subset.exclude, full, problems);
  if (problems.empty() && expand_matrix(full, subset).empty()) {
    problems.add("the request selects no cell of the recipe's matrix");
  }
  if (!problems.empty()) return problems.to_error();
  return subset;
}

std::vector<Cell> expand_matrix(const Matrix& matrix, const std::optional<Matrix>& subset) {
  std::vector<Cell> cells;
  for (const auto& python : unique_in_order(matrix.python)) {
    for (const auto& torch : unique_in_order(matrix.torch)) {
      for (const auto& cuda : unique_in_order(matrix.cuda)) {
        const Cell cell{python, torch, cuda};
        const auto hit = [&](const MatrixExclusion& e) { return excluded(cell, e); };
        if (std::any_of(matrix.exclude.begin(), matrix.exclude.end(), hit)) continue;
        if (subset) {
          if (!selected(subset->python, python) || !selected(subset->torch, torch) ||
              !selected(subset->cuda, cuda)) {
            continue;
          }
          if (std::any_of(subset->exclude.begin(), subset->exclude.end(), hit)) continue;
        }
        cells.push_back(cell);
      }
    }
  }
  return cells;
}

std::string local_label(const Cell& cell) {
  return cell.cuda.tag() + "torch" + cell.torch.str();
}

bool label_matches(std::string_view wheel_local_label, const Cell& cell) {
  const VariantHints hints = parse_local_label(wheel_local_label);
  return hints.backend == Backend::cuda && hints.cuda_major == cell.cuda.major &&
         hints.cuda_minor == cell.cuda.minor && hints.torch == cell.torch;
}

// ---------------------------------------------------------------------------------------------
// Parallelism

Parallelism compute_parallelism(const Resources& resources, double gb_per_job, unsigned arch_count,
                                std::uint64_t budget_bytes) {
  if (!std::isfinite(gb_per_job) || gb_per_job <= 0.0) gb_per_job = Recipe{}.gb_per_job;
  const unsigned cores = std::max(resources.cores, 1U);
  const std::uint64_t budget = std::min(
      budget_bytes, saturating_sub(resources.available_memory_bytes, resources.reserve_bytes));

  Parallelism p;
  // Every thread of every compile job is a process that wants a core.
  p.nvcc_threads = std::min(std::clamp(arch_count, 1U, 4U), cores);
  while (p.nvcc_threads > 1 && bytes_for(gb_per_job, 1, p.nvcc_threads) > budget) {
    --p.nvcc_threads;
  }
  const std::uint64_t per_job = bytes_for(gb_per_job, 1, p.nvcc_threads);
  const std::uint64_t fitting = budget / per_job;
  p.max_jobs = static_cast<unsigned>(std::clamp<std::uint64_t>(fitting, 1, cores / p.nvcc_threads));
  p.memory_bytes = bytes_for(gb_per_job, p.max_jobs, p.nvcc_threads);
  return p;
}

Parallelism halve(const Parallelism& p) {
  Parallelism out = p;
  if (p.max_jobs > 1) {
    out.max_jobs = p.max_jobs / 2;
  } else if (p.nvcc_threads > 1) {
    out.max_jobs = 1;
    out.nvcc_threads = p.nvcc_threads / 2;
  }
  return out;
}

bool looks_like_oom(int exit_status_or_signal_code, bool killed_by_signal, int signal,
                    std::string_view log_tail) {
  if (killed_by_signal) {
    if (signal == SIGKILL) return true;
  } else {
    if (exit_status_or_signal_code == 0) return false;
    if (exit_status_or_signal_code == 128 + SIGKILL) return true;
  }
  for (const auto line : split(log_tail, '\n')) {
    if (line_reports_oom(line)) return true;
  }
  return false;
}

// ---------------------------------------------------------------------------------------------
// Job states

namespace {

constexpr std::array<std::pair<JobState, std::string_view>, 10> kStateNames{{
    {JobState::queued, "queued"},
    {JobState::preparing, "preparing"},
    {JobState::building, "building"},
    {JobState::retagging, "retagging"},
    {JobState::testing, "testing"},
    {JobState::ingesting, "ingesting"},
    {JobState::succeeded, "succeeded"},
    {JobState::failed, "failed"},
    {JobState::cancelled, "cancelled"},
    {JobState::interrupted, "interrupted"},
}};

// The successor of each state on the success path.
std::optional<JobState> next_on_success(JobState s) {
  switch (s) {
    case JobState::queued:
      return JobState::preparing;
    case JobState::preparing:
      return JobState::building;
    case JobState::building:
      return JobState::retagging;
    case JobState::retagging:
      return JobState::testing;
    case JobState::testing:
      return JobState::ingesting;
    case JobState::ingesting:
      return JobState::succeeded;
    case JobState::succeeded:
    case JobState::failed:
    case JobState::cancelled:
    case JobState::interrupted:
      return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace

std::string_view state_name(JobState state) {
  for (const auto& [s, name] : kStateNames) {
    if (s == state) return name;
  }
  return "unknown";
}

std::optional<JobState> parse_job_state(std::string_view name) {
  for (const auto& [s, n] : kStateNames) {
    if (n == name) return s;
  }
  return std::nullopt;
}

bool is_terminal(JobState state) {
  return state == JobState::succeeded || state == JobState::failed || state == JobState::cancelled;
}

bool is_running(JobState state) {
  switch (state) {
    case JobState::preparing:
    case JobState::building:
    case JobState::retagging:
    case JobState::testing:
    case JobState::ingesting:
      return true;
    case JobState::queued:
    case JobState::succeeded:
    case JobState::failed:
    case JobState::cancelled:
    case JobState::interrupted:
      return false;
  }
  return false;
}

bool can_transition(JobState from, JobState to) {
  if (next_on_success(from) == to) return true;
  if (from == JobState::building && to == JobState::building) return true;
  if (from == JobState::retagging && to == JobState::succeeded) return true;
  if ((from == JobState::testing || from == JobState::ingesting) && to == JobState::retagging) {
    return true;
  }
  if (!is_terminal(from) && (to == JobState::failed || to == JobState::cancelled)) return true;
  if (is_running(from) && to == JobState::interrupted) return true;
  if (to == JobState::queued) {
    return from == JobState::interrupted || from == JobState::failed || from == JobState::cancelled;
  }
  return false;
}

}  // namespace wf::core
