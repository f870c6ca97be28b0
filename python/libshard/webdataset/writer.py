"""Writing as WebDataset writes: libshard's writers (libshard.writer), ShardWriter with
WebDataset's default of a line per finished shard."""
from ..writer import ShardWriter as _ShardWriter
from ..writer import TarWriter

__all__ = ["ShardWriter", "TarWriter"]


class ShardWriter(_ShardWriter):
    """libshard.ShardWriter with WebDataset's default verbose=1 (a line per finished shard)."""

    def __init__(self, pattern, maxcount=100000, maxsize=3e9, post=None, start_shard=0, verbose=1, **kw):
        super().__init__(pattern, maxcount, maxsize, post, start_shard, verbose, **kw)
