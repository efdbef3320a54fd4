"""rmqspec benchmarks (not packaged). Run all: ``python -m bench``; one: ``python -m bench store``."""
