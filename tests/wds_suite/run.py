"""WebDataset's own test suite, run against libshard.webdataset.

    /usr/bin/python3 tests/wds_suite/run.py WEBDATASET [--build build] [--against libshard]

WEBDATASET is a copy of WebDataset's repository at commit e0953f9 (v1.0.2): its tests/ and
testdata/ are copied into a temporary folder (nothing is written into the copy, nothing of
it is committed here), testdata/imagenet-000000.tgz, which the public repository lacks, is
made by make_testdata.py, and pytest runs there with `import webdataset` resolving to
libshard.webdataset through a one-line alias module (checked first: webdataset.__file__
must be libshard's). --against webdataset runs the same tests on the copy's own source
instead (it needs braceexpand on PYTHONPATH), which gives the baseline.

Deselected: the tests that reach hosts outside this machine (DESELECTED below). Debian's
python3-imageio has no imageio.v3, which one test file imports: a three-line stand-in (PIL's
imread) is put on the path for both runs. Prints pytest's summary and one line per test
file (passed, failed); the exit status is pytest's.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

COMMIT = "e0953f9"
REPO = Path(__file__).resolve().parents[2]

#: tests that need hosts outside this machine (storage.googleapis.com, httpbin.org)
DESELECTED = [
    "tests/test_cache.py::TestStreamingOpen::test_remote_file",
    "tests/test_cache.py::TestFileCache::test_remote_file",
    "tests/test_compat.py::test_decoder",
    "tests/test_compat.py::test_cache_dir",
    "tests/test_compat.py::test_shard_syntax",
    "tests/test_compat.py::test_torchvision",
    "tests/test_compat.py::test_batched",
    "tests/test_compat.py::test_unbatched",
    "tests/test_decode.py::test_handlers",
    "tests/test_handlers.py::test_missing_throws2",
    "tests/test_loaders.py::test_dataloader",
    "tests/test_pipeline.py::test_dataloader",
    "tests/test_pipeline.py::test_decode_handlers",
    "tests/test_pipeline.py::test_decoder",
    "tests/test_pipeline.py::test_pipe",
    "tests/test_pipeline.py::test_torchvision",
    "tests/test_pipeline.py::test_batched",
    "tests/test_pipeline.py::test_unbatched",
    "tests/test_security.py::TestEnforceSecurity::test_safe_urls_still_work_when_security_enabled",
]

ALIAS = "from libshard.webdataset import as_webdataset; as_webdataset()\n"
IMAGEIO_V3 = '''def imread(uri, **kw):
    import numpy, PIL.Image
    return numpy.asarray(PIL.Image.open(uri))
'''


def environment(work, against, build):
    """PYTHONPATH for the run: the alias (or the copy's source), the stand-ins."""
    env = dict(os.environ)
    site = work / "site"
    site.mkdir()
    paths = [str(site)]
    if against == "libshard":
        (site / "webdataset.py").write_text(ALIAS)
        paths.append(str((REPO / build / "python").resolve()))
    else:
        paths.append(str(work / "src"))
    try:
        import imageio.v3  # noqa: F401
    except ImportError:
        (site / "imageio").mkdir()
        (site / "imageio" / "__init__.py").write_text("")
        (site / "imageio" / "v3.py").write_text(IMAGEIO_V3)
    env["PYTHONPATH"] = os.pathsep.join(paths + [p for p in [env.get("PYTHONPATH")] if p])
    return env


def preflight(work, env, against):
    """webdataset.__file__: libshard's, or the copy's."""
    where = subprocess.run([sys.executable, "-c", "import webdataset; print(webdataset.__file__)"],
                           cwd=work, env=env, capture_output=True, text=True)
    if where.returncode:
        raise SystemExit(f"wds-suite: `import webdataset` failed:\n{where.stderr}")
    path = where.stdout.strip()
    want = "libshard" if against == "libshard" else str(work / "src")
    if want not in path:
        raise SystemExit(f"wds-suite: webdataset is {path}, not {against}'s")
    print(f"wds-suite: webdataset is {path}")


def per_file(junit):
    """{file: [passed, failed]} from pytest's JUnit XML."""
    counts = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = case.get("classname", "").split(".")[1] if "." in case.get("classname", "") else "?"
        c = counts.setdefault(name, [0, 0])
        bad = case.find("failure") is not None or case.find("error") is not None
        if case.find("skipped") is None:
            c[1 if bad else 0] += 1
    return counts


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("webdataset", help="a copy of WebDataset's repository at " + COMMIT)
    ap.add_argument("--build", default="build", help="libshard's build folder")
    ap.add_argument("--against", choices=["libshard", "webdataset"], default="libshard")
    ap.add_argument("--timeout", type=int, default=900)
    a = ap.parse_args()
    src = Path(a.webdataset)
    if not (src / "tests").is_dir() or not (src / "testdata" / "imagenet-extra.json").exists():
        raise SystemExit(f"wds-suite: {src} holds no tests/ and testdata/ of WebDataset")
    if (src / ".git").exists():
        head = subprocess.run(["git", "-C", str(src), "rev-parse", "--short=7", "HEAD"],
                              capture_output=True, text=True).stdout.strip()
        if head != COMMIT:
            print(f"wds-suite: warning: {src} is at {head}, the suite was counted at {COMMIT}")
    with tempfile.TemporaryDirectory(prefix="wds-suite-") as tmp:
        work = Path(tmp)
        for part in ("tests", "testdata") + (("src",) if a.against == "webdataset" else ()):
            shutil.copytree(src / part, work / part)
        if not (work / "testdata" / "imagenet-000000.tgz").exists():
            subprocess.run([sys.executable, str(Path(__file__).with_name("make_testdata.py")),
                            str(work / "testdata")], check=True)
        env = environment(work, a.against, a.build)
        preflight(work, env, a.against)
        junit = work / "junit.xml"
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfE",
               f"--junitxml={junit}", "tests"] + [f"--deselect={t}" for t in DESELECTED]
        try:
            rc = subprocess.run(cmd, cwd=work, env=env, timeout=a.timeout).returncode
        except subprocess.TimeoutExpired:
            raise SystemExit(f"wds-suite: the suite ran past {a.timeout} s")
        if junit.exists():
            counts = per_file(junit)
            for name in sorted(counts):
                print(f"wds-suite: {name:16s} {counts[name][0]:4d} passed {counts[name][1]:4d} failed")
            passed = sum(c[0] for c in counts.values())
            failed = sum(c[1] for c in counts.values())
            print(f"wds-suite: WebDataset {COMMIT}'s tests on {a.against}: {passed} passed, "
                  f"{failed} failed, {len(DESELECTED)} deselected (outside hosts)")
    return rc


if __name__ == "__main__":
    sys.exit(main())
