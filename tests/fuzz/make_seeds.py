#!/usr/bin/python3
"""Writes the seed corpora of wheelforge's fuzz targets: OUT/<target>/<n> for every target.

Usage: make_seeds.py OUT

Seeds are generated rather than committed so that the repository holds no binary fixtures:
small valid inputs of each kind (file names, versions, labels, METADATA, Accept headers,
multipart bodies, wheels and sdists, requests), from which the fuzzer mutates.
"""

import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile

FILENAMES = [
    # A python set with a tag that starts with a digit, read as a variant wheel: refused.
    "Demo.Pkg-0!02.rc1-py2.02.rc1-py2.py3-none-any.whl",
    "demo-1.0-py3-none-any.whl",
    "flash_attn-2.8.3+cu128torch2.8cxx11abiTRUE-cp312-cp312-linux_x86_64.whl",
    "torch-2.8.0+cu128-1-cp311-cp311-manylinux_2_28_x86_64.whl",
    "numpy-2.1.0-cp310.cp311-abi3-macosx_11_0_arm64.macosx_11_0_x86_64.whl",
    "demo-1.0.tar.gz",
    "legacy-name-0.1.dev3.tar.gz",
    "demo-1.0.zip",
    "Demo.Pkg-1!2.0rc1.post2.dev3-py2.py3-none-any.whl",
]

VERSIONS = [
    "1.0\n1.0.0\n1.0+local",
    "v2.8.3+CU128_torch2.8\n2.8.3\n2.8.3.post1",
    "1!1.0rc1.post2.dev3+abc.5\n1.0a1\n1.0.dev0",
    "1.0-1\n1.0_post.2\n 1.0b2 ",
    "1.0PREVIEW3\n1.0c1\n1.0rev4",
    "2.10.0rc1\n2.9.99\n2.10",
]

# A variant.json (PEP 825): the file name's label on the first line, then the JSON.
VARIANT_JSON = [
    'cu128\n{"$schema": "https://variants-schema.wheelnext.dev/v0.0.3.json",'
    ' "default-priorities": {"namespace": ["nvidia"]}, "providers": {"nvidia":'
    ' {"requires": ["nvidia-variant-provider>=0.0.1"], "plugin-api": "p.plugin:P"}},'
    ' "variants": {"cu128": {"nvidia": {"cuda_version_lower_bound": ["12.8"],'
    ' "sm_arch": ["90_real", "100_real"]}}}}',
    'x8664v3_openblas\n{"$schema": "https://variants-schema.wheelnext.dev/v0.1.0.json",'
    ' "default-priorities": {"namespace": ["x86_64", "blas_lapack"], "feature":'
    ' {"blas_lapack": ["library"]}, "property": {"blas_lapack": {"library": ["mkl"]}}},'
    ' "variants": {"x8664v3_openblas": {"blas_lapack": {"library": ["openblas"]},'
    ' "x86_64": {"level": ["v3"]}}, "x8664v4_mkl": {"x86_64": {"level": ["v4"]}}}}',
    'null\n{"$schema": "https://variants-schema.wheelnext.dev/v0.1.0.json",'
    ' "default-priorities": {"namespace": []}, "variants": {"null": {}}}',
    'cu128\n{"variants": {"cu128": {"nvidia": {"a": [1, null, "x"]}}}}',
    'cu128\n[[[[[[[[[[',
]

VARIANTS = [
    "+cu128torch2.8\ncu128/torch2.8/cxx11abi1\nflash-attn\n2.8.3\ntorch==2.8.*",
    "cu130sm89torch2.10.0\ncpu\ndemo\n1.0\ntorch (==2.10.0)\nnumpy>=1",
    "cpu.cxx11.abi\nrocm6.4/torch2.7\ntorch\n2.7.1\n",
    "rocm63.pt211.g1234abc\ncxx11abi0\ndemo\n1.0\ntorch>=2.8,<2.9\nTorch[extra]~=2.8.0",
    "cu118.cuda11.torch280.cxx11abi-TRUE\ncu12\nx\n1\ntorch==2.8.0; python_version<'3.13'",
    "CU12_torch2.8\ntorch2.8/cu128\ndemo\n1.0\ntorch @ https://example/torch.whl",
]

