#!/usr/bin/env python3
"""Generates the benchmark corpora under bench/.work/corpus/ (idempotent: a finished corpus is
kept, marked by a .done file).

  small/    ~200 projects, ~2,000 py3-none-any wheels; project bench-app depends (transitively)
            on 32 of the others so that pip has a real resolution to do
  large/    ~5,000 projects, ~50,000 py3-none-any wheels (1 to 40 files per project)
  variant/  flash-attn: several hundred +cuXYZtorchX.Y CPython wheels (cp39..cp313)
  big/      one wheel of at least 1 GiB: a stored (not deflated) random payload member, then the
            .dist-info files last, as real wheels have them

Every wheel is a valid zip with {name}-{version}.dist-info/METADATA, WHEEL and RECORD (with
correct sha256 entries) whose METADATA Name/Version match the file name.
"""

import argparse
import base64
import hashlib
import io
import multiprocessing
import os
import random
import sys
import time
import zipfile

DATE = (2024, 6, 1, 0, 0, 0)


def record_hash(data):
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def dist_name(project):
    return project.replace("-", "_")


def metadata_text(project, version, requires=(), requires_python=None, summary=None):
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {project}",
        f"Version: {version}",
        f"Summary: {summary or 'benchmark package ' + project}",
        "License: MIT",
    ]
    if requires_python:
        lines.append(f"Requires-Python: {requires_python}")
    lines.extend(f"Requires-Dist: {r}" for r in requires)
    lines.append("")
    lines.append(f"{project} is a generated package for the wheelforge benchmarks.")
    return ("\n".join(lines) + "\n").encode()


def wheel_text(tag):
    return (
        "Wheel-Version: 1.0\nGenerator: wheelforge-bench\n"
        f"Root-Is-Purelib: {'true' if tag == 'py3-none-any' else 'false'}\nTag: {tag}\n"
    ).encode()


def make_wheel_bytes(project, version, tag, payload, requires=(), requires_python=None):
    """A small wheel in memory: one module (deflated), then the .dist-info files."""
    dist = dist_name(project)
    info_dir = f"{dist}-{version}.dist-info"
    members = [
        (f"{dist}/__init__.py", payload),
        (f"{info_dir}/METADATA", metadata_text(project, version, requires, requires_python)),
        (f"{info_dir}/WHEEL", wheel_text(tag)),
    ]
    record = "".join(f"{n},{record_hash(d)},{len(d)}\n" for n, d in members)
    record += f"{info_dir}/RECORD,,\n"
    members.append((f"{info_dir}/RECORD", record.encode()))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in members:
            info = zipfile.ZipInfo(name, date_time=DATE)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, data)
    return buf.getvalue()


def write_if_missing(path, data):
    if os.path.exists(path):
        return
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


# ---- job lists ------------------------------------------------------------------------------
# A job is (path, project, version, tag, payload_size, requires, requires_python); the payload is
# pseudo-random text derived from the file name, so reruns produce the same bytes.


