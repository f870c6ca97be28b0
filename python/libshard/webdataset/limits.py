"""The limits libshard.webdataset reads shards and decodes images under, as every other entry
point of libshard does (docs/reliability.md): a hostile or damaged shard (a sparse member
that declares gigabytes, a zstd bomb, a sample of huge members) is refused before its bytes
are held, naming the limit and how to raise it, instead of filling the memory.

    max_member_size    a member's declared size              default 256 MiB (the library's)
    max_sample_size    a sample's members added up (consecutive
                       members of one key, WebDataset's grouping) default 64 MiB
    max_decode_memory  what decoding one image may take        default 512 MiB (the library's)

WebDataset holds each sample whole in Python, so a sample is bounded tighter than a
member: a refused shard costs at most max_sample_size of memory. Each is a keyword of
WebDataset(...), tarfile_to_samples(...), tar_file_expander(...) and tar_file_iterator(...)
(max_decode_memory: of .decode(...) and Decoder(...)), and an environment variable
(LIBSHARD_MAX_MEMBER_SIZE, LIBSHARD_MAX_SAMPLE_SIZE, LIBSHARD_MAX_DECODE_MEMORY: bytes, or
with a K, M or G suffix, powers of 1024), the keyword first."""
import os
import re

from ..settings import DEFAULTS

#: name: (default, environment variable)
LIMITS = {
    "max_member_size": (256 << 20, "LIBSHARD_MAX_MEMBER_SIZE"),
    "max_sample_size": (64 << 20, "LIBSHARD_MAX_SAMPLE_SIZE"),
    "max_decode_memory": (DEFAULTS["max_decode_memory"], "LIBSHARD_MAX_DECODE_MEMORY"),
}
LARGEST = 1 << 62
_SUFFIX = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def _parse(name, text, where):
    m = re.fullmatch(r"\s*(\d+)\s*([KMG]?)(?:i?B)?\s*", str(text), re.IGNORECASE)
    value = int(m.group(1)) * _SUFFIX[m.group(2).upper()] if m else 0
    if not 1 <= value <= LARGEST:
        raise ValueError(f"{where}={text!r}: {name} in bytes (or with K, M, G), from 1 to 2**62")
    return value


def limit(name, given=None):
    """The limit name: given (a keyword's value) when not None, else its environment
    variable, else the default."""
    default, variable = LIMITS[name]
    if given is not None:
        if isinstance(given, bool) or not isinstance(given, int):
            raise TypeError(f"{name}: an int (bytes), not {type(given).__name__}")
        return _parse(name, given, name)
    text = os.environ.get(variable, "").strip()
    return _parse(name, text, variable) if text else default


def resolved(**given):
    """{name: limit} for the member and sample limits, given (keywords, None: not given)."""
    return {n: limit(n, given.get(n)) for n in ("max_member_size", "max_sample_size")}


def how_to_raise(name):
    """The words a refusal ends with: the keyword and the variable that raise the limit."""
    variable = LIMITS[name][1]
    where = ("WebDataset(..., {0}=N) or tarfile_to_samples(..., {0}=N)" if name != "max_decode_memory"
             else ".decode(..., {0}=N)").format(name)
    return f"raise it with {where} or the environment variable {variable}"


def explained(text):
    """A refusal's text with how to raise the limit it names, "(max_...)", added."""
    for name in LIMITS:
        if f"({name})" in text:
            return f"{text}; {how_to_raise(name)}"
    return text
