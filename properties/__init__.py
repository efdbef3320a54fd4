"""rmqspec.properties — invariants, z3 proofs and the conformance state machine."""
