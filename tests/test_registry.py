"""The UDM registry: entry-point discovery, validation, fault isolation, lookup."""

from __future__ import annotations

import importlib.metadata
import sys
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from udm.host import Cht, IntervalEvent, Stream, TumblingWindow, evaluate
from udm.host.registry import (
    DuplicateUdmError,
    Registry,
    UdmPluginWarning,
    UnknownUdmError,
    get_registry,
    reset_registry,
)
from udm.sdk import Aggregate, UdmDefinitionError, aggregate, function, hookimpl


@dataclass
class FakeDist:
    name: str
    version: str

    @property
    def metadata(self) -> dict[str, str]:
        return {"Name": self.name}


@dataclass
class FakeEntryPoint:
    """Quacks like importlib.metadata.EntryPoint (name, value, dist, load)."""

    name: str
    value: str
    dist: FakeDist | None = None

    def load(self) -> Any:
        return importlib.import_module(self.value)


@aggregate
def total(values: list[float]) -> float:
    """Sum of the values."""
    return sum(values)


@aggregate
def biggest(values: list[float], k: int = 1) -> float:
    return sorted(values)[-k]


@function
def double(x: float) -> float:
    return 2 * x


def _module(name: str, hook: Callable[[], Any] | None) -> types.ModuleType:
    mod = types.ModuleType(name)
    if hook is not None:
        mod.udm_udms = hookimpl(hook)  # type: ignore[attr-defined]
    return mod


@pytest.fixture
def plugins(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., None]]:
    """Install fake libraries: plugins(("lib", "module", hook or None or Exception, dist))."""

    def install(*specs: tuple[str, str, Any, str | None]) -> None:
        eps = []
        for library, module_name, hook, dist in specs:
            if isinstance(hook, ImportError):
                # sys.modules[name] = None makes importing it fail
                monkeypatch.setitem(sys.modules, module_name, None)  # type: ignore[arg-type]
            elif isinstance(hook, BaseException):

                def boom(exc: BaseException = hook) -> Any:
                    raise exc

                monkeypatch.setitem(sys.modules, module_name, _module(module_name, boom))
            else:
                monkeypatch.setitem(sys.modules, module_name, _module(module_name, hook))
            eps.append(
                FakeEntryPoint(library, module_name, FakeDist(dist, "1.2") if dist else None)
            )

        def entry_points(group: str) -> list[FakeEntryPoint]:
            assert group == "udm"
            return eps

        monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)

    yield install
    reset_registry()


def test_discovers_libraries_and_names_udms_library_dot_name(plugins: Any) -> None:
    plugins(
        ("alpha", "fake_alpha", lambda: [total, biggest], "alpha-udms"),
        ("beta", "fake_beta", lambda: {"twice": double}, "beta-udms"),
    )
    reg = Registry()
    assert reg.names() == ["alpha.biggest", "alpha.total", "beta.twice"]
    entry = reg.entry("alpha.total")
    assert (entry.library, entry.distribution, entry.version) == ("alpha", "alpha-udms", "1.2")
    assert (entry.kind, entry.flavor) == ("aggregate", "time-insensitive non-incremental aggregate")
    assert entry.doc == "Sum of the values."
    assert reg.entry("alpha.biggest").signature == "alpha.biggest(k: int = 1)"
    assert reg.entry("beta.twice").signature == "beta.twice(x: float) -> float"
    assert reg.resolve("beta.twice") is double
    assert reg.failures == []
    assert reg.plugin_manager.has_plugin("alpha")


