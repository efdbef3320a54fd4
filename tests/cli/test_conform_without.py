"""``rmqspec conform --without CAPABILITY``: the broker judged as if it did not declare a capability."""

from __future__ import annotations

from rmqspec.cli.main import main
from rmqspec.model.clock import ManualClock
from rmqspec.model.config import default_config
from rmqspec.model.protocol import Capability
from rmqspec.properties.adapters import FactoryError, load_factory, without_capabilities


def test_the_factory_s_brokers_no_longer_declare_the_capability(tmp_path) -> None:
    factory = load_factory("rmqspec.model:factory")
    config = default_config("rocketmq-5.2")
    assert Capability.POP in factory(ManualClock(0), config, tmp_path / "a").capabilities
    broker = without_capabilities(factory, ["pop", " crash "])(ManualClock(0), config, tmp_path / "b")
    assert Capability.POP not in broker.capabilities and Capability.CRASH not in broker.capabilities
    assert Capability.EXACT_TIME in broker.capabilities  # the others stay
    assert without_capabilities(factory, []) is factory


def test_an_unknown_capability_is_a_factory_error_naming_the_known_ones() -> None:
    try:
        without_capabilities(load_factory("rmqspec.model:factory"), ["pops"])
    except FactoryError as exc:
        assert "unknown capability 'pops'" in str(exc) and "pop" in str(exc).split(":", 1)[1]
    else:
        raise AssertionError("no FactoryError")


def test_conform_without_pop_leaves_a_5x_broker_s_pop_out(capsys) -> None:
    args = ["conform", "--broker", "rmqspec.model:factory", "--profile", "rocketmq-5.2", "--examples", "3",
            "--steps", "10"]
    assert main([*args, "--without", "pop"]) == 0
    out = capsys.readouterr().out
    pop_rows = [line for line in out.splitlines() if line.strip().startswith(("pop:", "pop_order:"))]
    assert pop_rows and all(line.rstrip().endswith("(n/a)") for line in pop_rows), pop_rows


def test_conform_without_an_unknown_capability_exits_2(capsys) -> None:
    assert main(["conform", "--broker", "rmqspec.model:factory", "--without", "pop,nonesuch"]) == 2
    err = capsys.readouterr().err
    assert "unknown capability 'nonesuch'" in err and len(err.strip().splitlines()) == 1
