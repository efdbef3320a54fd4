"""rmqspec.properties — invariants, z3 proofs and the conformance state machine."""


def conformance_machine(*args, **kwargs):  # re-export, imported lazily
    """See ``rmqspec.properties.conformance.conformance_machine``."""
    from rmqspec.properties.conformance import conformance_machine as _machine

    return _machine(*args, **kwargs)
