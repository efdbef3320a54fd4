"""The put lock's hold and OS_PAGECACHE_BUSY (seed D1), shared by both brokers.

Theory of operation
-------------------
``Capability.PUT_LOCK_HOLD``: ``hold_put_lock(ms)`` is a put that holds CommitLog's put lock from now for
``ms`` (a slow put: a page fault, a GC pause of its thread); its own record is not modelled, only the hold.
The store is single-threaded, so the hold is state read against the store's clock (``PutLock.state``):

- ``FREE``: no hold, or its ``ms`` have passed (the slow put completed and released the lock);
- ``WAITING``: held for at most ``os_page_cache_busy_timeout_ms``: another put would wait for the lock and be
  answered after the release. A synchronous broker call cannot answer that, so it is **not modelled**: a send,
  a send-back, an END that writes, or a tick (its services may put) in this window is caller misuse
  (``PutWouldWait``, raised before anything changes);
- ``BUSY``: held for longer (strictly) than the timeout: ``isOSPageCacheBusy``. A SendMessageProcessor request
  arriving then (SEND_MESSAGE, batches, CONSUMER_SEND_MSG_BACK) is rejected by the remoting layer before the
  store sees it: SYSTEM_BUSY ``REJECT_REMARK``. A put that reaches the store (END_TRANSACTION's commit and op,
  the schedule and transaction-check services' re-puts) is refused OS_PAGECACHE_BUSY: SYSTEM_ERROR
  (``PC_SYNCHRONIZED_REMARK``; END_TRANSACTION: ``END_BUSY_REMARK``), nothing stored.

A restart (a reopen, a recovery) ends the hold: the slow put completed.

Facts followed (RocketMQ 4.9.8, read with ``javap -c``; docs/fidelity.md WR5):
DefaultMessageStore.isOSPageCacheBusy: ``diff = now - beginTimeInLock; diff < 10000000 && diff >
osPageCacheBusyTimeOutMills`` (default 1000; ``beginTimeInLock`` is 0 outside the lock, so the guard excludes
it); checkStoreStatus tests it after shutdown, SLAVE and not-writeable; SendMessageProcessor.rejectRequest is
``isOSPageCacheBusy() || isTransientStorePoolDeficient()`` and NettyRemotingAbstract answers a rejected
request SYSTEM_BUSY "[REJECTREQUEST]system busy, start flow control for a while";
SendMessageProcessor.handlePutMessageResult: OS_PAGECACHE_BUSY → SYSTEM_ERROR "[PC_SYNCHRONIZED]broker busy,
start flow control for a while"; EndTransactionProcessor.sendFinalMessage → SYSTEM_ERROR "OS page cache busy,
please try another machine" (its rejectRequest is false). Not modelled: BrokerFastFailure's draining of
requests queued behind the slow put (SYSTEM_BUSY "[PCBUSY_CLEAN_QUEUE]…"), which are the WAITING window's.
"""

from __future__ import annotations

import enum

import attrs

from rmqspec.model.results import ResponseCode

BUSY_GUARD_MS = 10_000_000  # isOSPageCacheBusy's `diff < 10000000`
BUSY_CODE = ResponseCode.SYSTEM_ERROR
# SendMessageProcessor.handlePutMessageResult's remark for OS_PAGECACHE_BUSY (code SYSTEM_ERROR)
PC_SYNCHRONIZED_REMARK = "[PC_SYNCHRONIZED]broker busy, start flow control for a while"
# EndTransactionProcessor.sendFinalMessage's remark for it (code SYSTEM_ERROR)
END_BUSY_REMARK = "OS page cache busy, please try another machine"
# NettyRemotingAbstract's answer to a request its processor rejects (code SYSTEM_BUSY)
REJECT_CODE = ResponseCode.SYSTEM_BUSY
REJECT_REMARK = "[REJECTREQUEST]system busy, start flow control for a while"


class LockState(enum.Enum):
    FREE = "free"
    WAITING = "waiting"
    BUSY = "busy"


class PutWouldWait(RuntimeError):
    """Caller misuse: a put while the put lock is held for no longer than the timeout would wait for it;
    its answer comes after the release, which a synchronous call cannot give (not modelled)."""


@attrs.define
class PutLock:
    """The slow put's hold: from ``since`` (beginTimeInLock) until ``until`` (its release); None when free."""

    since: int | None = None
    until: int | None = None

    def hold(self, now: int, ms: int) -> None:
        if ms <= 0:
            raise ValueError(f"a hold lasts a positive number of ms, got {ms}")
        if self.state(now, 0) is not LockState.FREE:
            raise ValueError(f"the put lock is already held since {self.since}")
        self.since, self.until = now, now + ms

    def release(self) -> None:
        self.since = self.until = None

    def state(self, now: int, timeout_ms: int) -> LockState:
        """The hold at ``now`` (``CHECK``: the busy test is isOSPageCacheBusy's, strict and guarded)."""
        if self.since is None or self.until is None or now >= self.until:
            self.release()
            return LockState.FREE
        diff = now - self.since
        return LockState.BUSY if diff < BUSY_GUARD_MS and diff > timeout_ms else LockState.WAITING

    def gate(self, now: int, timeout_ms: int, what: str) -> LockState:
        """The state for an operation that would put (``what``); ``PutWouldWait`` while WAITING."""
        state = self.state(now, timeout_ms)
        if state is LockState.WAITING:
            assert self.since is not None
            raise PutWouldWait(f"{what} at {now}: the put lock is held since {self.since} for no longer than "
                               f"{timeout_ms} ms, so its put would wait for the release (not modelled)")
        return state
