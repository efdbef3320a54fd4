"""An independent, minimal reading of the master/slave rules (issue 43) for ``structural.audit``.

Written from docs/trace-schema.md ("Master/slave pairs") and traces/README.md, not from
``properties/inv_replay_ha.py``: per broker name, the slave's end is the last ``replicate``'s
``commitlog_offset``; a SYNC_MASTER SEND_OK past it, a slave delivery at or past it or of another key than
what it received (or the master stored) there, a transfer not starting at it or moving a record the master
stored another key at, a slave's write, and at a DISK_LOST a SYNC SEND_OK of the epoch past the row's
``commitlog_offset`` are violations (code, seqs). Rows are complete here (generated traces): no unknowns.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any


def _detail(r: dict[str, Any]) -> dict[str, Any]:
    d = r.get("detail")
    return json.loads(d) if isinstance(d, str) else (d or {})


def audit_ha(rows: list[dict[str, Any]]) -> list[tuple[str, tuple[int, ...]]]:
    out: list[tuple[str, tuple[int, ...]]] = []
    end: dict[str, tuple[int, int | None]] = defaultdict(lambda: (0, None))  # broker -> (slave end, its row)
    master: dict[str, dict[int, tuple[str, int]]] = defaultdict(dict)
    got: dict[str, dict[int, tuple[str, int]]] = defaultdict(dict)
    sync: dict[str, list[tuple[int, int]]] = defaultdict(list)  # broker -> [(end, send seq)]
    for r in rows:
        d = _detail(r)
        name, bid, seq, ev = d.get("broker"), d.get("broker_id"), r["seq"], r["event"]
        if name is None or bid is None:
            continue
        slave_end, end_row = end[name]
        if bid == 1 and ev in ("store", "send"):
            out.append(("HA_SLAVE_WROTE", (seq,)))
        elif ev == "store":
            master[name][r["commitlog_offset"]] = (r["msg_key"], seq)
        elif ev == "replicate":
            if d["from"] != slave_end:
                out.append(("HA_SLAVE_NOT_PREFIX", tuple(s for s in (end_row, seq) if s is not None)))
            for offset, key in d["records"]:
                if offset in master[name] and master[name][offset][0] != key:
                    out.append(("HA_SLAVE_NOT_PREFIX", (master[name][offset][1], seq)))
                got[name][offset] = (key, seq)
            end[name] = (max(slave_end, r["commitlog_offset"]), seq)
        elif ev == "send" and d.get("role") == "SYNC_MASTER" and r["status"] == "SEND_OK":
            sync[name].append((d["end"], seq))
            if d["end"] > slave_end:
                out.append(("HA_SYNC_ACK_UNREPLICATED", tuple(s for s in (end_row, seq) if s is not None)))
        elif ev == "deliver" and bid == 1:
            offset = r["commitlog_offset"]
            if offset >= slave_end:
                out.append(("HA_SLAVE_BEYOND_REPLICATED", tuple(s for s in (end_row, seq) if s is not None)))
            had = got[name].get(offset) or master[name].get(offset)
            if had is not None and had[0] != r["msg_key"]:
                out.append(("HA_SLAVE_SERVED_UNSTORED", (had[1], seq)))
        elif ev == "ha_link" and r["status"] == "DISK_LOST":
            out.extend(("HA_SYNC_ACK_LOST", (s, seq)) for e, s in sync[name] if e > r["commitlog_offset"])
            sync[name], master[name] = [], {}
    return out