def test_a_broken_library_is_recorded_with_its_traceback_and_the_others_load(
    plugins: Any,
) -> None:
    plugins(
        ("alpha", "fake_alpha", lambda: [total], "alpha-udms"),
        ("broken", "fake_broken", ImportError("no module named numpyy"), "broken-udms"),
        ("crashy", "fake_crashy", RuntimeError("hook exploded"), None),
        ("empty", "fake_empty", None, None),
        ("wrong", "fake_wrong", lambda: [int], None),
    )
    with pytest.warns(UdmPluginWarning) as caught:
        reg = Registry()
        assert reg.names() == ["alpha.total"]
    assert len(caught) == 4
    failures = {f.library: f for f in reg.failures}
    assert sorted(failures) == ["broken", "crashy", "empty", "wrong"]
    assert failures["broken"].distribution == "broken-udms"
    assert failures["broken"].error.startswith("ModuleNotFoundError: import of fake_broken halted")
    assert "Traceback (most recent call last)" in failures["broken"].traceback
    assert failures["crashy"].error == "RuntimeError: hook exploded"
    assert "implements no udm_udms hook" in failures["empty"].error
    assert "builtins.int is not a UDM" in failures["wrong"].error
    # a failed library leaves no partial registration behind
    assert not reg.plugin_manager.has_plugin("crashy")


def test_duplicate_library_from_two_distributions_names_both(plugins: Any) -> None:
    """Neither copy loads and its lookups say why; the other libraries are
    listed and usable (the clash used to make every lookup of every library
    raise, so `udm-cli list` showed nothing)."""
    plugins(
        ("stats", "fake_stats_a", lambda: [total], "stats-a"),
        ("stats", "fake_stats_b", lambda: [total], "stats-b"),
        ("zeta", "fake_zeta", lambda: [total], "zeta-udms"),
    )
    message = (
        "UDM library 'stats' is provided by two distributions: stats-a (fake_stats_a) and "
        "stats-b (fake_stats_b); uninstall one of them (pip uninstall <distribution>)"
    )
    with pytest.warns(UdmPluginWarning, match="provided by two distributions"):
        reg = Registry()
        assert reg.names() == ["zeta.total"]
    assert reg.resolve("zeta.total") is total
    for _ in range(2):  # every lookup of the library says so, not just the first
        with pytest.raises(DuplicateUdmError) as err:
            reg.entry("stats.total")
        assert str(err.value) == message
    [failure] = reg.failures
    assert (failure.library, failure.error) == ("stats", f"DuplicateUdmError: {message}")
    with pytest.raises(DuplicateUdmError):
        reg.register(total, library="stats")


def test_a_library_listing_a_name_twice_or_misnamed_fails_alone(plugins: Any) -> None:
    plugins(
        ("alpha", "fake_alpha", lambda: [total, total], "alpha-udms"),
        ("my.lib", "fake_dotted", lambda: [total], "dotted-udms"),
        ("zeta", "fake_zeta", lambda: [total], "zeta-udms"),
    )
    reg = Registry()
    with pytest.warns(UdmPluginWarning):
        assert reg.names() == ["zeta.total"]
    assert reg.names() == ["zeta.total"]  # and stays so
    failures = {f.library: f for f in reg.failures}
    assert failures["alpha"].error == (
        "UdmDefinitionError: UDM library 'alpha' lists the name 'total' twice; "
        "give each UDM its own name"
    )
    assert "the library name 'my.lib' (the entry point's name) must be an identifier" in (
        failures["my.lib"].error
    )
    assert not reg.plugin_manager.has_plugin("alpha")


def test_duplicate_udm_name_within_a_library_is_an_error(plugins: Any) -> None:
    plugins(("alpha", "fake_alpha", lambda: {"t": total, "u": total}, "alpha-udms"))
    reg = Registry()
    reg.load()
    reg2 = Registry(autoload=False)
    reg2.register(total, library="alpha")
    with pytest.raises(
        DuplicateUdmError,
        match=r"UDM 'alpha.total' is registered twice: by "
        r"library 'alpha' \(registered in-process\) and by library 'alpha'",
    ):
        reg2.register(total, library="alpha")
    assert reg.names() == ["alpha.t", "alpha.u"]


