"""rmqspec.impl — the concrete broker on an mmap store in RocketMQ 4.9's on-disk format."""
