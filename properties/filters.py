"""Filter rules of the conformance machine: user properties, SQL92 pulls, an inconsistent group.

Theory of operation
-------------------
``FilterRules`` is a mixin of ``ConformanceBase`` (``properties/conformance.py``), like ``DeepRules``;
it uses the machine's plumbing (``_record``, ``_call``, ``_send``, ``_message``, ``_after``, ``history``).
The machine runs its brokers with ``enablePropertyFilter=true`` (on the manual clock). The four
actions ride on the machine's ``probe_filtered`` rule (``FILTER_ACTIONS`` draws which), so the other
rules keep their share of the steps.

- ``send_with_properties`` sends a message with tags and user properties drawn by
  ``sql92_strategies.property_maps`` (values that hit the typing rules);
- ``probe_sql92`` — the observer pulls a queue from 0 with a SQL92 expression drawn by
  ``sql92_strategies.expressions`` (a third do not compile): in lockstep the refusal or the messages
  must equal the model's; and every message a broker returns is judged against the expression
  (FilterMismatchProperty: a delivery the expression does not select), so a broker that ignores the
  filter or treats NULL comparisons as true is caught without the model too;
- ``inconsistent_group`` — group ``GF``'s two clients subscribe the first topic differently
  (RocketMQ's "订阅关系不一致"): each with its drawn SQL92 expression or a TAG expression
  (``GF_STYLE``), one subscription built later (a greater ``subVersion``) or both at once (equal
  versions: the broker keeps the subscription and the filter data it heard first). 4.9.8 semantics
  (docs/fidelity.md F10–F15, ``model/subscriptions.py``): a SQL92 client first passes the start check
  (DefaultMQPushConsumer.start's CHECK_CLIENT_CONFIG, here the observer's pull with the expression; a
  refused client never runs); the running clients heartbeat (``Broker.heartbeat``, the acting client
  ``which`` last) and pull the queues allocated to them (queue id parity: ``AllocateMessageQueueAveragely``
  for two clients is contiguous halves, parity keeps the rule simple and still gives each client its
  own queues) WITHOUT the subscription flag, from the group's committed offset, with their own
  ``subVersion``: the broker filters every client's queues with the greatest-version subscription. A
  TAG client keeps only its own tag strings (``client_keeps``, ``PullAPIWrapper.processPullResult``),
  a SQL92 client keeps all; both consume with SUCCESS and commit the pull's next offset. So messages
  only the older subscription selects are committed past, and a SQL92 client consumes what the other
  client's expression selected: the trace audit reports them (FILTER_SKIPPED, FILTER_MISMATCH,
  SUBSCRIPTION_INCONSISTENT; ``rmqspec trace gen --inject`` plants such groups); the conformance
  verdict does not, because it is the client configuration that is wrong, not the broker: GF's rows
  stay in the ghost history (FilterMismatchProperty judges each delivery against
  ``detail.broker_subscription``, the subscription the broker used) and out of the recorded trace.
  Each round the observer also probes both drawn SQL92 expressions on their client's queues (what the
  clients asked for, judged by FilterMismatchProperty). ``GF`` is not a subscribing group of the
  no-loss invariant and the drain leaves it alone.
- ``group_leave`` — a GF client shuts down (UNREGISTER_CLIENT, an effect no answer shows): the other
  member takes every queue and consumes it filtered by the subscription table the unregister left
  as it was; when the last member left, the group info went with it and the leaver's pull in flight
  is refused. The machine follows GF's members and the broker's subscription (``fg_members``,
  ``fg_table``); a restarted broker forgets both.

Every ``deliver`` / ``consume`` of these rules carries ``detail.subscription``,
``detail.expression_type``, ``detail.tags`` and ``detail.properties`` (what the audit judges with);
GF's also ``broker_subscription``, ``broker_expression_type`` and ``sub_version``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

from rmqspec.model.message import MessageQueue, StoredMessage
from rmqspec.model.pullfilter import subscription_matches
from rmqspec.model.results import PullResult, PullStatus
from rmqspec.model.sql92 import SQL92
from rmqspec.properties.sql92_strategies import TAG_VALUES, expressions, property_maps

PICK = st.integers(0, 255)
FILTER_GROUP = "GF"
FILTER_CLIENTS = ("GF@client-1", "GF@client-2")
# a GF client's TAG subscription, or None: the client subscribes with its drawn SQL92 expression
GF_TAG_SUBS = ("logistics", "food || Aa", None, "BB", None, "*")
# (client 0's TAG subscription or None: SQL92, client 1's, which client's subscription is later: 0, 1,
# or 2 = built at the same instant, an equal subVersion, where the broker keeps the first it heard)
GF_STYLE = st.tuples(st.sampled_from(GF_TAG_SUBS), st.sampled_from(GF_TAG_SUBS), st.integers(0, 2))
GfSub = tuple[str, str, int]  # expression, expression_type, sub_version
# what ``probe_filtered`` does besides its tag probe: None = the tag probe, else ``filters``' arguments
FILTER_ACTIONS = st.one_of(
    st.none(),
    st.tuples(st.sampled_from(["send", "probe", "probe", "inconsistent", "leave"]), st.sampled_from(TAG_VALUES),
              property_maps(), expressions(), expressions(), st.integers(0, 1), st.integers(1, 8), GF_STYLE),
)


def _pick(seq: list | tuple, i: int) -> Any:
    return seq[i % len(seq)]


def client_keeps(sub: GfSub, m: StoredMessage) -> bool:
    """What a 4.9.8 Java client keeps of a pulled message (``PullAPIWrapper.processPullResult``): a TAG
    subscription with tags re-checks the tag string exactly; SQL92 (no tagsSet) keeps everything."""
    expression, kind, _ = sub
    if kind != "TAG":
        return True
    return bool(subscription_matches(expression, kind, m.tags, m.properties))


def gf_detail(m: StoredMessage, own: GfSub, broker_sub: GfSub) -> dict[str, Any]:
    """The client's own subscription (what the audit judges) and the one the broker filtered with."""
    return {**filter_detail(m, own[0], own[1]), "broker_subscription": broker_sub[0],
            "broker_expression_type": broker_sub[1], "sub_version": own[2]}


