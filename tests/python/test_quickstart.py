"""The README's quick start, as written, on real photographs: 2,000 ImageNet-sized JPEGs made
from the photographs of Debian's python3-skimage (scripts/test-photos.sh), packed by the
README's shardpack line, read by the README's training loop (its shuffle=5000) with 0, 2 and
4 DataLoader workers: every configuration delivers its two epochs of batches. The control:
the photographs weigh more than the 256 MiB memory_budget that once bounded the shuffle
buffer, so the loop as written would have stopped."""
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import SLOW, _PYPATH, end_to_end

REPO = Path(__file__).resolve().parents[2]
PHOTOS = REPO / "tests" / ".photos" / "usr" / "lib" / "python3" / "dist-packages" / "skimage" / "data"
N, CLASSES = 2000, 10


def quickstart_block():
    """The README's Python block after "a training loop on them"."""
    text = (REPO / "README.md").read_text()
    start = text.index("and a training loop on them:")
    m = re.search(r"<!-- readme: python -->\n\n((?:    .*\n|\n)+?)\n(?=\S)", text[start:])
    return "\n".join(l[4:] for l in m.group(1).splitlines())


@pytest.fixture(scope="module")
def photos(tmp_path_factory, shardpack):
    """(folder of shards/train.json, bytes of the JPEGs)."""
    np = pytest.importorskip("numpy")
    from PIL import Image
    names = ["astronaut.png", "chelsea.png", "coffee.png", "motorcycle_left.png", "rocket.jpg",
             "hubble_deep_field.jpg", "retina.jpg"]
    if not all((PHOTOS / n).exists() for n in names):
        pytest.skip("the photographs are not there: bash scripts/test-photos.sh")
    sources = [Image.open(PHOTOS / n).convert("RGB") for n in names]
    root = tmp_path_factory.mktemp("quickstart")
    r, rng = random.Random(0), np.random.default_rng(0)
    total = 0
    for i in range(N):
        s = sources[i % len(sources)]
        w, h = s.size
        f = r.uniform(0.6, 1.0)
        cw, ch = int(w * f), int(h * f)
        x, y = r.randrange(w - cw + 1), r.randrange(h - ch + 1)
        img = s.crop((x, y, x + cw, y + ch)).resize((640, 480))
        grain = rng.integers(-10, 11, (480, 640, 3), dtype=np.int16)
        img = Image.fromarray(np.clip(np.asarray(img).astype(np.int16) + grain, 0, 255)
                              .astype(np.uint8))
        path = root / "imagenet" / "train" / f"n{i % CLASSES:08d}" / f"img_{i:05d}.jpg"
        path.parent.mkdir(parents=True, exist_ok=True)
        img.save(path, quality=95)
        total += path.stat().st_size
    # the README's line, ~/imagenet/train being this folder's
    line = next(l.strip() for l in (REPO / "README.md").read_text().splitlines()
                if l.strip().startswith("shardpack ~/imagenet/train"))
    subprocess.run(["bash", "-c", line.replace("~/imagenet/train", "imagenet/train")],
                   cwd=root, check=True, timeout=600, env={"PATH": f"{Path(shardpack).parent}:/usr/bin:/bin"})
    return root, total


@end_to_end
@pytest.mark.parametrize("workers", [0, 2, 4])
def test_the_readme_quick_start_runs_on_photographs(photos, workers):
    root, total = photos
    assert total > 256 << 20, f"the control: {total} bytes would have fit the old budget"
    code = quickstart_block()
    assert "shuffle=5000" in code and "num_workers=4" in code, code
    code = code.replace("num_workers=4", f"num_workers={workers}")
    code = code.replace("for images, labels in loader:", "for images, labels in counted(loader):")
    prelude = ("seen = []\n"
               "def counted(batches):\n"
               "    for images, labels in batches:\n"
               "        seen.append(len(labels))\n"
               "        yield images, labels\n")
    script = prelude + code + "\nprint('DELIVERED', sum(seen), len(seen))\n"
    cp = subprocess.run([sys.executable, "-c", script], cwd=root, capture_output=True, text=True,
                        timeout=900 * SLOW, env={"PYTHONPATH": str(_PYPATH), "PATH": "/usr/bin:/bin",
                                                  "OMP_NUM_THREADS": "1"})
    assert cp.returncode == 0, cp.stderr[-3000:]
    samples, batches = map(int, re.search(r"DELIVERED (\d+) (\d+)", cp.stdout).groups())
    assert samples == 2 * N, (samples, batches)  # two epochs, every sample, exact on one rank
