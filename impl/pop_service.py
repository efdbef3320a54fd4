"""The pop state of the mmap broker (RocketMQ 5.x) on real files: checkpoints, acks, revive progress, order infos.

Theory of operation
-------------------
The rules are the model's (``model/pop.py``, whose docstring lists the 5.3.3 sources): ``DiskPopState`` *is* the
model's ``PopState`` — the same ``add``, ``ack``, ``due``, ``commit_and_next``, ``update_order`` run unchanged — with
what the model keeps across a restart made of files under the store's ``config/`` directory:

- ``config/popCheckpoints.journal`` (rmqspec's own file; **deviation**, docs/fidelity.md POP-1: 5.3.3 writes each
  checkpoint and each ack as a timer message on ``rmq_sys_REVIVE_LOG_<cluster>`` and keeps its revive progress as
  the consumer offsets of ``CID_RMQ_SYS_REVIVE_GROUP``). An append-only journal of frames: big-endian u32 payload
  length, u32 CRC-32 of the payload, the payload — one UTF-8 JSON object, ``{"ck": {...}}`` (a checkpoint, with its
  place ``seq`` in the revive log), ``{"ack": [seq, offset]}`` (an ack that reached checkpoint ``seq``; an ack no
  checkpoint holds writes nothing) or ``{"revived": [seq, ...]}`` (the checkpoints revived since the last such
  frame). Every request's frames go in one write, fsynced before the answer (``sync``): the model treats checkpoints
  and acks as always durable (POP-2), so they survive a kill and a power loss. A ``revived`` frame is written where
  the model persists its revive progress — with the consumer offsets, every ``flushConsumerOffsetInterval`` in
  ``tick`` and at close — so a checkpoint revived after it is revived again after a crash, as in 5.3.3 and the
  model. The revived set only grows between restarts (a restart resets it to the persisted one), so the frames
  carry deltas.
- ``config/consumerOrderInfo.json``: ConsumerOrderInfoManager's file in 5.3.3's shape,
  ``{"table":{"topic@group":{queueId:OrderInfo}}}`` with OrderInfo's fastjson names — ``a`` attemptId, ``cm``
  commitOffsetBit (bit i: ``o``'s i-th offset acked), ``i`` invisibleTime, ``l`` lastConsumeTimestamp (the pop
  time: the model does not keep the wall time of the update), ``o`` the offsets (the first, then each one's
  distance from it), ``oc`` offsetConsumedCount, ``ot`` offsetNextVisibleTime, ``popTime`` — absent keys for absent
  values; written atomically (``configfiles``) every 10 s from ``tick`` and at close, as the model persists.

At start (``load``) the journal is read frame by frame: a frame cut by the end of the file (or zeros from there
to the end: a length that reached the disk before its data) is a write in flight at a crash, unanswered — the
journal is cut there; anything else that does not decode is a ``StoreError`` naming the file, the frame's byte
offset and the field. The counters that belong to the broker object (the revive-queue counter, the pop draws, a
forced ``randomQ``) carry on from the previous state, like the model's.
"""

from __future__ import annotations

import json
import os
import struct
import zlib
from pathlib import Path
from typing import Any

import attrs

from rmqspec.impl import effects
from rmqspec.impl.configfiles import (
    ConfigFileError,
    dump_fastjson,
    load_with_backup,
    split_topic_group,
    write_atomically,
)
from rmqspec.impl.mappedfile import StoreError, fsync_dir
from rmqspec.model.pop import CheckPoint, OrderInfo, Pending, PopState

JOURNAL_FILE = "popCheckpoints.journal"
ORDER_INFO_FILE = "consumerOrderInfo.json"
_HEAD = struct.Struct(">II")  # payload length, CRC-32 of the payload
_CK_FIELDS = ("group", "topic", "queue_id", "start_offset", "pop_time", "invisible_time", "revive_qid",
              "broker_name", "offsets", "suspend")