def filter_detail(m: StoredMessage, subscription: str, expression_type: str) -> dict[str, Any]:
    props = {k: v for k, v in m.properties.items()}
    return {"subscription": subscription, "expression_type": expression_type, "tags": m.tags,
            "properties": props}


class FilterRules:
    """Rules mixed into ``ConformanceBase`` (see the module docstring)."""

    fg_subs: dict[str, GfSub]
    fg_started: dict[str, bool]
    fg_created: bool
    fg_members: set[str]  # GF's clients registered since the broker's last start (heartbeated, not left)
    fg_table: GfSub | None  # the broker's subscription of GF for T0: the greatest version its members sent

    def _emit_delivers(self, res: PullResult, group: str, client: str, trace: bool,
                       detail: Callable[[Any], dict[str, Any]]) -> None:
        """One ``deliver`` row per pulled message (``trace``: whether it goes to the recorded trace)."""
        for m in res.messages:
            self.history.emit(
                "deliver", self._now(), trace=trace, actor=client, group=group, client_id=client,
                topic=m.topic, queue_id=m.queue_id, queue_offset=m.queue_offset,
                commitlog_offset=m.commitlog_offset, msg_key=m.uniq_key, msg_id=m.msg_id,
                reconsume_times=m.reconsume_times, detail=detail(m),
            )

    def _filter_state(self) -> None:
        if not hasattr(self, "fg_subs"):
            self.fg_subs = {}
            self.fg_started = {}
            self.fg_created = False
            self.fg_members = set()
            self.fg_table = None

    def _forget_consumers(self) -> None:
        """The broker restarted: its consumer tables live in memory, so GF has no member and no
        subscription until a client heartbeats again."""
        self._filter_state()
        self.fg_members.clear()
        self.fg_table = None

    def _joined(self, client: str, sub: GfSub) -> None:
        """A GF heartbeat: the client is a member; the broker keeps a topic's subscription until one
        with a greater subVersion comes (ConsumerGroupInfo.updateSubscription)."""
        self.fg_members.add(client)
        if self.fg_table is None or sub[2] > self.fg_table[2]:
            self.fg_table = sub

    def filters(self, kind: str, topic: int, queue: int, tags: str | None, props: dict[str, str], first: str,
                second: str, which: int, n: int, style: tuple = (None, None, 1)) -> None:
        """The filter family's actions (drawn with ``probe_filtered``)."""
        if kind == "send":
            self.send_with_properties(topic, queue, tags, props)
        elif kind == "probe":
            self.probe_sql92(topic, queue, first, 32 if n == 8 else n)
        elif kind == "leave":
            self.group_leave(which, n)
        elif self.t0 in self.topics:
            self.inconsistent_group(first, second, which, n, style)

    def filter_prelude(self, tags: str | None, props: dict[str, str], expr: str) -> None:
        """An example's opening filter actions (``composite.PRELUDE``): a message with properties,
        then the observer's SQL92 probes of its queue — the drawn expression, one every stored
        message matches (the broker sets CLUSTER on each: fidelity F8) and one that does not
        compile — so every example that draws it reaches FOUND and the refusal."""
        self.send_with_properties(0, 0, tags, props)
        for probe in (expr, "CLUSTER IS NOT NULL", "a >"):
            self.probe_sql92(0, 0, probe, 32)

    def send_with_properties(self, topic: int, queue: int, tags: str | None, props: dict[str, str]) -> None:
        self._record("send_with_properties", topic=topic, queue=queue, tags=tags, props=props)
        name = _pick(sorted(self.topics), topic)
        self._send(self._message(name, tags, (), dict(props)), queue % self.topics[name])
        self._after()

    def _sql_pull(self, group: str, mq: MessageQueue, offset: int, max_nums: int, expr: str,
                  client: str, deliver: bool) -> PullResult | None:
        out = self._call(f"pull({group!r}, {mq.topic}/{mq.queue_id}, offset={offset}, max={max_nums}, "
                         f"sql92={expr!r})", lambda b: b.pull(group, mq, offset, max_nums, expr, SQL92))
        if out.error is not None:
            self._sometimes(f"sql92:refused:{out.error[1]}")
            return None
        res: PullResult = out.value
        self._sometimes(f"sql92:{res.status.value}")
        self._emit_delivers(res, group, client, deliver,
                            lambda m: {"from": offset, "client": deliver, **filter_detail(m, expr, SQL92)})
        return res

    def probe_sql92(self, topic: int, queue: int, expr: str, max_nums: int) -> None:
        """The observer pulls with a SQL92 expression (well- or ill-typed)."""
        self._record("probe_sql92", topic=topic, queue=queue, expr=expr, max_nums=max_nums)
        name = _pick(sorted(self.topics), topic)
        self._sql_pull(self.obs, MessageQueue(name, queue % self.topics[name]), 0, max_nums, expr, self.obs,
                       deliver=False)
        self._after()

    def _gf_subscriptions(self, group: str, first: str, second: str, style: tuple) -> dict[str, GfSub]:
        """The two clients' subscriptions, fixed at GF's first action: each SQL92 (``first`` /
        ``second``) or TAG (``style[0]`` / ``style[1]`` when not None); ``style[2]`` names the client
        whose subscription was built later (the greater subVersion, what a 4.9.8 broker keeps); 2:
        neither (equal subVersions: the broker keeps the first it heard, ``_joined``)."""
        if not self.fg_subs:
            base = self._now()
            tag1, tag2, later = style
            if later not in (0, 1):
                self._sometimes("inconsistent_group:equal_versions")
            clients = [c.replace("GF", group) for c in FILTER_CLIENTS]
            for i, (c, expr, tag) in enumerate(zip(clients, (first, second), (tag1, tag2), strict=True)):
                version = base + (1 if i == later else 0)
                self.fg_subs[c] = (expr, SQL92, version) if tag is None else (tag, "TAG", version)
                self.fg_started[c] = tag is not None or self._client_start_check(expr)
        return self.fg_subs

    def _client_start_check(self, expr: str) -> bool:
        """DefaultMQPushConsumer.start checks a SQL92 subscription in the broker (CHECK_CLIENT_CONFIG
        compiles it): here the observer's pull with the expression (``RemoteBroker`` sends the check
        first). A refused client never starts: it neither heartbeats nor pulls."""
        res = self._sql_pull(self.obs, MessageQueue(self.t0, 0), 0, 32, expr, self.obs, deliver=False)
        if res is None:
            self._sometimes("inconsistent_group:start_refused")
        return res is not None

    def inconsistent_group(self, first: str, second: str, which: int, n: int,
                           style: tuple = (None, None, 1)) -> None:
        """Group GF's clients heartbeat their (different) subscriptions for T0, the acting client
        ``which`` last; then each pulls its queues without the subscription flag (the acting one
        first), keeps what the Java client keeps, consumes and commits."""
        self._filter_state()
        self._record("inconsistent_group", first=first, second=second, which=which, n=n, style=style)
        group = FILTER_GROUP + self.ns
        if not self.fg_created:
            self._call(f"create_group({group!r})", lambda b: b.create_group(group))
            self.fg_created = True
        subs = self._gf_subscriptions(group, first, second, tuple(style))
        clients = list(subs)
        running = [c for c in (clients[1 - which], clients[which]) if self.fg_started[c]]
        if subs[clients[0]][:2] != subs[clients[1]][:2]:
            self._sometimes("inconsistent_group:differs")  # configured differently (started or not)
        for c in running:  # the acting client heartbeats last, just before it pulls
            self._call(f"heartbeat({group!r}, {c!r}, {self.t0}={subs[c]!r})",
                       lambda b, c=c: b.heartbeat(group, c, {self.t0: subs[c]}))
            self._joined(c, subs[c])
        for i, expr in enumerate((first, second)):  # the observer probes both drawn SQL92 expressions on
            for q in range(i, self.topics[self.t0], 2):  # the queues of their client (FilterMismatchProperty)
                self._sql_pull(self.obs, MessageQueue(self.t0, q), 0, 32, expr, self.obs, deliver=False)
        broker_sub = self.fg_table if running else None
        for c in running[::-1]:  # the acting client first, then the other one: both consume their queues
            self._gf_consume(group, c, clients.index(c), n, subs[c], broker_sub)  # type: ignore[arg-type]
        self._after()

    def group_leave(self, which: int, n: int) -> None:
        """GF's client ``which`` shuts down (UNREGISTER_CLIENT; a client that is no member — never
        started, or heartbeated before the broker restarted — changes nothing). An unregister leaves
        the group's subscription table as it is (4.9.8 and 5.x ConsumerManager.unregisterConsumer):
        the other client, still a member, takes every queue (the rebalance) and consumes them without a
        heartbeat, filtered by the subscription with the greatest version, maybe the leaver's. The
        last member takes the group info with it: a pull without the subscription flag is then
        refused (SUBSCRIPTION_NOT_EXIST) — the leaver's pull still in flight shows it."""
        self._filter_state()
        self._record("group_leave", which=which, n=n)
        group = FILTER_GROUP + self.ns
        clients = [c.replace("GF", group) for c in FILTER_CLIENTS]
        leaver, other = clients[which % 2], clients[1 - which % 2]
        self._call(f"unregister_consumer({group!r}, {leaver!r})", lambda b: b.unregister_consumer(group, leaver))
        if leaver not in self.fg_members:
            self._sometimes("group_leave:not_member")
        else:
            self.fg_members.discard(leaver)
            self._sometimes("group_leave:member")
            if not self.fg_members:
                self.fg_table = None
                self._sometimes("group_leave:last")
        if self.t0 not in self.topics or not self.fg_subs:
            return self._after()
        if other in self.fg_members and self.fg_table is not None:
            self._sometimes("group_leave:rebalanced")
            self._gf_consume(group, other, None, n, self.fg_subs[other], self.fg_table)
        elif not self.fg_members and self.fg_started.get(leaver):
            own = self.fg_subs[leaver]
            res = self._heartbeat_pull(group, MessageQueue(self.t0, which % self.topics[self.t0]), 0, n, leaver,
                                       own, own)
            self._sometimes("group_leave:stale_pull_refused" if res is None else "group_leave:stale_pull_served")
            self.judge_stale_pull(group, res)
        self._after()

    def _gf_consume(self, group: str, client: str, index: int | None, n: int, own: GfSub,
                    broker_sub: GfSub) -> None:
        """One client's round: pull each allocated queue (``index``: the queue id parity of its half;
        None: every queue) without the subscription flag from the committed offset, keep what the Java
        client keeps, consume it, commit the pull's next offset."""
        if broker_sub[:2] != own[:2]:
            self._sometimes("inconsistent_group:filtered_by_other")
        for q in range(self.topics[self.t0]):
            if index is not None and q % 2 != index:
                continue
            mq = MessageQueue(self.t0, q)
            stored = self.query_offset(group, mq)
            offset = max(stored.value if stored.error is None else 0, 0)
            res = self._heartbeat_pull(group, mq, offset, n, client, own, broker_sub)
            if res is None or res.status not in (PullStatus.FOUND, PullStatus.NO_MATCHED_MSG):
                continue
            for m in res.messages:
                if not client_keeps(own, m):
                    self._sometimes("inconsistent_group:client_dropped")
                    continue
                self.history.emit("consume", self._now(), trace=False, actor=client, group=group,
                                  client_id=client, topic=m.topic, queue_id=m.queue_id, queue_offset=m.queue_offset,
                                  msg_key=m.uniq_key, msg_id=m.msg_id, reconsume_times=m.reconsume_times,
                                  status="SUCCESS",
                                  detail={"listener": "SUCCESS", **gf_detail(m, own, broker_sub)})
            nxt = res.next_begin_offset
            self._call(f"update_offset({group!r}, {mq.topic}/{q}, {nxt})",
                       lambda b, mq=mq, nxt=nxt: b.update_offset(group, mq, nxt))
            self.history.emit("commit_offset", self._now(), trace=False, actor=client, group=group,
                              client_id=client, topic=mq.topic, queue_id=q, queue_offset=nxt,
                              detail={"requested": nxt})

    def _heartbeat_pull(self, group: str, mq: MessageQueue, offset: int, max_nums: int, client: str, own: GfSub,
                        broker_sub: GfSub) -> PullResult | None:
        """PULL_MESSAGE without the subscription flag, with the client's subVersion (``Broker.pull``
        with ``subscription=None``)."""
        out = self._call(f"pull({group!r}, {mq.topic}/{mq.queue_id}, offset={offset}, max={max_nums}, "
                         f"heartbeated, sub_version={own[2]})",
                         lambda b: b.pull(group, mq, offset, max_nums, None, own[1], own[2]))
        if out.error is not None:
            self._sometimes(f"inconsistent_group:refused:{out.error[1]}")
            return None
        res: PullResult = out.value
        self._sometimes(f"inconsistent_group:{res.status.value}")
        if broker_sub[1] == SQL92:
            self._sometimes(f"sql92:{res.status.value}")  # the broker evaluated a SQL92 expression
        self._emit_delivers(res, group, client, False,
                            lambda m: {"from": offset, "client": False, **gf_detail(m, own, broker_sub)})
        return res
