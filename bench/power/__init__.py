"""The mutation score of ``rmqspec conform`` (``python -m bench power``; see ``bench/bench_power.py``)."""
