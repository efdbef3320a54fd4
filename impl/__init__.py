"""rmqspec.impl — the concrete broker on an mmap store in RocketMQ 4.9's on-disk format.

``factory(clock, config, workdir, recorder=None)`` builds a ``MmapBroker`` whose
store lives in ``workdir`` (the conformance registries' factory signature).
"""

from rmqspec.impl.broker import MmapBroker, factory

__all__ = ["MmapBroker", "factory"]