METADATA = [
    "Metadata-Version: 2.1\nName: demo\nVersion: 1.0\nRequires-Dist: torch==2.8.*\n"
    "Requires-Python: >=3.9\nSummary: A demo\n  continued\n\nDescription body\n",
    "Metadata-Version: 2.4\r\nName: flash_attn\r\nVersion: 2.8.3+cu128torch2.8\r\n\r\n",
    "Wheel-Version: 1.0\nGenerator: bdist_wheel (0.43.0)\nRoot-Is-Purelib: false\n"
    "Tag: cp312-cp312-linux_x86_64\nTag: cp311-cp311-linux_x86_64\n",
    "Metadata-Version: 2.1\nName: caf\u00e9\nVersion: 1.0\nName: other\n",
]

NEGOTIATE = [
    "",
    "text/html",
    "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, "
    "text/html;q=0.01",
    "*/*",
    "application/vnd.pypi.simple.latest+json;q=0.9, */*;q=0.1",
    "text/*;level=1;q=0.5, application/json",
    "text/html\napplication/vnd.pypi.simple.v1+json",
    'application/x;param="a,b;c";q=0.5',
]

SHA = "a" * 64
UPSTREAM = [
    "",
    '<!DOCTYPE html><html><head><meta name="pypi:repository-version" content="1.1"></head>'
    '<body><h1>Links for demo</h1>\n'
    '<a href="../../files/demo-1.0-py3-none-any.whl#sha256=%s" data-requires-python="&gt;=3.8" '
    'data-core-metadata="sha256=%s" data-dist-info-metadata="sha256=%s">'
    'demo-1.0-py3-none-any.whl</a><br/>\n'
    "<a href='demo-1.1.tar.gz#sha256=%s' data-yanked=\"bad &amp; broken\">demo-1.1.tar.gz</a>\n"
    '</body></html>' % (SHA, SHA, SHA, SHA),
    '<base href="https://cdn.example/p/"><!-- <a href="x"> --><a href="demo-2.0%%2Bcu128-py3-none-any.whl'
    '#sha256=%s" data-dist-info-metadata="true" data-yanked="">x</a>' % SHA,
    '{"meta":{"api-version":"1.1"},"name":"demo","versions":["1.0"],"files":['
    '{"filename":"demo-1.0-py3-none-any.whl","url":"/files/demo-1.0-py3-none-any.whl",'
    '"hashes":{"sha256":"%s"},"requires-python":">=3.8","core-metadata":{"sha256":"%s"},'
    '"yanked":false,"size":12,"upload-time":"2023-11-14T22:13:20.123456Z"},'
    '{"filename":"demo-1.1.tar.gz","url":"demo-1.1.tar.gz","hashes":{"sha256":"%s"},'
    '"dist-info-metadata":true,"yanked":"broken"}]}' % (SHA, SHA, SHA),
]

BOUNDARY = "----b0undary"


def multipart_body(boundary, crlf_preamble=True):
    parts = [
        ("name", None, b"demo"),
        ("version", None, b"1.0"),
        ("content", "demo-1.0-py3-none-any.whl", b"PK\x03\x04data\r\n--not-it\r\nmore"),
        ("sha256_digest", None, b"a" * 64),
    ]
    out = b"preamble\r\n" if crlf_preamble else b""
    for name, filename, data in parts:
        out += b"--" + boundary.encode() + b"\r\n"
        disposition = 'Content-Disposition: form-data; name="%s"' % name
        if filename is not None:
            disposition += '; filename="%s"' % filename
        out += disposition.encode() + b"\r\n"
        if filename is not None:
            out += b"Content-Type: application/octet-stream\r\n"
        out += b"\r\n" + data + b"\r\n"
    out += b"--" + boundary.encode() + b"--\r\nepilogue"
    return out


def multipart_seeds():
    seeds = []
    for flags, sizes in ((0, b""), (3, b"\x01\x07\x40"), (8 | 2, b"\x00\x05"), (7, bytes(range(1, 8)))):
        ctype = ('multipart/form-data; boundary="%s"' % BOUNDARY).encode()
        seeds.append(bytes([flags]) + sizes + ctype + b"\n" + multipart_body(BOUNDARY))
    seeds.append(b"\x00multipart/form-data; boundary=fuzzb\n" + multipart_body("fuzzb", False))
    seeds.append(b"\x00Multipart/Form-Data ; charset=utf-8; boundary=a'()+_,-./:=?\n" +
                 multipart_body("a'()+_,-./:=?"))
    return seeds


class Unseekable(io.RawIOBase):
    """A write-only stream without tell/seek: zipfile then writes data descriptors."""

    def __init__(self):
        super().__init__()
        self.data = bytearray()

    def writable(self):
        return True

    def write(self, b):
        self.data += b
        return len(b)