def frame(doc: dict[str, Any]) -> bytes:
    payload = json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return _HEAD.pack(len(payload), zlib.crc32(payload)) + payload


def ck_doc(seq: int, ck: CheckPoint) -> dict[str, Any]:
    return {"seq": seq, **{name: getattr(ck, name) for name in _CK_FIELDS}}


def _field(doc: dict[str, Any], name: str, kind: type | tuple[type, ...], path: Path, offset: int) -> Any:
    value = doc.get(name)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise StoreError(path, offset, f"field {name!r}: {value!r} is not {getattr(kind, '__name__', kind)}")
    return value


def ck_of(doc: Any, path: Path, offset: int) -> tuple[int, CheckPoint]:
    """The ``(seq, checkpoint)`` a ``ck`` frame holds; ``StoreError`` naming the field that is wrong."""
    if not isinstance(doc, dict):
        raise StoreError(path, offset, "field 'ck': not an object")
    ints = {n: _field(doc, n, int, path, offset)
            for n in ("seq", "queue_id", "start_offset", "pop_time", "invisible_time", "revive_qid")}
    offsets = _field(doc, "offsets", list, path, offset)
    if not all(isinstance(o, int) and not isinstance(o, bool) for o in offsets):
        raise StoreError(path, offset, f"field 'offsets': {offsets!r} is not a list of queue offsets")
    ck = CheckPoint(_field(doc, "group", str, path, offset), _field(doc, "topic", str, path, offset),
                    ints["queue_id"], ints["start_offset"], ints["pop_time"], ints["invisible_time"],
                    ints["revive_qid"], _field(doc, "broker_name", str, path, offset), tuple(offsets),
                    _field(doc, "suspend", bool, path, offset))
    return ints["seq"], ck


