"""The tensor files of a PaddlePaddle model saved with ``save_persistables`` (one file per tensor), read as NumPy
arrays without Paddle and without unpickling anything.

A file is: uint32 version (0); uint64 count of LoD levels, each a uint64 byte size and that many bytes; uint32
tensor version (0); int32 size of a ``TensorDesc`` protocol buffer (field 1: data type, 5 = float32; field 2: the
dims, int64, packed or not), the buffer itself, and the raw little-endian data. Only float32 tensors are read
(what the jieba package's LAC model holds). Every size is checked against the file's before anything is allocated;
a file that breaks the format is a one-line :class:`~seqlab.errors.SeqlabError` naming it.
"""

from __future__ import annotations

import math
import struct
from pathlib import Path

import numpy as np

from seqlab.errors import SeqlabError

FLOAT32 = 5  # paddle VarType.FP32
MAX_DESC_BYTES = 4096  # a TensorDesc of a handful of dims is a few dozen bytes
MAX_DIMS = 8


def _varint(buf: bytes, at: int, path: Path) -> tuple[int, int]:
    """The protocol-buffer varint at ``buf[at:]`` and the offset after it."""
    value = shift = 0
    while True:
        if at >= len(buf) or shift > 63:
            raise SeqlabError("bad tensor description (truncated number)", path=path)
        byte = buf[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, at


def _description(desc: bytes, path: Path) -> tuple[int, list[int]]:
    """A ``TensorDesc``'s (data type, dims)."""
    dtype, dims, at = None, [], 0
    while at < len(desc):
        tag, at = _varint(desc, at, path)
        field, wire = tag >> 3, tag & 7
        if wire == 0:
            value, at = _varint(desc, at, path)
            if field == 1:
                dtype = value
            elif field == 2:
                dims.append(value)
        elif wire == 2:  # packed dims
            size, at = _varint(desc, at, path)
            end = at + size
            if end > len(desc):
                raise SeqlabError("bad tensor description (truncated field)", path=path)
            while at < end:
                value, at = _varint(desc, at, path)
                if field == 2:
                    dims.append(value)
        else:
            raise SeqlabError(f"bad tensor description (wire type {wire})", path=path)
        if len(dims) > MAX_DIMS:
            raise SeqlabError(f"bad tensor description (more than {MAX_DIMS} dims)", path=path)
    if dtype is None or not dims:
        raise SeqlabError("bad tensor description (no data type or dims)", path=path)
    return dtype, dims


def read_paddle_tensor(path: str | Path) -> np.ndarray:
    """The float32 tensor in ``path``, shaped as its description says (a read-only array over the file's bytes)."""
    path = Path(path)
    try:
        buf = path.read_bytes()
    except OSError as err:
        raise SeqlabError(f"cannot read: {err.strerror or err}", path=path) from None
    try:
        version, levels = struct.unpack_from("<IQ", buf, 0)
        at = 12
        if version != 0 or levels > 8:
            raise SeqlabError(f"not a Paddle tensor file (version {version}, {levels} LoD levels)", path=path)
        for _ in range(levels):
            (size,) = struct.unpack_from("<Q", buf, at)
            at += 8 + size
        tensor_version, desc_size = struct.unpack_from("<Ii", buf, at)
        at += 8
    except struct.error:
        raise SeqlabError("not a Paddle tensor file (truncated header)", path=path) from None
    if tensor_version != 0 or not 0 < desc_size <= MAX_DESC_BYTES or at + desc_size > len(buf):
        raise SeqlabError("not a Paddle tensor file (bad tensor header)", path=path)
    dtype, dims = _description(buf[at : at + desc_size], path)
    at += desc_size
    if dtype != FLOAT32:
        raise SeqlabError(f"tensor of data type {dtype}; only float32 ({FLOAT32}) is read", path=path)
    count = math.prod(dims)
    if count * 4 != len(buf) - at:
        raise SeqlabError(f"dims {dims} need {count * 4} bytes of data, the file has {len(buf) - at}", path=path)
    return np.frombuffer(buf, dtype="<f4", offset=at).reshape(dims)
