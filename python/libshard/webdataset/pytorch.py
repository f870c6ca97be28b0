"""torch's IterableDataset, DataLoader and Tensor, or empty stand-ins where torch is not
installed (the pipelines then run without it, as WebDataset's do)."""
try:
    from torch.utils.data import DataLoader, IterableDataset, get_worker_info
except ModuleNotFoundError:
    def get_worker_info():
        """None: without torch no DataLoader worker runs."""
        return None

    class IterableDataset:
        """Stands in for torch's IterableDataset without torch."""

    class DataLoader:
        """Stands in for torch's DataLoader without torch."""

try:
    from torch import Tensor as TorchTensor
except ModuleNotFoundError:
    class TorchTensor:
        """Stands in for torch.Tensor without torch."""

__all__ = ["DataLoader", "IterableDataset", "TorchTensor", "get_worker_info"]
