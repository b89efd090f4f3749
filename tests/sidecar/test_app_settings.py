"""Per-app settings of the reference engine (engine-rules R11.11 scopes, R11.14, R11.15): which app a
call reaches, which policy an app loads, and which payload limit an instance is weighed against."""

from __future__ import annotations

from fake_sidecar.engine.config import EngineConfig, PolicyRule

DENY_ALL = (PolicyRule(callers=frozenset({"nobody"}), workflows=("*",)),)


def test_a_call_reaches_an_app_of_the_callers_namespace_only() -> None:
    cfg = EngineConfig(apps=("caller", "near", "far"), namespaces=(("far", "other"),))
    assert cfg.route_key(caller="", target="near") == "near"
    far = cfg.route_key(caller="", target="far")
    assert far not in ("far", "") and far not in cfg.apps  # a key no app serves: the work waits (R11.5)
    # From inside the other namespace it is found, and the default app is not.
    assert cfg.route_key(caller="far", target="far") == "far"
    assert cfg.route_key(caller="far", target="caller") != ""
    assert cfg.route_key(caller="", target="nowhere") == "nowhere"  # unknown apps are unchanged


def test_a_policy_binds_only_the_apps_its_scopes_name() -> None:
    shared = (("in", DENY_ALL), ("out", DENY_ALL))
    cfg = EngineConfig(apps=("caller", "in", "out"), access_policies=shared,
                       policy_scopes=(("in", ("in",)), ("out", ("in",))))
    assert not cfg.allows(caller="caller", target="in", kind="workflow", name="w")
    assert cfg.allows(caller="caller", target="out", kind="workflow", name="w")
    unscoped = EngineConfig(apps=("caller", "in", "out"), access_policies=shared,
                            policy_scopes=(("out", ()),))  # no scopes: every app holding it loads it
    assert not unscoped.allows(caller="caller", target="out", kind="workflow", name="w")


def test_an_apps_own_limit_wins_over_the_engines() -> None:
    cfg = EngineConfig(apps=("parent", "small"), max_payload=4_000_000, app_max_payload=(("small", 2000),))
    assert cfg.payload_limit("small").limit == 2000
    assert cfg.payload_limit("").limit == 4_000_000  # the default app, "parent"
    assert EngineConfig(app_max_payload=(("small", 2000),)).payload_limit("small") is None  # no apps: unused
