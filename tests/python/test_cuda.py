"""ShardDataset(device="cuda") on a real GPU: batches arrive on the device, equal to the CPU
path's, labels included (skipped, saying so, where torch sees no CUDA device); with
DataLoader workers, a clear refusal."""
import pytest

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader  # noqa: E402

from libshard.torch import ShardDataset  # noqa: E402

from .conftest import NSAMPLES, within  # noqa: E402

needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(),
                               reason="no CUDA device here (torch.cuda.is_available() is False)")


@needs_gpu
@pytest.mark.parametrize("dtype", ["uint8", "float32"])
def test_cuda_batches_equal_the_cpu_ones(packed, dtype):
    kw = dict(seed=3, shuffle=50, batch_size=32, image_size=64, flip=True, dtype=dtype)

    def epoch(device):
        out = []
        for x, y in DataLoader(ShardDataset(str(packed.manifest), device=device, **kw),
                               batch_size=None, num_workers=0):
            out.append((x.device.type, x.cpu().clone(), y.device.type, y.cpu().clone()))
        return out

    gpu = within(60, lambda: epoch("cuda"), "a CUDA epoch")
    cpu = within(60, lambda: epoch("cpu"), "a CPU epoch")
    assert sum(len(y) for _, _, _, y in gpu) == NSAMPLES
    assert len(gpu) == len(cpu)
    for (dx, x, dy, y), (_, cx, _, cy) in zip(gpu, cpu):
        assert dx == dy == "cuda"
        assert torch.equal(x, cx) and torch.equal(y, cy)


def test_cuda_with_workers_says_how(packed):
    """Refused in the worker before any CUDA call: runs without a GPU too."""
    ds = ShardDataset(str(packed.manifest), device="cuda", seed=0, batch_size=32, image_size=32)
    dl = DataLoader(ds, batch_size=None, num_workers=1)
    with pytest.raises(RuntimeError, match="num_workers=0"):
        within(120, lambda: next(iter(dl)), "a worker start")
