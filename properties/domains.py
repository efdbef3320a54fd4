"""Parameter domains of the conformance machine: what it draws for every operation's arguments.

Theory of operation
-------------------
A broker rule that reads a parameter is judged only where the generated programs send values that
tell a right reading from a wrong one. A value always left at its default (or always inside a
comfortable middle) lets a broker that ignores it, clamps it wrongly or compares it with the wrong
operator pass (issue 41, escape kind 1). This module lists, as data, the values the machine draws
for every parameter of every ``Broker`` operation it sends (``model/protocol.py``): each domain
includes its boundaries (the smallest and largest legal values, one past them, and the special
values the protocol gives a meaning to). The rules take their strategies from here.

Operation and parameter: what is drawn (the boundaries among it).

- ``create_topic`` queue_nums: 1–4 for T0 (``init``), 1, 2, 3, 4, 8 (``create_topic``).
- ``create_group`` retry_max_times: 0, 1, 2, 3, 16 (the default), 17 (its last retry level,
  3 + 16, is past the table's 18 and clamps). retry_queue_nums: 1, 2 — 0 is not drawn: 4.9.8 then
  answers SUCCESS and drops the copy, which the no-loss invariant would report as lost.
- ``send`` queue_id: every queue, and the queue after the last (``send_edge``: refused);
  delay_level: 0, 1–20 (18 is the table's last; 19, 20 clamp).
- ``send_back`` delay_level: −2, −1 (DLQ), 0 (3 + reconsume times), 1, 2, 5, 17, 18, 19, 25
  (clamped); max_reconsume_times: None (the group's applies), −1 (16), 0 (straight to the DLQ), 1,
  2, 16, 17, the group's value; origin_msg_id: the UNIQ_KEY, None, the offset msgId (4.9.8 takes
  the copy's ORIGIN_MESSAGE_ID from the stored message, never from the request).
- ``pull`` offset: the consumer's next; −1, 0, max − 1, max (OFFSET_OVERFLOW_ONE), max + 1,
  max + 1000 (``pull_edge``); queue_id: the topic's queues, and the queue after the last
  (``pull_edge``: refused, SYSTEM_ERROR); max_nums: 1–8; 1, 31, 32, 33 (32 is
  maxTransferCountOnMessageInMemory), 1024 (the client's cap) (``pull_edge``).
- ``update_offset`` offset: the consumer's increasing commits; a rewind to 0, to committed − 1 or
  to committed (``offset_reset``: the broker stores what it is sent).
- ``lock_batch`` / ``unlock_batch`` mqs: 1–4 queues (a mask); none; one queue twice; the queue
  after the topic's last (``lock_edge``).
- ``end_transaction``: the right offsets and group; tranStateTableOffset + 1, commitlog
  offset + 1, another producer group (``end_tampered``: each field checkPrepareMessage compares).
- ``send`` of a timer message (5.x; ``conform_timer.py``): ``TIMER_DELAY_MS``, ``TIMER_DELAY_SEC``,
  ``TIMER_DELIVER_MS``; the requested time on a multiple of timerPrecisionMs, one ms after, one ms
  before (1, 2, 3 or 10 precisions ahead), now (0), in the past, exactly timerMaxDelaySec ahead,
  one past it, not a Java long ("soon", "1.5", " 5"; an empty value is no property: the broker's decoder
  drops it); delay level 0, or 1 or 3 with the timer (DELAY wins). The same
  draws under 4.9, where they are user properties.

Times are the fourth kind of parameter; their domain is the deadline table of ``edges.py``.
"""

from __future__ import annotations

from hypothesis import strategies as st

# create_topic / create_group
TOPIC_QUEUES = st.sampled_from([1, 2, 3, 4, 8])
RETRY_MAX = st.sampled_from([0, 1, 2, 3, 16, 17])
# send_back: the level the listener asks for, the client's max reconsume times ("none": an old client
# without the field, the group's applies; "group": the group's value sent explicitly; "client": −1
# when the group keeps 16, else none), and the origin msgId the request carries
SEND_BACK_LEVELS = st.sampled_from([0, 0, 1, 2, 5, 17, 18, 19, 25, -1, -2])
MAX_CHOICES = st.sampled_from(["none", "group", "client", -1, 0, 1, 2, 16, 17])
ORIGINS = st.sampled_from(["uniq", "uniq", "none", "msg_id"])
# pull_edge: offsets relative to the queue's end as the observer knows it, and batch sizes
PULL_OFFSETS = ("below", "zero", "last", "end", "past", "far")
PULL_MAX = (1, 31, 32, 33, 1024)
# the message families a ladder drives through another family's lifecycle (edges.py)
MSG_FAMILIES: tuple[str, ...] = ("plain", "keyed", "props", "delayed", "batch", "txn", "txn_checked", "timer",
                                  "oneway")
FAMILY = st.sampled_from(MSG_FAMILIES)
# the edge rule's actions (edges.py)
EDGE_KINDS = ("deadline_walk", "deadline_walk", "pull_edge", "offset_reset", "end_tampered", "lock_edge",
              "send_edge", "topic_edge")
# timer messages (conform_timer.py): the property, where the requested time falls, how many precisions
# ahead, and a delay level beside it (DELAY wins)
TIMER_PROPERTIES: tuple[str, ...] = ("TIMER_DELAY_MS", "TIMER_DELAY_SEC", "TIMER_DELIVER_MS")
TIMER_EDGES: tuple[str, ...] = ("multiple", "plus1", "minus1", "zero", "negative", "max", "past_max", "garbage")
TIMER_SPANS: tuple[int, ...] = (1, 2, 3, 10)
TIMER_DRAW = st.tuples(st.sampled_from(TIMER_PROPERTIES),
                       st.sampled_from(("multiple", "plus1", "plus1", "minus1", "minus1", *TIMER_EDGES[3:])),
                       st.sampled_from(TIMER_SPANS), st.sampled_from((0, 0, 0, 1, 3)))
