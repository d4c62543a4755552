"""Project pages as index users expect them, with real clients: the description from METADATA
(uploaded with twine, read with curl, the same metadata pip installs from), an XSS corpus
through Markdown and reStructuredText descriptions, the full project list at /projects/, the
"did you mean" 404, uploads sent to the wrong address (twine, poetry, curl), the navigation of
an admin signed in by HTTP Basic, and an empty index's first steps."""

from __future__ import annotations

import html.parser
import re
from pathlib import Path

import pytest

from test_publish import POETRY, client_env, client_or_skip, output_of, twine
from test_pip import PIP_TIMEOUT, pip_python_or_skip
from wfhelpers import (
    Artifact,
    clean_env,
    curl,
    curl_upload,
    dist_name,
    make_wheel,
    pip_args,
    record_line,
    run,
    write_zip,
)

UPLOAD_HINT = "uploads go to /legacy/ (twine, poetry, pdm) or PUT /upload/<filename>"


def described_wheel(directory: Path, name: str, version: str, headers: str, body: str) -> Artifact:
    """A pure wheel whose METADATA carries `headers` (after Name and Version) and the
    description `body` after the blank line."""
    directory.mkdir(parents=True, exist_ok=True)
    module = dist_name(name).lower()
    distinfo = f"{dist_name(name)}-{version}.dist-info"
    metadata = (f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n{headers}\n{body}").encode()
    members = [
        (f"{module}/__init__.py", f"VALUE = {name!r}\n".encode()),
        (f"{distinfo}/METADATA", metadata),
        (f"{distinfo}/WHEEL", b"Wheel-Version: 1.0\nGenerator: wf-tests\nRoot-Is-Purelib: true\n"
                              b"Tag: py3-none-any\n"),
    ]
    record = "".join(record_line(p, d) + "\n" for p, d in members) + f"{distinfo}/RECORD,,\n"
    members.append((f"{distinfo}/RECORD", record.encode()))
    path = directory / f"{dist_name(name)}-{version}-py3-none-any.whl"
    write_zip(path, members)
    return Artifact(path, name, version, metadata)


class Executable(html.parser.HTMLParser):
    """Collects what a browser would run: script-like elements, event handler attributes and
    javascript:/vbscript:/data: URLs in any attribute."""

    DANGEROUS_TAGS = {"script", "iframe", "object", "embed", "style", "svg", "math", "form",
                      "input", "meta", "base", "link", "details"}

    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []

    def handle_starttag(self, tag, attrs):
        values = dict(attrs)
        # The page's own scripts, styles and forms are the only ones allowed.
        own = (tag == "script" and (values.get("src") or "").startswith("/static/")) or \
            (tag in {"meta", "link", "form", "input"})
        if tag in self.DANGEROUS_TAGS and not own:
            self.found.append(f"<{tag}>")
        for name, value in attrs:
            if name.startswith("on"):
                self.found.append(f"{tag} {name}")
            v = re.sub(r"[\s\x00-\x1f]", "", (value or "")).lower()
            if v.startswith(("javascript:", "vbscript:", "data:")):
                self.found.append(f"{tag} {name}={value}")


def executable_parts(page: str) -> list[str]:
    parser = Executable()
    parser.feed(page)
    return parser.found


def test_the_corpus_checker_finds_what_would_run():
    # The checker itself: each kind of injection is found when it is really there.
    assert executable_parts("<p>x</p><script src=/static/a/copy.js></script>") == []
    for bad in ("<script>alert(1)</script>", "<img src=x onerror=alert(1)>",
                '<a href="javascript:alert(1)">x</a>', '<a href=" JaVa\tScript:x">x</a>',
                "<svg onload=x>", '<iframe src="data:text/html,x">'):
        assert executable_parts(bad), bad


def description_of(page: str) -> str:
    start = page.find('<section aria-labelledby="description-heading"')
    assert start >= 0, "no description section on the page"
    return page[start:page.find("</section>", start)]


def get(server, harness, target: str, *extra: str):
    return curl([*extra, server.url + target], harness.path("curl"))


# ---------------------------------------------------------------------------------------------
# 1. The description


def test_project_page_describes_the_project(harness, server, upload_token, artifacts):
    wheel = described_wheel(
        artifacts, "wf-described", "1.2.0",
        "Summary: Fused CUDA kernels for attention\n"
        "Author: Ada Lovelace\nAuthor-email: ada@example.com\n"
        "License-Expression: BSD-3-Clause\n"
        "Project-URL: Source, https://example.com/wf-described\n"
        "Project-URL: Tracker, https://example.com/wf-described/issues\n"
        "Classifier: Programming Language :: Python :: 3\n"
        "Classifier: Environment :: GPU :: NVIDIA CUDA :: 12\n"
        "Requires-Python: >=3.8\n"
        "Requires-Dist: packaging>=20\n"
        "Description-Content-Type: text/markdown\n",
        "# wf-described\n\nFast *fused* kernels.\n\n## Install\n\n```sh\npip install wf-described\n```\n",
    )
    proc = twine(harness, server.url + "/legacy/", upload_token, [wheel.path])
    assert proc.returncode == 0, output_of(proc)

    page = get(server, harness, "/project/wf-described/")
    assert page.status == 200, page.body
    body = page.body
    assert '<p class="summary" id="summary">Fused CUDA kernels for attention</p>' in body
    assert '<dd id="license">BSD-3-Clause</dd>' in body
    assert '<dd id="author">Ada Lovelace &lt;ada@example.com&gt;</dd>' in body
    assert 'href="https://example.com/wf-described"' in body and ">Source</a>" in body
    assert ">Tracker</a>" in body
    assert "<code>packaging&gt;=20</code>" in body
    assert "Environment :: GPU :: NVIDIA CUDA :: 12" in body
    assert '<dd id="requires-python"><code>&gt;=3.8</code></dd>' in body
    description = description_of(body)
    assert "<h3>wf-described</h3>" in description and "<h4>Install</h4>" in description
    assert "<em>fused</em>" in description
    assert '<code class="language-sh">pip install wf-described' in description
    assert page.headers.get("content-security-policy", "").startswith("default-src 'self'")

    # The page says what pip sees in the same METADATA.
    python = pip_python_or_skip("24.2")
    target = harness.path("target")
    proc = run([python, "-m", "pip", "install", "--target", target,
                *pip_args(server.url + "/simple/"), "--no-deps", "wf-described==1.2.0"],
               timeout=PIP_TIMEOUT, cwd=harness.path("neutral"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    show = run([python, "-m", "pip", "show", "wf-described"], timeout=60,
               env=clean_env(PYTHONPATH=str(target)), cwd=harness.path("neutral"))
    assert "Summary: Fused CUDA kernels for attention" in show.stdout, show.stdout + show.stderr
    assert "Requires: packaging" in show.stdout


def test_older_versions_show_their_own_metadata(harness, server, upload_token, artifacts):
    for version, summary, python in (("1.0", "first summary", ">=3.7"),
                                     ("2.0", "second summary", ">=3.10")):
        wheel = described_wheel(artifacts / version, "wf-versions", version,
                                f"Summary: {summary}\nRequires-Python: {python}\n", "")
        assert curl_upload(server, harness.path("curl"), wheel.path, token=upload_token).status == 201
    latest = get(server, harness, "/project/wf-versions/").body
    assert "second summary" in latest and "&gt;=3.10" in latest and "first summary" not in latest
    older = get(server, harness, "/project/wf-versions/?version=1.0").body
    assert "first summary" in older and "&gt;=3.7" in older


# An XSS corpus through Description: every entry must come out as text, never as markup that
# runs.
XSS_CORPUS = [
    "<script>alert('wf-xss')</script>",
    "<img src=x onerror=alert('wf-xss')>",
    "<svg/onload=alert('wf-xss')>",
    "<iframe src=\"javascript:alert('wf-xss')\"></iframe>",
    "<a href=\"javascript:alert('wf-xss')\">click</a>",
    "[click](javascript:alert('wf-xss'))",
    "[click](JaVaScRiPt:alert('wf-xss'))",
    "[click](&#106;avascript:alert('wf-xss'))",
    "[click](<javascript:alert('wf-xss')>)",
    "[click][ref]\n\n[ref]: javascript:alert('wf-xss')",
    "[click](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    "![img](javascript:alert('wf-xss'))",
    "<javascript:alert('wf-xss')>",
    "<div onmouseover=\"alert('wf-xss')\">\n\nraw block\n\n</div>",
    "<details open ontoggle=alert('wf-xss')>",
    "<style>body{background:url(javascript:alert('wf-xss'))}</style>",
    "<math><mi xlink:href=\"javascript:alert('wf-xss')\">x</mi></math>",
    "[x](https://ok.example/\"onmouseover=\"alert('wf-xss'))",
    "<<script>script>alert('wf-xss')<</script>/script>",
    ".. raw:: html\n\n   <script>alert('wf-xss')</script>",
    "`click <javascript:alert('wf-xss')>`_",
]


@pytest.mark.parametrize("content_type", ["text/markdown", "text/x-rst", "text/plain", None])
def test_xss_corpus_through_the_description(harness, server, upload_token, artifacts, content_type):
    name = "wf-xss-" + (content_type or "none").replace("/", "-").replace("text-", "")
    headers = f"Description-Content-Type: {content_type}\n" if content_type else ""
    # The same corpus in the Summary and a Project-URL, which are shown too.
    headers += "Summary: <script>alert('wf-xss')</script>\n"
    headers += "Project-URL: Home, javascript:alert('wf-xss')\n"
    body = "\n\n".join(XSS_CORPUS) + "\n"
    wheel = described_wheel(artifacts, name, "1.0", headers, body)
    proc = twine(harness, server.url + "/legacy/", upload_token, [wheel.path])
    assert proc.returncode == 0, output_of(proc)
    page = get(server, harness, f"/project/{name}/")
    assert page.status == 200
    assert executable_parts(page.body) == []
    description = description_of(page.body)
    assert "wf-xss" in description  # the corpus is shown, as text
    if content_type == "text/markdown":
        assert "<!-- raw HTML omitted -->" in description
    else:
        assert description.count("<pre") == 1
        assert "&lt;script&gt;alert(&#39;wf-xss&#39;)&lt;/script&gt;" in description or \
            "&lt;script&gt;alert('wf-xss')&lt;/script&gt;" in description


# ---------------------------------------------------------------------------------------------
# 2. The project list and the "did you mean" 404


def test_project_list_pages_sorts_and_searches(harness, server, upload_token, artifacts):
    names = [f"wf-list-{i:02d}" for i in range(52)]
    for name in names:
        wheel = make_wheel(artifacts / name, name, "1.0")
        assert server.put_file(wheel, upload_token).status == 201
    last = make_wheel(artifacts / "late", "aaa-late-pkg", "1.0")
    assert curl_upload(server, harness.path("curl"), last.path, token=upload_token).status == 201

    first = get(server, harness, "/projects/")
    assert first.status == 200
    assert "53 projects, 1–50 shown." in first.body
    assert 'href="/project/aaa-late-pkg/"' in first.body  # by name: first
    assert 'href="/project/wf-list-49/"' not in first.body
    assert "Page 1 of 2" in first.body
    second = get(server, harness, "/projects/?page=2")
    assert 'href="/project/wf-list-49/"' in second.body and 'href="/project/wf-list-51/"' in second.body
    newest = get(server, harness, "/projects/?sort=updated").body
    assert newest.index("/project/aaa-late-pkg/") < newest.index("/project/wf-list-51/")
    assert newest.index("/project/wf-list-51/") < newest.index("/project/wf-list-50/")
    found = get(server, harness, "/projects/?q=WF_List.07").body
    assert "1 project." in found and 'href="/project/wf-list-07/"' in found
    assert get(server, harness, "/projects/?sort=size").status == 400
    assert get(server, harness, "/projects/?page=0").status == 400
    redirect = get(server, harness, "/projects")
    assert redirect.status == 301 and redirect.headers["location"] == "/projects/"
    # Linked from the navigation of every page.
    assert '<li><a href="/projects/">Projects</a></li>' in get(server, harness, "/").body


def test_projects_without_files_are_not_listed(harness, server, tokens, artifacts):
    admin = harness.token("admin")
    kept = make_wheel(artifacts, "wf-kept", "1.0")
    gone = make_wheel(artifacts, "wf-gone", "1.0")
    for wheel in (kept, gone):
        assert server.put_file(wheel, tokens["upload"]).status == 201
    deleted = curl(["-X", "DELETE", "-u", f"__token__:{admin}",
                    f"{server.url}/admin/files/{gone.filename}"], harness.path("curl"))
    assert deleted.status == 200, deleted.body
    listing = get(server, harness, "/projects/").body
    assert "/project/wf-kept/" in listing and "/project/wf-gone/" not in listing


def test_unknown_project_suggests_close_names(harness, server, upload_token, artifacts):
    for name in ("flash-attn", "xformers"):
        assert server.put_file(make_wheel(artifacts, name, "1.0"), upload_token).status == 201
    for asked in ("flash-atn", "flahs-attn", "Flash_Atten"):
        page = get(server, harness, f"/project/{asked}/", "-L")
        assert page.status == 404, asked
        assert 'Did you mean <a href="/project/flash-attn/">flash-attn</a>?' in page.body, page.body
    far = get(server, harness, "/project/numpy/")
    assert far.status == 404 and "Did you mean" not in far.body


# ---------------------------------------------------------------------------------------------
# 6. Uploads sent to the wrong address


@pytest.mark.parametrize("path", ["/", "/simple/", "/project/wf-hint/"])
def test_twine_upload_to_the_wrong_address_says_where_uploads_go(
        harness, server, upload_token, artifacts, path):
    wheel = make_wheel(artifacts, "wf-hint", "1.0")
    proc = twine(harness, server.url + path, upload_token, [wheel.path])
    text = output_of(proc)
    assert proc.returncode != 0, text
    assert "405" in text and UPLOAD_HINT in text, text
    assert get(server, harness, "/simple/wf-hint/").status == 404  # nothing stored


def test_poetry_publish_to_the_index_url_says_where_uploads_go(harness, server, upload_token):
    client_or_skip(POETRY, "1.3")
    project = harness.path("poetry-project")
    (project / "wf_poetry_hint").mkdir(parents=True, exist_ok=True)
    (project / "wf_poetry_hint" / "__init__.py").write_text("")
    (project / "pyproject.toml").write_text(
        '[tool.poetry]\nname = "wf-poetry-hint"\nversion = "1.0.0"\ndescription = ""\n'
        'authors = ["wf <wf@example.com>"]\npackages = [{include = "wf_poetry_hint"}]\n\n'
        '[tool.poetry.dependencies]\npython = ">=3.8"\n\n'
        '[build-system]\nrequires = ["poetry-core"]\nbuild-backend = "poetry.core.masonry.api"\n')
    env = client_env(harness)
    for args in (["config", "repositories.wf", server.url + "/simple/"],
                 ["config", "http-basic.wf", "__token__", upload_token]):
        proc = run([POETRY, *args], cwd=project, env=env, timeout=120)
        assert proc.returncode == 0, output_of(proc)
    proc = run([POETRY, "publish", "--build", "-r", "wf", "-n"], cwd=project, env=env, timeout=300)
    text = output_of(proc)
    assert proc.returncode != 0, text
    assert UPLOAD_HINT in text, text


def test_curl_post_to_pages_answers_405_with_the_hint(harness, server, upload_token, artifacts):
    wheel = make_wheel(artifacts, "wf-hint", "1.0")
    for path in ("/", "/simple/", "/projects/"):
        result = curl(["-u", f"__token__:{upload_token}", "-F", f"content=@{wheel.path}",
                       server.url + path], harness.path("curl"))
        assert result.status == 405, (path, result.status)
        assert result.headers["allow"] == "GET, HEAD"
        assert UPLOAD_HINT in result.body
    # A PUT of the file to the index URL.
    result = curl_upload(server, harness.path("curl"), wheel.path, token=upload_token,
                         target="/simple/")
    assert result.status == 405 and UPLOAD_HINT in result.body


# ---------------------------------------------------------------------------------------------
# 7. Navigation with HTTP Basic, and the empty index


def test_navigation_shows_an_admin_signed_in_by_basic_auth(harness, server, upload_token, artifacts):
    admin = harness.token("admin")
    assert server.put_file(make_wheel(artifacts, "wf-nav", "1.0"), upload_token).status == 201
    for path in ("/", "/projects/", "/project/wf-nav/", "/builds/"):
        page = get(server, harness, path, "-u", f"__token__:{admin}")
        assert page.status == 200, (path, page.status)
        assert "Signed in: admin token (HTTP auth)" in page.body, path
        assert ">Log in</a>" not in page.body, path
        assert '<a href="/tokens/">Tokens</a>' in page.body, path
        anonymous = get(server, harness, path, "-L")
        if path != "/builds/":
            assert ">Log in</a>" in anonymous.body and "Signed in" not in anonymous.body, path
            assert '<a href="/tokens/">' not in anonymous.body, path
    # Upload tokens see no link to the admins' tokens page.
    page = get(server, harness, "/", "-u", f"__token__:{upload_token}")
    assert "Signed in: upload token (HTTP auth)" in page.body
    assert '<a href="/tokens/">' not in page.body


def test_empty_index_explains_the_first_upload(harness, server, upload_token, artifacts):
    home = get(server, harness, "/").body
    assert "Upload your first wheel" in home
    assert "wheelforge token create --data-dir" in home and "--scope upload" in home
    assert f"twine upload --repository-url {server.url}/legacy/" in home
    # Following the steps: the command's token works with twine, and the page moves on.
    wheel = make_wheel(artifacts, "wf-first", "1.0")
    proc = twine(harness, server.url + "/legacy/", upload_token, [wheel.path])
    assert proc.returncode == 0, output_of(proc)
    home = get(server, harness, "/").body
    assert "Upload your first wheel" not in home and "/project/wf-first/" in home