def test_in_process_registration_clashing_with_a_discovered_library(plugins: Any) -> None:
    plugins(("alpha", "fake_alpha", lambda: [total], "alpha-udms"))
    reg = Registry()
    with pytest.raises(DuplicateUdmError) as err:
        reg.register(total, library="alpha")
    assert str(err.value) == (
        "UDM 'alpha.total' is registered twice: by library 'alpha' from distribution "
        "alpha-udms 1.2 and by library 'alpha' (registered in-process); rename one of them"
    )
    with pytest.raises(DuplicateUdmError, match="UDM library 'alpha' is provided twice"):
        reg.register(biggest, library="alpha")


def test_in_process_registration_validates() -> None:
    reg = Registry(autoload=False)

    class NotAUdm:
        pass

    with pytest.raises(UdmDefinitionError, match=r"NotAUdm is not a UDM; derive it"):
        reg.register(NotAUdm, library="nb")
    with pytest.raises(UdmDefinitionError, match=r"Aggregate is a udm.sdk base class"):
        reg.register(Aggregate, library="nb", name="agg")
    with pytest.raises(UdmDefinitionError, match=r"42 \(int\) is not a UDM"):
        reg.register(42, library="nb", name="x")
    with pytest.raises(UdmDefinitionError, match=r"UDM name 'a.b' must be"):
        reg.register(total, library="nb", name="a.b")
    with pytest.raises(ValueError, match=r"library name 'a.b' must be"):
        reg.register(total, library="a.b")
    entry = reg.register(biggest(k=2), library="nb", name="second")
    assert entry.name == "nb.second"
    assert reg.entry("nb.second").signature == "nb.second(k: int = 1)"
    # redefining in a notebook cell
    reg.register(total, library="nb")
    reg.register(biggest, library="nb", name="total", replace=True)
    assert reg.resolve("nb.total") is biggest


def test_unknown_names_list_the_closest_ones() -> None:
    reg = Registry(autoload=False)
    reg.register(total, library="stats", name="median")
    reg.register(total, library="stats", name="mean")
    reg.register(total, library="stats", name="max")
    with pytest.raises(UnknownUdmError) as err:
        reg.resolve("stats.medain")
    assert str(err.value) == (
        "no UDM is registered as 'stats.medain'; did you mean stats.median, stats.mean, "
        "stats.max? "
        "(3 registered; udm-cli list shows them)"
    )
    with pytest.raises(KeyError, match=r"did you mean stats.median\?"):
        reg.resolve("median")


def test_resolve_module_attribute_class_and_instance() -> None:
    reg = Registry(autoload=False)
    assert reg.resolve(f"{__name__}:total") is total
    assert reg.resolve(total) is total
    inst = biggest(k=2)
    assert reg.resolve(inst) is inst
    with pytest.raises(UnknownUdmError, match=r"module '.*test_registry' has no attribute"):
        reg.resolve(f"{__name__}:nothing")
    with pytest.raises(UnknownUdmError, match="cannot import module 'no_such_mod'"):
        reg.resolve("no_such_mod:x")
    with pytest.raises(UdmDefinitionError, match="is not a UDM"):
        reg.resolve(f"{__name__}:FakeDist")


def test_queries_resolve_names_through_the_default_registry(plugins: Any) -> None:
    plugins(("alpha", "fake_alpha", lambda: [total, biggest], "alpha-udms"))
    reset_registry()
    got = (
        Stream.from_cht([(0, 1, 1.0), (1, 2, 2.0), (12, 13, 9.0), (13, 14, 4.0)])
        .tumbling_window(10)
        .aggregate("alpha.biggest", k=2)
        .to_cht(engine="reference")
    )
    assert got == Cht([(0, 10, 1.0), (10, 20, 4.0)])
    with pytest.raises(KeyError, match=r"no UDM is registered as 'alpha.totl'; did you mean"):
        Stream.from_cht([(0, 1, 1.0)]).tumbling_window(10).aggregate("alpha.totl")
    assert get_registry() is get_registry()
    udm = get_registry().resolve("alpha.total")
    assert evaluate([IntervalEvent(0, 1, 3.0)], TumblingWindow(10), udm) == Cht([(0, 10, 3.0)])
