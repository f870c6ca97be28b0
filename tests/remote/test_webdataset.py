"""libshard.webdataset over http://, gs:// and s3://: WebDataset's pipelines read remote
shards through libshard's sources (gopen -> RawStream: retries, credentials from the
environment), giving the samples and the order the same shards give locally; a missing
object is WebDataset's IOError. Run in a process of their own, with only the test's
credentials in its environment."""
import json
import os
import subprocess
import sys

import pytest

from conftest import BUCKET, CLEAN_ENV, REPO, TIMEOUT, gcs_env, s3_env

PATTERN = "d-{000..002}.tar"

CODE = """
import json, sys, warnings
warnings.simplefilter("ignore")
import libshard.webdataset as wds
url = sys.argv[1]
ds = wds.WebDataset(url, shardshuffle=False).to_tuple("__key__", "cls")
print(json.dumps([[k, c.decode()] for k, c in ds]))
pipe = wds.DataPipeline(wds.SimpleShardList(url), wds.tarfile_to_samples(), wds.to_tuple("__url__"))
print(json.dumps(sorted({u for u, in pipe})))
try:
    list(wds.WebDataset(url.replace("d-{000..002}", "missing"), shardshuffle=False))
    print("no error")
except IOError as e:
    print("IOError", type(e).__name__)
"""


def keys_of(url, env):
    path = os.environ.get("LIBSHARD_PYTHONPATH", str(REPO / "build" / "python"))
    cp = subprocess.run([sys.executable, "-c", CODE, url], capture_output=True, text=True,
                        env={**CLEAN_ENV, **env, "PYTHONPATH": path}, timeout=TIMEOUT)
    assert cp.returncode == 0, cp.stderr
    samples, urls, missing = cp.stdout.strip().split("\n")
    return json.loads(samples), json.loads(urls), missing


def served(request, nginx, scheme):
    """(the data folder's URL, the environment its credentials take) on scheme's server."""
    if scheme == "http":
        return f"{nginx.url}/data", {}
    if scheme == "gs":
        return f"gs://{BUCKET}/data", gcs_env(request.getfixturevalue("gcs"))
    return f"s3://{BUCKET}/data", s3_env(request.getfixturevalue("s3"))


@pytest.fixture(scope="module")
def local(root):
    return keys_of(str(root / "data" / PATTERN), {})


@pytest.mark.parametrize("scheme", ["http", "gs", "s3"])
def test_remote_shards_give_the_local_samples_in_the_local_order(request, local, nginx, scheme):
    base, env = served(request, nginx, scheme)
    samples, urls, missing = keys_of(f"{base}/{PATTERN}", env)
    assert len(samples) == 120 and samples == local[0]
    assert urls == [f"{base}/d-{i:03d}.tar" for i in range(3)], "each sample's __url__"
    assert missing.startswith("IOError"), missing


def test_wrong_credentials_are_an_error_not_a_silent_empty_epoch(s3):
    samples = subprocess.run(
        [sys.executable, "-c", CODE, f"s3://{BUCKET}/data/{PATTERN}"], capture_output=True,
        text=True, timeout=TIMEOUT,
        env={**CLEAN_ENV, **s3_env(s3, secret="WRONG"),
             "PYTHONPATH": os.environ.get("LIBSHARD_PYTHONPATH", str(REPO / "build" / "python"))})
    assert samples.returncode != 0 and "d-000.tar" in samples.stderr, samples.stderr[-500:]


C_CODE = """
import json, sys, warnings
warnings.simplefilter("ignore")
import torch
import libshard.webdataset as wds
from libshard.webdataset import tariterators
urls, workers, cache = sys.argv[1], int(sys.argv[2]), sys.argv[3]
remote = {"cache_dir": cache} if cache else {}
opener = wds.filters.pipelinefilter(tariterators.url_opener)(**remote)
expand = wds.filters.pipelinefilter(tariterators.tar_file_expander)()
pipe = wds.DataPipeline(wds.SimpleShardList(urls), wds.split_by_worker, opener, expand,
                        wds.filters.pipelinefilter(tariterators.group_by_keys)(),
                        wds.decode("rgb8"), wds.to_tuple("__key__", "cls", "jpg"))
fluid = wds.WebDataset(urls, shardshuffle=False).decode("rgb8").to_tuple("__key__", "cls", "jpg")
out = []
for p in (pipe, fluid):
    loader = torch.utils.data.DataLoader(p, num_workers=workers, batch_size=None)
    out += [sorted((k, c, int(j.sum())) for k, c, j in loader), p.stats()]
print(json.dumps(out))
"""


def c_stage(urls, workers, env, cache=""):
    path = os.environ.get("LIBSHARD_PYTHONPATH", str(REPO / "build" / "python"))
    cp = subprocess.run([sys.executable, "-c", C_CODE, urls, str(workers), cache],
                        capture_output=True, text=True, timeout=TIMEOUT,
                        env={**CLEAN_ENV, **env, "PYTHONPATH": path})
    assert cp.returncode == 0, cp.stderr[-2000:]
    got, stats, fluid, fluid_stats = json.loads(cp.stdout)
    assert fluid == got, "the fluid WebDataset: the DataPipeline's samples"
    assert fluid_stats == stats, "and the same work, in C or in Python"
    return got, stats


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("scheme", ["http", "gs", "s3"])
def test_the_tar_stage_reads_remote_shards_in_c(request, root, nginx, scheme, workers, tmp_path):
    """url_opener, tar_file_expander, group_by_keys and decode (a DataPipeline, and the fluid
    WebDataset) over http, gs and s3, with 0 and 2 workers: the local samples and pixels,
    libshard's reader and decoder doing the work, the shards through the remote's cache;
    pipe:curl (Python's tarfile) the negative control."""
    local, lstats = c_stage(str(root / "data" / PATTERN), workers, {})
    base, env = served(request, nginx, scheme)
    cache = tmp_path / "cache"
    cache.mkdir()
    got, stats = c_stage(f"{base}/{PATTERN}", workers, env, str(cache))
    assert got == local and len(got) == 120
    assert stats == lstats and stats["shards_c"] == 3 and stats["members_c"] == 360
    assert stats["members_python"] == 0 and stats["decodes_c"] == 120
    assert sum(f.stat().st_size for f in cache.rglob("*") if f.is_file()) >= sum(
        (root / "data" / f"d-00{i}.tar").stat().st_size for i in range(3)), "cached"
    if scheme == "http":
        piped, pstats = c_stage(f"pipe:curl -s -f {base}/{PATTERN}", workers, env)
        assert piped == local
        assert pstats["members_c"] == 0 and pstats["members_python"] == 360
