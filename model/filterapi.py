"""A tag expression as RocketMQ 4.9.8 parses it: ``FilterAPI.buildSubscriptionData``.

Theory of operation
-------------------
Every party parses a TAG-type subscription string the same way: the client when it subscribes (the
tags it re-checks after a pull, ``PullAPIWrapper.processPullResult``), the broker when a pull carries
it (the consume-queue hash filter, ``ExpressionMessageFilter.isMatchedByConsumeQueue``), and the
audit and invariants when they judge a delivery. ``build_subscription`` is that one parse:

- ``None``, ``""`` and exactly ``"*"`` are SUB_ALL (``" * "`` is not: it is the tag ``*``);
- otherwise the string is split on ``||`` as Java's ``String.split`` does (trailing empty parts
  dropped; nothing left is "subString split error"), each part trimmed as ``String.trim`` trims (every
  char up to U+0020, not Unicode whitespace), and the non-empty parts are the tags set; their
  ``String.hashCode``s are the code set the broker compares with a unit's tags code;
- a string of blanks between ``||`` (``" || "``) leaves an empty tags set: the broker then matches
  nothing (no code), and the client keeps whatever it gets (it filters only with a non-empty set).

The client differential (``tests/interop/test_client_differential.py``) holds it to the 4.9.8 jar's
``FilterAPI.buildSubscriptionData`` for drawn strings.
"""

from __future__ import annotations

import attrs

from rmqspec.model.javahash import java_string_hash

SUB_ALL = "*"


class SubscriptionSplitError(ValueError):
    """What ``FilterAPI.buildSubscriptionData`` throws: the ``||`` split left nothing."""


def java_trim(text: str) -> str:
    """``String.trim()``: drops every char up to U+0020 at both ends (U+00A0, U+3000 stay)."""
    start, end = 0, len(text)
    while start < end and text[start] <= " ":
        start += 1
    while end > start and text[end - 1] <= " ":
        end -= 1
    return text[start:end]


@attrs.frozen
class TagSubscription:
    """``SubscriptionData`` of a TAG expression: the string the client sends, its tags, their codes."""

    sub_string: str
    tags: frozenset[str]

    @property
    def sub_all(self) -> bool:
        return self.sub_string == SUB_ALL

    @property
    def codes(self) -> frozenset[int]:
        return frozenset(java_string_hash(t) for t in self.tags)

    def broker_matches(self, tags_code: int) -> bool:
        """``isMatchedByConsumeQueue``: SUB_ALL, or ``tagsCode.intValue()`` in the code set."""
        if self.sub_all:
            return True
        low = tags_code & 0xFFFFFFFF  # Long.intValue()
        return (low - 0x1_0000_0000 if low & 0x8000_0000 else low) in self.codes

    def client_keeps(self, tags: str | None) -> bool:
        """``processPullResult``: with a non-empty tags set, keep a message whose TAGS is in it."""
        return not self.tags or (tags is not None and tags in self.tags)


def build_subscription(sub_string: str | None) -> TagSubscription:
    """``FilterAPI.buildSubscriptionData`` of a TAG expression (module docstring)."""
    if sub_string is None or sub_string in ("", SUB_ALL):
        return TagSubscription(SUB_ALL, frozenset())
    parts = sub_string.split("||")
    while parts and parts[-1] == "":
        parts.pop()
    if not parts:
        raise SubscriptionSplitError(f"subscription {sub_string!r}: subString split error")
    return TagSubscription(sub_string, frozenset(t for p in parts if (t := java_trim(p))))
