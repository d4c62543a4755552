#pragma once
// Why a build command failed, in one line, read from its output: the line a person scrolling
// a 50,000-line compiler log is looking for. Pure function, no I/O.

#include <string>
#include <string_view>

namespace wf::core {

/// The first line of `output` that names a cause, trimmed and stripped of terminal colour
/// codes, at most 300 bytes (cut at a UTF-8 boundary, "…" appended); empty when no line does.
/// Lines that name a cause, in the order they appear (the first wins, because later errors
/// are usually consequences of the first):
///   - compiler and linker errors: `kernel.cu(12): error: expected ';'` (nvcc),
///     `foo.cpp:3:5: error: ...` and `fatal error: ...` (gcc, clang), `undefined reference to`,
///     `ld: cannot find -lfoo`, `ptxas fatal`, `error while loading shared libraries`;
///   - memory: `Killed signal terminated program cicc`, `internal compiler error: Killed`;
///   - pip: `No matching distribution found for ...` (the "ERROR: " prefix dropped),
///     `Could not install packages due to an OSError: ...`;
///   - Python: the last line of a traceback, `ModuleNotFoundError: No module named 'torch'`,
///     `RuntimeError: ...` (any `<Name>Error: ` or `<Name>Exception: ` at the start of a line);
///   - other `error: ` lines, and lines saying "No such file or directory", "Permission
///     denied" or "No space left on device" (when nothing above is found).
/// pip's and setuptools' summaries of a failed subprocess (`error: subprocess-exited-with-error`,
/// `ERROR: Failed building wheel for x`, `error: command '...' failed with exit code 1`,
/// `collect2: error: ld returned 1 exit status`, ninja's `FAILED:` / `build stopped`) never
/// name the cause and are skipped (docs/clients.md, "pip"). The runner's own marked lines
/// ("==> ...") are skipped too.
[[nodiscard]] std::string failure_cause(std::string_view output);

}  // namespace wf::core
