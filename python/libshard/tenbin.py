"""Tensor binary (.ten), WebDataset's format for lists of arrays: each array a header (its
dtype, an info string, its shape, as int64s) and its bytes, each in a chunk of its own: the
magic "~TenBin~", the length as an int64, the bytes padded to a multiple of 64. Read and
written here in the machine's byte order, as WebDataset does."""
import struct
import sys

import numpy as np

_SHORT = {"float16": "f2", "float32": "f4", "float64": "f8", "int8": "i1", "int16": "i2",
          "int32": "i4", "int64": "i8", "uint8": "u1", "uint16": "u2", "uint32": "u4",
          "uint64": "u8"}
_LONG = {v: k for k, v in _SHORT.items()}
MAGIC = b"~TenBin~"
_ALIGN = 64


def bytelen(a):
    """The bytes of an array or a bytes-like object."""
    if hasattr(a, "nbytes"):
        return a.nbytes
    if isinstance(a, (bytes, bytearray)):
        return len(a)
    raise ValueError(a, "cannot determine nbytes")


def bytedata(a):
    """The bytes of an array or a bytes-like object, without a copy where it can."""
    if isinstance(a, (bytes, bytearray, memoryview)):
        return a
    if hasattr(a, "data"):
        return a.data
    raise ValueError(a, "cannot return bytedata")


def str64(s):
    """A string of at most 8 ASCII characters as an int64 (zero-padded)."""
    return struct.unpack("@q", (s + "\0" * (8 - len(s))).encode("ascii"))[0]


def unstr64(i):
    """str64 undone."""
    return struct.pack("@q", i).decode("ascii").strip("\0")


def check_acceptable_input_type(data, allow64):
    """Refuses arrays of a dtype the format has no name for (and 64-bit ones unless
    allow64)."""
    for a in data:
        if a.dtype.name not in _SHORT:
            raise ValueError("unsupported dataypte")
        if not allow64 and a.dtype.name in ("float64", "int64", "uint64"):
            raise ValueError("64 bit datatypes not allowed unless explicitly enabled")


def encode_header(a, info=""):
    """An array's header: its dtype, info, rank and shape as int64s."""
    if a.ndim >= 10:
        raise ValueError("too many dimensions")
    if a.nbytes != np.prod(a.shape) * a.itemsize:
        raise ValueError("mismatch between size and shape")
    if a.dtype.name not in _SHORT:
        raise ValueError("unsupported array type")
    words = [str64(_SHORT[a.dtype.name]), str64(info), len(a.shape), *a.shape]
    return bytedata(np.array(words, dtype="i8"))


def decode_header(h):
    """(shape, dtype, info) of a header."""
    h = np.frombuffer(h, dtype="i8")
    name = unstr64(h[0])
    if name not in _LONG:
        raise ValueError("unsupported array type")
    rank = int(h[2])
    return tuple(int(x) for x in h[3:3 + rank]), np.dtype(_LONG[name]), unstr64(h[1])


def encode_list(arrays, infos=None):
    """[header, data, header, data, ...] for the arrays (infos: one info string each, or
    one for all)."""
    if infos is None:
        infos = [""]
    elif len(arrays) != len(infos):
        raise ValueError(f"length of list {arrays} must match length of infos {infos}")
    out = []
    for i, a in enumerate(arrays):
        out += [encode_header(a, infos[i % len(infos)]), bytedata(a)]
    return out


def check_infos(data, infos, required_infos=None):
    """data, or (data, infos) when required_infos is True."""
    if required_infos is False or required_infos is None:
        return data
    if required_infos is True:
        return data, infos
    if not isinstance(required_infos, (tuple, list)):
        raise ValueError("required_infos must be tuple or list")
    for required, actual in zip(required_infos, infos):
        if required != actual:
            raise ValueError(f"actual info {actual} doesn't match required info {required}")
    return data


