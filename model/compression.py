"""Body compression: the producer compresses a large body, the consumer's decoder uncompresses it.

Theory of operation
-------------------
RocketMQ 4.9.8 (``javap -c`` of its client and common jars):

- ``DefaultMQProducerImpl.sendKernelImpl`` → ``tryToCompressMessage``: a message that is not a batch
  (``MessageBatch``) and whose body is at least ``compressMsgBodyOverHowmuch`` (4096) bytes long is
  compressed with the producer's compressor (``rocketmq.message.compressType``, ZLIB by default, at
  ``rocketmq.message.compressLevel``, 5). The request's sysFlag gets ``COMPRESSED_FLAG`` and the type's
  bits (``CompressionType.getCompressionFlag``: LZ4 0x100, ZSTD 0x200, ZLIB 0x300). The client's own
  ``Message`` keeps its body (it is put back after the send).
- The broker stores body and sysFlag as sent; the copies it makes (a send-back's retry copy, a fired
  schedule copy, a committed half) carry both.
- ``MessageDecoder.decode`` on the client uncompresses a COMPRESSED body by the type bits
  (``CompressionType.findByValue``: 0 — a client older than the types — and 3 are ZLIB, 1 LZ4, 2 ZSTD);
  the sysFlag keeps its bits.

ZLIB is ``java.util.zip.Deflater(level)`` through a ``DeflaterOutputStream``: the zlib format, which
Python's ``zlib`` writes byte for byte the same (``tests/interop/test_consume_timeout_real.py`` compares a
body the 4.9.8 client compressed with ours). LZ4 and ZSTD are named only: uncompressing such a body
raises ``UnsupportedCompression`` (no library on this project's list implements them), the reference
producer never writes them.
"""

from __future__ import annotations

import zlib

import attrs

from rmqspec.model.message import COMPRESSED_FLAG, COMPRESSION_TYPE_MASK, StoredMessage

COMPRESS_OVER = 4096  # compressMsgBodyOverHowmuch
COMPRESS_LEVEL = 5  # rocketmq.message.compressLevel
ZLIB_FLAG = 0x300  # the only type the model writes (LZ4 0x100 and ZSTD 0x200 are read as refused)
_TYPE_NAMES = {0: "ZLIB", 1: "LZ4", 2: "ZSTD", 3: "ZLIB"}


class UnsupportedCompression(ValueError):
    """A COMPRESSED body of a type the model cannot uncompress (LZ4, ZSTD)."""


def compress(body: bytes, sys_flag: int, *, over: int = COMPRESS_OVER, level: int = COMPRESS_LEVEL
             ) -> tuple[bytes, int]:
    """``tryToCompressMessage`` with the ZLIB compressor: (body, sysFlag) as the request carries them."""
    if len(body) < over:
        return body, sys_flag
    return zlib.compress(body, level), sys_flag | COMPRESSED_FLAG | ZLIB_FLAG


def uncompress(body: bytes, sys_flag: int) -> bytes:
    """``MessageDecoder.decode``'s uncompression of a stored body; a body without COMPRESSED is as stored."""
    if not sys_flag & COMPRESSED_FLAG:
        return body
    kind = _TYPE_NAMES.get((sys_flag & COMPRESSION_TYPE_MASK) >> 8, "unknown")
    if kind != "ZLIB":
        raise UnsupportedCompression(f"sysFlag {sys_flag:#x}: a {kind} body cannot be uncompressed here")
    try:
        return zlib.decompress(body)
    except zlib.error as exc:
        raise UnsupportedCompression(f"sysFlag {sys_flag:#x}: not a zlib body ({exc})") from None


def uncompressed(msg: StoredMessage) -> StoredMessage:
    """A pulled or checked copy as the client's decoder hands it on: its body uncompressed, its sysFlag kept."""
    if not msg.sys_flag & COMPRESSED_FLAG:
        return msg
    return attrs.evolve(msg, body=uncompress(msg.body, msg.sys_flag))
