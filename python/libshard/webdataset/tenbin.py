"""WebDataset's name for libshard.tenbin (the .ten format): the same module object, so that
`webdataset.tenbin.encode_buffer` and `libshard.tenbin.encode_buffer` are one function."""
import sys

from .. import tenbin

sys.modules[__name__] = tenbin
