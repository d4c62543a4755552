/* An LD_PRELOAD shim for the fault tests (test_faults.py compiles it with gcc at test time):
 * makes write, fsync, fdatasync, syncfs, rename and mkostemp fail with a chosen errno for
 * paths under a chosen prefix, as a failing disk (EIO), a read-only filesystem (EROFS) or a
 * permission problem (EACCES) would, without touching the host.
 *
 * WF_FAULTS names a control file, read again at every call so that a test changes the faults
 * while the server runs. Each line is "OP ERRNO PREFIX", e.g.
 *     fsync EIO /tmp/wf-it-x/data/tmp/
 * OP is one of the functions above; a call fails when its path starts with PREFIX (for the
 * calls on a descriptor, the path /proc/self/fd names; for rename, either path; for mkostemp,
 * the template). Every injected failure is appended as "OP PATH" to WF_FAULTS_HITS, so a
 * test can tell that its fault was really hit. Without WF_FAULTS, or with an empty control
 * file, every call goes straight through. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static int errno_by_name(const char* name) {
  static const struct {
    const char* name;
    int value;
  } known[] = {{"EIO", EIO},       {"EROFS", EROFS},   {"EACCES", EACCES},
               {"EPERM", EPERM},   {"ENOSPC", ENOSPC}, {"EDQUOT", EDQUOT}};
  for (size_t i = 0; i < sizeof known / sizeof known[0]; ++i) {
    if (strcmp(known[i].name, name) == 0) return known[i].value;
  }
  return 0;
}

static void record_hit(const char* op, const char* path) {
  const char* hits = getenv("WF_FAULTS_HITS");
  if (hits == NULL) return;
  int fd = open(hits, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return;
  char line[4200];
  int n = snprintf(line, sizeof line, "%s %s\n", op, path);
  if (n > 0) syscall(SYS_write, fd, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
  close(fd);
}

/* The errno to fail `op` on `path` with, or 0. */
static int fault_for(const char* op, const char* path) {
  const char* control = getenv("WF_FAULTS");
  if (control == NULL || path == NULL) return 0;
  int fd = open(control, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[8192];
  ssize_t n = syscall(SYS_read, fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  char* save = NULL;
  for (char* line = strtok_r(buf, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
    char line_op[32];
    char line_errno[32];
    char prefix[4096];
    if (sscanf(line, "%31s %31s %4095s", line_op, line_errno, prefix) != 3) continue;
    if (strcmp(line_op, op) != 0 || strncmp(path, prefix, strlen(prefix)) != 0) continue;
    int err = errno_by_name(line_errno);
    if (err != 0) {
      record_hit(op, path);
      return err;
    }
  }
  return 0;
}

static int fd_fault(const char* op, int fd) {
  if (getenv("WF_FAULTS") == NULL) return 0;
  char link[64];
  char path[4096];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, path, sizeof path - 1);
  if (n <= 0) return 0;
  path[n] = '\0';
  return fault_for(op, path);
}

/* The C library's own `name`, looked up once. */
#define REAL(name)                              \
  static __typeof__(&name) real_##name = NULL; \
  if (real_##name == NULL) real_##name = (__typeof__(&name))dlsym(RTLD_NEXT, #name)

ssize_t write(int fd, const void* data, size_t size) {
  REAL(write);
  int err = fd_fault("write", fd);
  if (err != 0) {
    errno = err;
    return -1;
  }
  return real_write(fd, data, size);
}

int fsync(int fd) {
  REAL(fsync);
  int err = fd_fault("fsync", fd);
  if (err != 0) {
    errno = err;
    return -1;
  }
  return real_fsync(fd);
}

int fdatasync(int fd) {
  REAL(fdatasync);
  int err = fd_fault("fdatasync", fd);
  if (err != 0) {
    errno = err;
    return -1;
  }
  return real_fdatasync(fd);
}

int syncfs(int fd) {
  REAL(syncfs);
  int err = fd_fault("syncfs", fd);
  if (err != 0) {
    errno = err;
    return -1;
  }
  return real_syncfs(fd);
}

int rename(const char* from, const char* to) {
  REAL(rename);
  int err = fault_for("rename", from);
  if (err == 0) err = fault_for("rename", to);
  if (err != 0) {
    errno = err;
    return -1;
  }
  return real_rename(from, to);
}

int mkostemp(char* tmpl, int flags) {
  REAL(mkostemp);
  int err = fault_for("mkostemp", tmpl);
  if (err != 0) {
    errno = err;
    return -1;
  }
  return real_mkostemp(tmpl, flags);
}
