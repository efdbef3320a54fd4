"""rmqspec.remoting — RocketMQ 4.9's remoting (wire) protocol, both directions.

Frames and headers are built and parsed by pure functions (``frame.py``,
``headers.py``); the request codes with their header fields are one table
(``codes.py``); sockets are a thin layer on top (client, server).
"""
