"""Open an input file as bytes, looking through .gz and .zst, so that a cut or corrupt file raises instead of
ending quietly."""
from __future__ import annotations

import gzip
import io
from pathlib import Path

import zstandard


class ZstdFrames(io.RawIOBase):
    """The decompressed bytes of every frame of a .zst file. zstandard's stream_reader ends quietly where a cut
    file ends (its last, partial block dropped), so the rest of the file vanished unrecorded; this raises
    EOFError for a file that ends inside a frame, and ZstdError with the offset for corrupt data."""

    def __init__(self, path: Path):
        self._file = open(path, "rb")
        self._frame = None  # the current frame's decompressor; None between frames
        self._out, self._at = b"", 0

    def readable(self) -> bool:
        return True

    def readinto(self, buf) -> int:
        while self._at >= len(self._out):
            if not self._fill():
                return 0
        n = min(len(buf), len(self._out) - self._at)
        buf[:n] = self._out[self._at:self._at + n]
        self._at += n
        return n

    def _fill(self) -> bool:
        block = self._file.read(1 << 16)
        if not block:
            if self._frame is not None:
                raise EOFError(f"the file ends inside a zstd frame at byte {self._file.tell()}: it was cut short")
            return False
        out = []
        while block:
            self._frame = self._frame or zstandard.ZstdDecompressor().decompressobj()
            try:
                out.append(self._frame.decompress(block))
            except zstandard.ZstdError as e:
                raise zstandard.ZstdError(f"{e} (compressed bytes up to {self._file.tell()})") from None
            if not self._frame.eof:
                break
            block, self._frame = self._frame.unused_data, None  # a next frame (concatenated files) follows
        self._out, self._at = b"".join(out), 0
        return True

    def close(self) -> None:
        self._file.close()
        super().close()


def open_binary(path: Path):
    name = path.name.lower()
    if name.endswith(".gz"):
        return gzip.open(path, "rb")
    if name.endswith(".zst"):
        return io.BufferedReader(ZstdFrames(path), buffer_size=1 << 16)
    return open(path, "rb")

