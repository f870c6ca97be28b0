"""The demo's training (scripts/demo.sh: examples/make_images.py, shardpack, examples/train.py)
shows a model learning: its loss over the last steps is below its loss over the first, on
the generated classes (each its own background hue)."""
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import SLOW, _PYPATH, end_to_end

REPO = Path(__file__).resolve().parents[2]


@end_to_end
def test_the_demos_loss_falls(tmp_path, shardpack):
    subprocess.run([sys.executable, str(REPO / "examples" / "make_images.py"),
                    str(tmp_path / "images"), "--classes", "4", "--per-class", "60"],
                   check=True, capture_output=True, timeout=120)
    subprocess.run([str(shardpack), str(tmp_path / "images"), "-o",
                    str(tmp_path / "shards" / "demo-%06d.tar"), "--maxcount", "100", "-q"],
                   check=True, timeout=120)
    cp = subprocess.run([sys.executable, str(REPO / "examples" / "train.py"),
                         str(tmp_path / "shards" / "demo.json"), "--steps", "10", "--epochs", "2",
                         "--image-size", "64"], capture_output=True, text=True,
                        timeout=300 * SLOW, env={"PYTHONPATH": str(_PYPATH), "PATH": "/usr/bin:/bin",
                                                  "OMP_NUM_THREADS": "2"})
    assert cp.returncode == 0, cp.stderr[-2000:]
    steps = [float(x) for x in re.findall(r"step \d+: loss ([\d.]+)", cp.stdout)]
    assert len(steps) == 10, cp.stdout
    m = re.search(r"loss: ([\d.]+) over the first \d+ steps, ([\d.]+) over the last", cp.stdout)
    assert m and float(m.group(2)) < float(m.group(1)), cp.stdout
