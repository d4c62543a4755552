#!/usr/bin/env python3
"""Builds a static PEP 503/691 tree of a corpus, for nginx to serve:

  OUT/simple/index.html, index.json                 root list
  OUT/simple/<normalized>/index.html, index.json    project pages: #sha256=, data-requires-python,
                                                    data-core-metadata / data-dist-info-metadata,
                                                    PEP 700 versions, size, upload-time
  OUT/files/<sha256>/<filename>                     the same bytes (hard link, else a copy)
  OUT/files/<sha256>/<filename>.metadata            the exact METADATA bytes of the wheel (PEP 658)

URLs are the ones wheelforge uses (/files/<sha256>/<percent-encoded name>), so the same client
requests hit both servers. Every page also gets a pre-compressed .gz next to it (gzip level 6,
what wheelforge uses) for nginx's gzip_static. Writes OUT/manifest.json (project -> files) and
OUT/.done; an existing tree with .done is left alone.
"""

import argparse
import gzip
import hashlib
import html
import json
import multiprocessing
import os
import re
import shutil
import sys
import time
import urllib.parse
import zipfile
from datetime import datetime, timezone

WHEEL_RE = re.compile(r"^(?P<name>[^-]+)-(?P<version>[^-]+)(-\d[^-]*)?-[^-]+-[^-]+-[^-]+\.whl$")


def normalize(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def version_key(v):
    # Enough PEP 440 ordering for the generated corpora: numeric release, then local label.
    public, _, local = v.partition("+")
    return ([int(x) if x.isdigit() else 0 for x in public.split(".")], local)


def scan(path):
    """Hashes one wheel and reads its METADATA (the only zip member read)."""
    fn = os.path.basename(path)
    m = WHEEL_RE.match(fn)
    if not m:
        raise SystemExit(f"not a wheel file name: {path}")
    sha = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            sha.update(chunk)
    with zipfile.ZipFile(path) as zf:
        meta_name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = zf.read(meta_name)
    requires_python = None
    project = None
    for line in metadata.decode().splitlines():
        if not line:
            break
        if line.startswith("Requires-Python:"):
            requires_python = line.split(":", 1)[1].strip()
        elif line.startswith("Name:"):
            project = line.split(":", 1)[1].strip()
    return {
        "path": path,
        "filename": fn,
        "project": normalize(project or m.group("name")),
        "version": m.group("version"),
        "sha256": sha.hexdigest(),
        "size": os.path.getsize(path),
        "mtime": os.path.getmtime(path),
        "metadata": metadata,
        "metadata_sha256": hashlib.sha256(metadata).hexdigest(),
        "requires_python": requires_python,
    }


def file_url(f):
    return f"/files/{f['sha256']}/{urllib.parse.quote(f['filename'], safe='')}"


def project_html(name, files):
    out = [
        "<!DOCTYPE html>\n<html><head><meta name=\"pypi:repository-version\" content=\"1.1\">"
        f"<title>Links for {html.escape(name)}</title></head><body><h1>Links for {html.escape(name)}</h1>\n"
    ]
    for f in files:
        attrs = f' href="{file_url(f)}#sha256={f["sha256"]}"'
        if f["requires_python"]:
            attrs += f' data-requires-python="{html.escape(f["requires_python"])}"'
        attrs += f' data-core-metadata="sha256={f["metadata_sha256"]}"'
        attrs += f' data-dist-info-metadata="sha256={f["metadata_sha256"]}"'
        out.append(f"<a{attrs}>{html.escape(f['filename'])}</a><br/>\n")
    out.append("</body></html>\n")
    return "".join(out).encode()


def project_json(name, files):
    versions = sorted({f["version"].partition("+")[0] for f in files}, key=version_key)
    entries = []
    for f in files:
        e = {"filename": f["filename"], "url": file_url(f), "hashes": {"sha256": f["sha256"]}}
        if f["requires_python"]:
            e["requires-python"] = f["requires_python"]
        e["core-metadata"] = {"sha256": f["metadata_sha256"]}
        e["yanked"] = False
        e["size"] = f["size"]
        e["upload-time"] = datetime.fromtimestamp(f["mtime"], timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        entries.append(e)
    doc = {"meta": {"api-version": "1.1"}, "name": name, "versions": versions, "files": entries}
    return json.dumps(doc, separators=(",", ":")).encode()


def root_html(names):
    out = ["<!DOCTYPE html>\n<html><head><meta name=\"pypi:repository-version\" content=\"1.1\">"
           "<title>Simple index</title></head><body><h1>Simple index</h1>\n"]
    out.extend(f'<a href="/simple/{n}/">{html.escape(n)}</a><br/>\n' for n in names)
    out.append("</body></html>\n")
    return "".join(out).encode()


def root_json(names):
    doc = {"meta": {"api-version": "1.1"}, "projects": [{"name": n} for n in names]}
    return json.dumps(doc, separators=(",", ":")).encode()


def write_page(directory, stem, data):
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, stem), "wb") as f:
        f.write(data)
    with open(os.path.join(directory, stem + ".gz"), "wb") as f:
        f.write(gzip.compress(data, compresslevel=6, mtime=0))


def link_or_copy(src, dst):
    if os.path.exists(dst):
        return
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


def render_project(item):
    out, name, files = item
    files = sorted(files, key=lambda f: (version_key(f["version"]), f["filename"]))
    d = os.path.join(out, "simple", name)
    write_page(d, "index.html", project_html(name, files))
    write_page(d, "index.json", project_json(name, files))
    for f in files:
        fd = os.path.join(out, "files", f["sha256"])
        os.makedirs(fd, exist_ok=True)
        link_or_copy(f["path"], os.path.join(fd, f["filename"]))
        with open(os.path.join(fd, f["filename"] + ".metadata"), "wb") as mf:
            mf.write(f["metadata"])
    return len(files)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--procs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("inputs", nargs="+", help="wheel files or directories")
    args = ap.parse_args()
    done = os.path.join(args.out, ".done")
    if os.path.exists(done):
        print(f"static tree {args.out}: present", flush=True)
        return 0
    t0 = time.monotonic()
    paths = []
    for p in args.inputs:
        if os.path.isdir(p):
            for dirpath, _, names in os.walk(p):
                paths.extend(os.path.join(dirpath, n) for n in names if n.endswith(".whl"))
        else:
            paths.append(p)
    paths.sort()
    with multiprocessing.Pool(args.procs) as pool:
        scanned = pool.map(scan, paths, chunksize=64)
    projects = {}
    for f in scanned:
        projects.setdefault(f["project"], []).append(f)
    names = sorted(projects)
    write_page(os.path.join(args.out, "simple"), "index.html", root_html(names))
    write_page(os.path.join(args.out, "simple"), "index.json", root_json(names))
    with multiprocessing.Pool(args.procs) as pool:
        total = sum(pool.imap_unordered(render_project, [(args.out, n, projects[n]) for n in names], chunksize=32))
    manifest = {n: [{"filename": f["filename"], "sha256": f["sha256"], "size": f["size"],
                     "url": file_url(f)} for f in projects[n]] for n in names}
    with open(os.path.join(args.out, "manifest.json"), "w") as f:
        json.dump(manifest, f)
    open(done, "w").close()
    print(f"static tree {args.out}: {len(names)} projects, {total} files in {time.monotonic() - t0:.1f}s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