def decode_list(chunks, infos=False):
    """The arrays of [header, data, ...] (views of the data, not copies)."""
    arrays, found = [], []
    for header, data in zip(chunks[::2], chunks[1::2]):
        shape, dtype, info = decode_header(header)
        arrays.append(np.frombuffer(data, dtype=dtype, count=int(np.prod(shape))).reshape(*shape))
        found.append(info)
    return check_infos(arrays, found, infos)


def roundup(n, k=_ALIGN):
    """n rounded up to a multiple of k."""
    return k * ((n + k - 1) // k)


def encode_chunks(chunks):
    """The chunks as one buffer: magic, length, bytes, padding, each."""
    out = bytearray(sum(16 + roundup(bytelen(b)) for b in chunks))
    at = 0
    for b in chunks:
        n = bytelen(b)
        out[at:at + 8] = MAGIC
        out[at + 8:at + 16] = struct.pack("@q", n)
        out[at + 16:at + 16 + n] = bytes(bytedata(b)) if not isinstance(b, (bytes, bytearray)) else b
        at += 16 + roundup(n)
    return out


def decode_chunks(buf):
    """The chunks of a buffer."""
    out, at, total = [], 0, bytelen(buf)
    while at < total:
        if bytes(buf[at:at + 8]) != MAGIC:
            raise ValueError("magic bytes mismatch")
        n = struct.unpack("@q", bytes(buf[at + 8:at + 16]))[0]
        if n < 0 or at + 16 + n > total:
            raise ValueError(f"a chunk of {n} bytes at offset {at}: past the end of {total}")
        out.append(buf[at + 16:at + 16 + n])
        at += 16 + roundup(n)
    return out


def encode_buffer(arrays, infos=None):
    """A list of arrays as one .ten buffer."""
    if not isinstance(arrays, list):
        raise ValueError("requires list")
    return encode_chunks(encode_list(arrays, infos=infos))


def decode_buffer(buf, infos=False):
    """The list of arrays of a .ten buffer."""
    return decode_list(decode_chunks(buf), infos=infos)


def write_chunk(stream, buf):
    """One chunk onto a binary stream."""
    n = bytelen(buf)
    stream.write(MAGIC)
    stream.write(struct.pack("@q", n))
    stream.write(bytedata(buf))
    if roundup(n) > n:
        stream.write(b"\0" * (roundup(n) - n))


def read_chunk(stream):
    """The next chunk of a binary stream, or None at its end."""
    magic = stream.read(8)
    if magic == b"":
        return None
    if magic != MAGIC:
        raise ValueError("magic number does not match")
    n = struct.unpack("@q", stream.read(8))[0]
    if n < 0:
        raise ValueError("negative nbytes")
    data = stream.read(n)
    if roundup(n) > n:
        stream.read(roundup(n) - n)
    return data


def write(stream, arrays, infos=None):
    """The arrays onto a binary stream, chunk by chunk."""
    for chunk in encode_list(arrays, infos=infos):
        write_chunk(stream, chunk)


def read(stream, n=sys.maxsize, infos=False):
    """At most n arrays from a binary stream."""
    chunks = []
    for _ in range(n):
        header = read_chunk(stream)
        if header is None:
            break
        data = read_chunk(stream)
        if data is None:
            raise ValueError("premature EOF")
        chunks += [header, data]
    return decode_list(chunks, infos=infos)


def save(fname, *args, infos=None, nocheck=False):
    """The arrays into the file fname (named .ten unless nocheck)."""
    if not nocheck and not fname.endswith(".ten"):
        raise ValueError("file name should end in .ten")
    with open(fname, "wb") as stream:
        write(stream, args, infos=infos)


def load(fname, infos=False, nocheck=False):
    """The arrays of the file fname (named .ten unless nocheck)."""
    if not nocheck and not fname.endswith(".ten"):
        raise ValueError("file name should end in .ten")
    with open(fname, "rb") as stream:
        return read(stream, infos=infos)