def wheel_bytes(name="demo", version="1.0", compression=zipfile.ZIP_DEFLATED, extra=(),
                zip64=False, streamed=False):
    sink = Unseekable() if streamed else io.BytesIO()
    dist_info = "%s-%s.dist-info" % (name, version)
    members = [
        ("%s/__init__.py" % name, b"x = 1\n"),
        (dist_info + "/METADATA",
         ("Metadata-Version: 2.1\nName: %s\nVersion: %s\n" % (name, version)).encode()),
        (dist_info + "/WHEEL", b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n"),
    ] + [(m, d if isinstance(d, bytes) else d.encode()) for m, d in extra] + [
        (dist_info + "/RECORD", b"")]
    with zipfile.ZipFile(sink, "w", compression=compression) as z:
        for member, data in members:
            info = zipfile.ZipInfo(member, date_time=(2020, 1, 1, 0, 0, 0))
            info.compress_type = compression
            with z.open(info, "w", force_zip64=zip64) as f:
                f.write(data)
    return bytes(sink.data) if streamed else sink.getvalue()


def sdist_bytes(top="demo-1.0", links=False):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", format=tarfile.PAX_FORMAT) as t:
        def add(name, data):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = 0
            t.addfile(info, io.BytesIO(data))
        d = tarfile.TarInfo(top)
        d.type = tarfile.DIRTYPE
        t.addfile(d)
        add(top + "/PKG-INFO", b"Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n")
        add(top + "/setup.py", b"from setuptools import setup\nsetup()\n")
        if links:
            link = tarfile.TarInfo(top + "/link")
            link.type = tarfile.SYMTYPE
            link.linkname = "setup.py"
            t.addfile(link)
            hard = tarfile.TarInfo(top + "/hard")
            hard.type = tarfile.LNKTYPE
            hard.linkname = top + "/setup.py"
            t.addfile(hard)
    return buf.getvalue()


ELF_LIBRARY = r"""
#include <string.h>
int stub_old(void) { return 1; }
int stub_new(void) { return 2; }
void copy_bytes(char* d, const char* s, unsigned long n) { memcpy(d, s, n); }
"""
ELF_VERSION_SCRIPT = "STUB_1.0 { global: stub_old; local: *; };\nSTUB_2.0 { global: stub_new; copy_bytes; } STUB_1.0;\n"
ELF_NOLIBC = "int stub_old(void);\nint use(void) { return stub_old(); }\n"
ELF_PROGRAM = "#include <stdio.h>\nint main(void) { puts(\"hi\"); return 0; }\n"
CROSS_TARGETS = ["i686-linux-gnu", "powerpc64-linux-gnu", "powerpc-linux-gnu", "aarch64-linux-gnu"]


def elf_seeds():
    """Small shared objects and executables, compiled now (no binary fixtures in the tree)."""
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        print("make_seeds.py: no C compiler, no ELF seeds", file=sys.stderr)
        return []
    small = ["-Os", "-s", "-Wl,-z,noseparate-code", "-Wl,-z,max-page-size=4096"]
    builds = [
        [cc, "-shared", "-fPIC", "lib.c", "-o", "a.so", "-Wl,-soname,libstub.so.1",
         "-Wl,--version-script,stub.map"] + small,
        [cc, "-shared", "-fPIC", "lib.c", "-o", "b.so", "-Wl,--hash-style=sysv",
         "-Wl,-rpath,$ORIGIN/../lib", "-Wl,--disable-new-dtags"] + small,
        [cc, "-no-pie", "prog.c", "-o", "prog"] + small,
    ]
    if shutil.which("clang") and shutil.which("ld.lld"):
        for target in CROSS_TARGETS:
            cross = ["clang", "--target=" + target, "-fPIC", "-shared", "-nostdlib",
                     "-fuse-ld=lld", "-Os", "-s"]
            builds.append(cross + ["stub.c", "-o", "libstub-%s.so" % target,
                                   "-Wl,-soname,libstub.so.1", "-Wl,--version-script,stub.map",
                                   "-Wl,--hash-style=sysv"])
            builds.append(cross + ["user.c", "-o", "user-%s.so" % target,
                                   "libstub-%s.so" % target])
    seeds = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, text in (("lib.c", ELF_LIBRARY), ("stub.map", ELF_VERSION_SCRIPT),
                           ("prog.c", ELF_PROGRAM), ("user.c", ELF_NOLIBC),
                           ("stub.c", "int stub_old(void) { return 1; }\n"
                                      "int stub_new(void) { return 2; }\n")):
            with open(os.path.join(tmp, name), "w") as f:
                f.write(text)
        for args in builds:
            result = subprocess.run(args, cwd=tmp, capture_output=True)
            if result.returncode != 0:
                print("make_seeds.py: skipped %s" % " ".join(args), file=sys.stderr)
                continue
            with open(os.path.join(tmp, args[args.index("-o") + 1]), "rb") as f:
                seeds.append(f.read())
    return seeds


def archive_seeds(elves):
    seeds = [
        wheel_bytes(),
        wheel_bytes(compression=zipfile.ZIP_STORED),
        wheel_bytes("Demo", "1.0", extra=[("demo/sub/data.txt", "data")]),
        wheel_bytes(zip64=True),
        wheel_bytes(streamed=True),
        sdist_bytes(),
        sdist_bytes(links=True),
    ]
    if elves:
        members = [("demo/_C.so", elves[0]), ("demo-1.0.data/scripts/tool", elves[-1])]
        seeds.append(wheel_bytes(extra=members))
        seeds.append(wheel_bytes(compression=zipfile.ZIP_STORED, extra=members))
    return seeds


SHA_A = "a" * 64
FLASH = "flash_attn-2.8.3%2Bcu126torch2.7-cp312-cp312-linux_x86_64.whl"
HTTP = [
    "/simple/\napplication/vnd.pypi.simple.v1+json\n\n\ngzip",
    "/simple/Flash_Attn?format=application/vnd.pypi.simple.v1+json",
    "/cu128/torch2.8/simple/flash-attn/\ntext/html\n\n\"x\", W/\"y\"\nbr, gzip;q=0",
    "/files/%s/%s\n\nbytes=10-19\n\n\n\"%s\"" % (SHA_A, FLASH, SHA_A),
    "/files/%s/%s.metadata\n\nbytes=-5\n*" % ("b" * 64, FLASH),
    "/integrity/Flash_Attn/2.8.3%%2Bcu126torch2.7/%s/provenance\n\nbytes=0-9\n\"%s\""
    % (FLASH, "f" * 64),
    "/integrity/demo/1.0/%s/provenance" % FLASH,
    "/api/resolve?torch=2.8.0%2Bcu128&abi=1&project=Flash_Attn\n\n\n\n\n\nexample.org:8080",
    "/api/resolve?torch=2.9.0&cuda=12.8&hip=None&abi=1&project=flash-attn",
    "/api/resolve?torch=2.7.0&cuda=13.0&project=demo",
    "/api/resolve?torch=2.9.0%2Brocm6.4&rocm=6.4.43482-0f2d60242&cuda=",
    "/api/projects/flash-attn/variants\n\n\n\"nope\"",
    "/cpu/simple/demo/\napplication/vnd.pypi.simple.latest+html",
    "/rocm6.4/cxx11abi0/simple/\n*/*",
    "/healthz",
    "/",
]

# handlers: method line, target, credentials (A/U/R/L or a header value), Cookie, Origin, Host,
# then the body ("{session}" and "{csrf}" are filled in by the target).
HANDLERS = [
    "GET\n/simple/demo/demo-1.0-variants.json\n\n\n\n\n",
    "GET\n/cu128/torch2.8/simple/Demo/demo-1.0-variants.json\n\n\n\n\n",
    "GET\n/upstream/pypi/%s/demo-1.0-py3-none-any.whl\n\n\n\n\n" % ("a" * 64),
    "POST\n/admin/yank\nA\n\n\n\nproject=demo&version=1.0&reason=broken+ABI",
    "POST\n/admin/unyank?project=demo\nA\n\n\n\nfilename=demo-1.0-py3-none-any.whl",
    "DELETE\n/admin/files/demo-1.0-py3-none-any.whl\nA\n\n\n\n",
    "POST\n/admin/projects/Demo/claim\nA\n\n\n\ntoken=2",
    "POST\n/admin/projects/demo/release\nU\n\n\n\n",
    'POST\n/admin/builds\nA\n\n\n\n{"recipe": "demo", "version": "1.0", "force": true, '
    '"matrix": {"python": ["3.12"], "torch": ["2.8"], "cuda": ["12.8"]}}',
    "GET\n/admin/jobs/1/log?offset=10&follow=1\nA\n\n\n\n",
    "PUT\n/admin/builds\nBearer wf_x\n\n\n\n",
    "POST\n/admin/yank\nU\n\n\n\nproject=demo&version=1.0",
    "POST\n/admin/tokens\nA\n\n\n\nscope=upload&project=Demo&description=ci&expires=90d",
    "POST\n/admin/tokens/2/revoke\nA\n\n\n\n",
    "GET\n/admin/audit?project=demo&since=2026-01-01T00:00:00Z&limit=5\nA\n\n\n\n",
    "POST\n/tokens/\nA\n\nhttp://idx.example\nidx.example\n"
    "scope=read&expires=2027-01-31&description=x&csrf={csrf}",
    "POST\n/login\n\n\nhttp://idx.example\nidx.example\ntoken=wf_x&next=%2Fbuilds%2F",
    "POST\n/logout\n\nwf_session={session}\nhttp://idx.example\nidx.example\ncsrf={csrf}",
    "POST\n/builds/\nA\n\nhttp://idx.example\nidx.example\n"
    "recipe=demo&version=1.0&python=3.12,3.13&torch=2.8&cuda=12.8&force=on&csrf={csrf}",
    "POST\n/jobs/1/retry\n\nwf_session={session}\nhttp://idx.example\nidx.example\ncsrf={csrf}",
    "GET private\n/project/Demo/?version=1.0&torch=2.8&backend=12.8&python=3.12\nR\n\n\n\n",
    "GET\n/?q=dem\n\n\n\n\n",
    "GET\n/api/files/%s/contents\n\n\n\n\n" % SHA_A,
    "GET private\n/inspect/%s\nR\n\n\n\n" % SHA_A,
    "GET\n/inspect/not-hex\n\n\n\n\n",
    "GET\n/static/style.css\n\n\n\n\n",
    "GET\n/builds\n\n\n\n\n",
    "GET\n/login?next=//evil.example/\n\n\n\n\n",
    "OPTIONS\n/legacy/\nL\n\n\n\n",
]

# upload: a flags byte (bits 0-1 the token, bits 2-7 the chunk size), then the PUT's file name,
# the declared length, the Content-Type, and the body.
def upload_seeds():
    seeds = []
    for flags, name, length, boundary in ((1, "demo-1.0-py3-none-any.whl", "1000", BOUNDARY),
                                          (3 | 8, "demo-1.0.tar.gz", "", "fuzzb"),
                                          (2 | 64, "theirs-1.0-py3-none-any.whl", "9", "x"),
                                          (1, "a/b-1.0-py3-none-any.whl", "", "q")):
        ctype = 'multipart/form-data; boundary="%s"' % boundary
        body = multipart_body(boundary)
        body = body.replace(b'name="sha256_digest"', b'name="filetype"')
        seeds.append(bytes([flags]) + ("%s\n%s\n%s\n" % (name, length, ctype)).encode() + body)
    seeds.append(b"\x00\n\ntext/plain\n")
    return seeds


# framing: a flags byte (bit 0 HTTP/1.0, bits 1-2 Transfer-Encoding lines, bits 3-4 Host lines,
# bits 5-7 the log cap), a Transfer-Encoding value, '\n', a Host value.
FRAMING = [
    b"\x08\n127.0.0.1:8080",
    b"\x0a\x01chunked\nindex.example",
    b"\x0achunked, gzip\nindex.example",
    b"\x0agzip, chunked\n[::1]:8080",
    b"\x0c\x05gzip\nh",
    b"\x01\n",
    b"\x03chunked\n",
    b"\x10\nuser@host",
    b"\xe8\x02/simple/wf_Xk3-9aQ_vB7LmZp2Rt8YwE4uN6sDcHfJ1gKo5iTqVe0/?token=s3cr3t&x=1",
    b"\x08\n%41b.c:",
]


def write(out, target, seeds):
    directory = os.path.join(out, target)
    os.makedirs(directory, exist_ok=True)
    for i, seed in enumerate(seeds):
        data = seed.encode("utf-8", "surrogateescape") if isinstance(seed, str) else seed
        with open(os.path.join(directory, "seed-%02d" % i), "wb") as f:
            f.write(data)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_seeds.py OUT")
    out = sys.argv[1]
    write(out, "filename", FILENAMES)
    write(out, "version", VERSIONS)
    write(out, "variant", VARIANTS)
    write(out, "variant_json", VARIANT_JSON)
    write(out, "metadata", METADATA)
    write(out, "negotiate", NEGOTIATE)
    write(out, "upstream", UPSTREAM)
    write(out, "multipart", multipart_seeds())
    elves = elf_seeds()
    write(out, "elf", elves)
    write(out, "archive", archive_seeds(elves))
    write(out, "http_read", HTTP)
    write(out, "handlers", HANDLERS)
    write(out, "upload", upload_seeds())
    write(out, "framing", FRAMING)


if __name__ == "__main__":
    main()