def read_journal(path: Path) -> tuple[list[tuple[int, Any]], int]:
    """The frames' ``(offset, document)`` and the end of the last whole frame."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return [], 0
    except OSError as exc:
        raise StoreError(path, None, f"cannot read: {exc.strerror}") from exc
    out: list[tuple[int, Any]] = []
    pos = 0
    while pos < len(data):
        if len(data) - pos < _HEAD.size or not any(data[pos:]):
            break  # a frame in flight at a crash: its header cut, or only zeros (a length) reached the disk
        length, crc = _HEAD.unpack_from(data, pos)
        end = pos + _HEAD.size + length
        body = data[pos + _HEAD.size: end]
        if end > len(data):
            break  # cut by the end of the file: in flight
        if zlib.crc32(body) != crc:
            if not any(data[end:]):
                break  # the last frame, torn: in flight
            raise StoreError(path, pos, f"frame CRC {zlib.crc32(body):#010x} is not the stored {crc:#010x}")
        try:
            doc = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise StoreError(path, pos, f"frame payload is not JSON: {exc}") from exc
        out.append((pos, doc))
        pos += _HEAD.size + length
    return out, pos


def append_journal(path: Path, data: bytes, at: int) -> None:
    """Write ``data`` at ``at`` (the end of the journal's whole frames) and fsync; the file ends there after."""
    tap = effects.tap_for(path)
    existed = path.exists()
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if tap is not None and not existed:
            tap.create()
        end = at + len(data)
        if os.fstat(fd).st_size != end:
            os.ftruncate(fd, end)
            if tap is not None:
                tap.resize(end)
        os.pwrite(fd, data, at)
        if tap is not None:
            tap.write(at, data)
        os.fsync(fd)
        if tap is not None:
            tap.sync(at, end, meta=True)
    finally:
        os.close(fd)
    if not existed:
        fsync_dir(path.parent)


# -- consumerOrderInfo.json -----------------------------------------------------------------------------------


def encode_order_infos(orders: dict[tuple[str, str, int], OrderInfo]) -> str:
    table: dict[str, dict[int, dict[str, Any]]] = {}
    for (topic, group, queue_id), info in sorted(orders.items()):
        first = info.offsets[0] if info.offsets else 0
        doc: dict[str, Any] = {}
        if info.attempt_id is not None:
            doc["a"] = info.attempt_id
        doc["cm"] = sum(1 << i for i, o in enumerate(info.offsets) if o in info.acked)
        doc["i"] = info.invisible_time
        doc["l"] = info.pop_time
        doc["o"] = [o if i == 0 else o - first for i, o in enumerate(info.offsets)]
        if info.consumed:
            doc["oc"] = {int(k): int(v) for k, v in sorted(info.consumed.items())}
        if info.next_visible:
            doc["ot"] = {int(k): int(v) for k, v in sorted(info.next_visible.items())}
        doc["popTime"] = info.pop_time
        table.setdefault(f"{topic}@{group}", {})[queue_id] = doc
    return dump_fastjson({"table": table})


def _int_map(doc: dict[str, Any], name: str, where: str) -> dict[int, int]:
    value = doc.get(name) or {}
    if not isinstance(value, dict):
        raise ConfigFileError(None, 0, f"{where} field {name!r}: {value!r} is not an object")
    out = {}
    for k, v in value.items():
        try:
            out[int(k)] = int(v)
        except (TypeError, ValueError):
            raise ConfigFileError(None, 0, f"{where} field {name!r}: {k!r}: {v!r} is not offset: number") from None
    return out


def decode_order_infos(doc: Any) -> dict[tuple[str, str, int], OrderInfo]:
    table = doc.get("table", {}) if isinstance(doc, dict) else None
    if not isinstance(table, dict):
        raise ConfigFileError(None, 0, f"{ORDER_INFO_FILE}: field 'table' is not an object")
    out: dict[tuple[str, str, int], OrderInfo] = {}
    for key, queues in table.items():
        topic, group = split_topic_group(str(key))
        if not isinstance(queues, dict):
            raise ConfigFileError(None, 0, f"table[{key!r}] is not an object")
        for qid, info in queues.items():
            where = f"table[{key!r}][{qid!r}]"
            if not isinstance(info, dict):
                raise ConfigFileError(None, 0, f"{where} is not an object")
            try:
                rel = [int(o) for o in info.get("o") or []]
                pop_time, invisible, bits = int(info.get("popTime", 0)), int(info.get("i") or 0), int(info.get("cm", 0))
                queue_id = int(qid)
            except (TypeError, ValueError):
                raise ConfigFileError(None, 0, f"{where}: fields 'o', 'popTime', 'i', 'cm' must be numbers") from None
            attempt = info.get("a")
            if attempt is not None and not isinstance(attempt, str):
                raise ConfigFileError(None, 0, f"{where} field 'a': {attempt!r} is not a string")
            offsets = tuple(o if i == 0 else rel[0] + o for i, o in enumerate(rel))
            out[(topic, group, queue_id)] = OrderInfo(
                attempt, pop_time, invisible, offsets, frozenset(o for i, o in enumerate(offsets) if bits >> i & 1),
                _int_map(info, "ot", where), _int_map(info, "oc", where))
    return out


def load_order_infos(path: Path) -> dict[tuple[str, str, int], OrderInfo]:
    """The file (ConfigManager.load: else its ``.bak``); one that cannot be read, with no ``.bak`` to fall back to,
    is a ``StoreError`` (file, character offset, field) rather than an empty table."""
    try:
        loaded = load_with_backup(path, decode_order_infos, dict)
    except ConfigFileError as exc:
        raise StoreError(exc.path or path, exc.offset, exc.reason) from exc
    if loaded.source is None and loaded.main_error is not None:
        exc = loaded.main_error
        raise StoreError(exc.path or path, exc.offset, exc.reason) from exc
    return loaded.table


# -- the state ------------------------------------------------------------------------------------------------


@attrs.define
class DiskPopState(PopState):
    """The model's ``PopState`` whose durable part is ``config/`` files (module docstring); ``config_dir`` None:
    a broker that does not pop (4.9), nothing written."""

    config_dir: Path | None = None
    journal_end: int = 0
    unsynced: list[dict[str, Any]] = attrs.Factory(list)
    orders_on_disk: str = ""

    @classmethod
    def load(cls, config_dir: Path | None, carry: PopState | None, now: int, orders: bool = True) -> DiskPopState:
        """What a (re)start finds: the journal's checkpoints and acks, the revive progress, the order infos (not
        read with ``orders`` False: ``verify`` checks that file as JSON)."""
        state = cls(config_dir=config_dir, last_order_persist=now)
        if carry is not None:
            state.ck_number, state.draws, state.forced_random = carry.ck_number, carry.draws, carry.forced_random
        if config_dir is None:
            return state
        path = config_dir / JOURNAL_FILE
        frames, state.journal_end = read_journal(path)
        revived: set[int] = set()
        for offset, doc in frames:
            if not isinstance(doc, dict) or len(doc) != 1:
                raise StoreError(path, offset, f"frame {doc!r} is not one of ck / ack / revived")
            (kind, value), = doc.items()
            if kind == "ck":
                seq, ck = ck_of(value, path, offset)
                state.pending[seq] = Pending(ck, seq)
                state.by_key.setdefault(ck.key, []).append(seq)
                state.seq = max(state.seq, seq + 1)
            elif kind == "ack":
                if not (isinstance(value, list) and len(value) == 2 and value[0] in state.pending
                        and isinstance(value[1], int)):
                    raise StoreError(path, offset, f"field 'ack': {value!r} names no checkpoint written before it")
                pending = state.pending[value[0]]
                pending.acked = pending.acked | {value[1]}
            elif kind == "revived":
                if not (isinstance(value, list) and all(s in state.pending for s in value)):
                    raise StoreError(path, offset, f"field 'revived': {value!r} names no checkpoints written before")
                revived.update(value)
            else:
                raise StoreError(path, offset, f"field {kind!r}: not one of ck / ack / revived")
        for seq, pending in state.pending.items():
            pending.revived = seq in revived
        state.persisted_revived = frozenset(revived)
        state.orders = load_order_infos(config_dir / ORDER_INFO_FILE) if orders else {}
        state.persisted_orders = {k: attrs.evolve(v, next_visible=dict(v.next_visible), consumed=dict(v.consumed))
                                  for k, v in state.orders.items()}
        state.orders_on_disk = encode_order_infos(state.orders)
        return state

    def add(self, ck: CheckPoint) -> None:
        self.unsynced.append({"ck": ck_doc(self.seq, ck)})
        super().add(ck)

    def ack(self, key: tuple[str, str, int, int, int, str], offset: int) -> Pending | None:
        found = super().ack(key, offset)
        if found is not None:
            self.unsynced.append({"ack": [found.seq, offset]})
        return found

    def sync(self) -> None:
        """The request's frames written in one write and fsynced (nothing to do when it wrote none)."""
        if not self.unsynced:
            return
        data = b"".join(frame(doc) for doc in self.unsynced)
        self.unsynced.clear()
        if self.config_dir is None:
            return
        append_journal(self.config_dir / JOURNAL_FILE, data, self.journal_end)
        self.journal_end += len(data)

    def persist_revive_progress(self) -> None:
        before = self.persisted_revived
        super().persist_revive_progress()
        delta = sorted(self.persisted_revived - before)
        if delta:
            self.unsynced.append({"revived": delta})
        self.sync()

    def persist_orders(self, now: int) -> None:
        super().persist_orders(now)
        text = encode_order_infos(self.persisted_orders)
        if self.config_dir is not None and text != self.orders_on_disk:  # unchanged: not rewritten
            write_atomically(self.config_dir / ORDER_INFO_FILE, text)
            self.orders_on_disk = text