def payload_for(filename, size):
    rng = random.Random(filename)
    words = ["def f%d(x):\n    return x * %d\n" % (i, rng.randrange(1000)) for i in range(size // 32 + 1)]
    return "".join(words)[:size].encode()


def small_jobs(root):
    rng = random.Random(503)
    jobs = []
    n = 200
    names = ["bench-app"] + [f"bench-small-{i:03d}" for i in range(1, n)]
    for i, project in enumerate(names):
        # Dependencies only point to higher indices: the graph is acyclic. bench-app pulls in
        # 8 direct dependencies, each of which pulls in a few more (32 projects in all).
        if i == 0:
            deps = names[1:9]
        elif i < 40:
            pool = range(max(i + 1, 9), 41)
            deps = [names[j] for j in rng.sample(pool, k=min(2, len(pool)))]
        elif i < n - 1 and rng.random() < 0.3:
            deps = [names[j] for j in rng.sample(range(i + 1, n), k=min(2, n - i - 1))]
        else:
            deps = []
        versions = [f"1.{m}.0" for m in range(10)]
        for v in versions:
            requires = [f"{d}>=1.0" for d in deps]
            fn = f"{dist_name(project)}-{v}-py3-none-any.whl"
            jobs.append((os.path.join(root, project, fn), project, v, "py3-none-any", 600, requires, ">=3.8"))
    return jobs


def large_jobs(root, n_projects=5000, target_files=50000):
    rng = random.Random(691)
    jobs = []
    words = ["data", "util", "core", "http", "async", "json", "yaml", "cli", "test", "db", "ml",
             "gpu", "io", "auth", "cache", "log", "web", "api", "kit", "lib"]
    total = 0
    for i in range(n_projects):
        project = f"{rng.choice(words)}-{rng.choice(words)}-{i:04d}"
        remaining_projects = n_projects - i
        mean = (target_files - total) / remaining_projects
        count = max(1, min(40, int(rng.expovariate(1 / mean)) + 1)) if i < n_projects - 1 else max(1, target_files - total)
        count = min(count, 400)
        total += count
        for k in range(count):
            v = f"{k // 10}.{k % 10}.{rng.randrange(3)}"
            fn = f"{dist_name(project)}-{v}-py3-none-any.whl"
            jobs.append((os.path.join(root, project, fn), project, v, "py3-none-any",
                         rng.randrange(200, 3000), [], ">=3.8" if k % 2 else None))
    return jobs


VARIANT_PROJECT = "flash-attn"
VARIANT_VERSIONS = ["2.6.3", "2.7.4", "2.8.0", "2.8.3"]
VARIANT_TORCH = ["2.5", "2.6", "2.7", "2.8"]
VARIANT_CUDA = ["118", "121", "124", "126", "128"]
VARIANT_PY = ["cp39", "cp310", "cp311", "cp312", "cp313"]


def variant_jobs(root):
    jobs = []
    for v in VARIANT_VERSIONS:
        for t in VARIANT_TORCH:
            for cu in VARIANT_CUDA:
                for py in VARIANT_PY:
                    version = f"{v}+cu{cu}torch{t}"
                    tag = f"{py}-{py}-linux_x86_64"
                    fn = f"flash_attn-{version}-{tag}.whl"
                    req = [f"torch=={t}.*", "einops"]
                    jobs.append((os.path.join(root, fn), VARIANT_PROJECT, version, tag, 4000, req, ">=3.9"))
    return jobs


def build_one(job):
    path, project, version, tag, size, requires, requires_python = job
    if os.path.exists(path):
        return 0
    data = make_wheel_bytes(project, version, tag, payload_for(os.path.basename(path), size),
                            requires, requires_python)
    write_if_missing(path, data)
    return 1


def generate(name, jobs, out_root, procs):
    done = os.path.join(out_root, name + ".done")
    if os.path.exists(done):
        print(f"corpus {name}: present ({len(jobs)} files)", flush=True)
        return
    t0 = time.monotonic()
    for d in sorted({os.path.dirname(j[0]) for j in jobs}):
        os.makedirs(d, exist_ok=True)
    with multiprocessing.Pool(procs) as pool:
        made = sum(pool.imap_unordered(build_one, jobs, chunksize=256))
    with open(done, "w") as f:
        f.write(f"{len(jobs)}\n")
    print(f"corpus {name}: {len(jobs)} files ({made} written) in {time.monotonic() - t0:.1f}s", flush=True)


BIG_PROJECT = "bench-big"
BIG_VERSION = "1.0.0"
BIG_FILENAME = "bench_big-1.0.0-py3-none-any.whl"


def generate_big(out_root, size_mib):
    d = os.path.join(out_root, "big")
    path = os.path.join(d, BIG_FILENAME)
    done = path + ".done"
    if os.path.exists(done):
        print(f"big wheel: present ({os.path.getsize(path) / 2**20:.0f} MiB)", flush=True)
        return
    os.makedirs(d, exist_ok=True)
    t0 = time.monotonic()
    payload_size = size_mib * 2**20
    info_dir = f"bench_big-{BIG_VERSION}.dist-info"
    payload_name = "bench_big/payload.bin"
    tmp = path + ".tmp"
    sha = hashlib.sha256()
    with zipfile.ZipFile(tmp, "w", allowZip64=True) as zf:
        info = zipfile.ZipInfo(payload_name, date_time=DATE)
        info.compress_type = zipfile.ZIP_STORED
        info.external_attr = 0o644 << 16
        info.file_size = payload_size
        with zf.open(info, "w", force_zip64=payload_size >= 2**31) as w:
            left = payload_size
            while left:
                chunk = os.urandom(min(left, 8 * 2**20))
                sha.update(chunk)
                w.write(chunk)
                left -= len(chunk)
        small = [
            (f"{info_dir}/METADATA", metadata_text(BIG_PROJECT, BIG_VERSION, requires_python=">=3.8")),
            (f"{info_dir}/WHEEL", wheel_text("py3-none-any")),
        ]
        record = f"{payload_name},sha256={base64.urlsafe_b64encode(sha.digest()).rstrip(b'=').decode()},{payload_size}\n"
        record += "".join(f"{n},{record_hash(b)},{len(b)}\n" for n, b in small)
        record += f"{info_dir}/RECORD,,\n"
        for name, data in small + [(f"{info_dir}/RECORD", record.encode())]:
            zi = zipfile.ZipInfo(name, date_time=DATE)
            zi.compress_type = zipfile.ZIP_DEFLATED
            zi.external_attr = 0o644 << 16
            zf.writestr(zi, data)
    os.replace(tmp, path)
    open(done, "w").close()
    print(f"big wheel: {os.path.getsize(path) / 2**20:.0f} MiB in {time.monotonic() - t0:.1f}s", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="corpus root (bench/.work/corpus)")
    ap.add_argument("--procs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--big-mib", type=int, default=1024, help="payload of the big wheel in MiB")
    ap.add_argument("--large-projects", type=int, default=5000, help="projects in the large corpus")
    ap.add_argument("--large-files", type=int, default=50000, help="wheels in the large corpus")
    ap.add_argument("--only", nargs="*", default=["small", "large", "variant", "big"])
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    lists = {"small": small_jobs, "variant": variant_jobs,
             "large": lambda root: large_jobs(root, args.large_projects, args.large_files)}
    for name in ["small", "large", "variant"]:
        if name in args.only:
            generate(name, lists[name](os.path.join(args.out, name)), args.out, args.procs)
    if "big" in args.only:
        generate_big(args.out, args.big_mib)
    return 0


if __name__ == "__main__":
    sys.exit(main())
