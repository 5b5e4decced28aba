"""The chart's ACL values: plain_acl.yml from an existing Secret, mounted where it can change."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from namesrv.config import Settings, load_settings
from namesrv.security.policy import Authorizer
from tests.helm.chart import render, render_error


def test_without_acl_no_secret_is_mounted_and_admin_requests_come_from_loopback_only() -> None:
    rendered = render()
    assert "acl" not in {m["name"] for m in rendered.container["volumeMounts"]}
    config = tomllib.loads(rendered.config_toml)
    assert (config["aclEnable"], config["aclFile"], config["aclMode"]) == (False, "", "enforcing")
    assert config["adminAllowFrom"] == "127.0.0.0/8,::1/128"
    assert Settings().adminAllowFrom.startswith("127.0.0.0/8,::1/128,10.0.0.0/8")  # make run: Java's


ADMIN = [100, 102, 205, 216, 217, 318, 327]
# Brokers' own requests (register, unregister, heartbeat, query data version) and the reads of
# clients and mqadmin (routes, cluster, KV, topic lists, config).
NOT_ADMIN = [103, 104, 904, 322, 105, 106, 101, 219, 206, 224, 304, 311, 312, 313, 319, 326]


@pytest.mark.parametrize("pod", ["10.244.1.7", "172.17.0.5", "192.168.3.4", "100.64.0.9", "fd00::12"])
def test_the_chart_default_keeps_every_pod_from_admin_requests_but_not_from_the_rest(
    tmp_path: Path, pod: str
) -> None:
    path = tmp_path / "namesrv.toml"
    path.write_text(render().config_toml, encoding="utf-8")
    authorizer = Authorizer.from_settings(load_settings(path, environ={}), CollectorRegistry())
    peer = f"[{pod}]:40000" if ":" in pod else f"{pod}:40000"
    assert [authorizer.decide(code, {}, None, peer).allowed for code in ADMIN] == [False] * len(ADMIN)
    assert all(authorizer.decide(code, {}, None, peer).allowed for code in NOT_ADMIN)
    for local in ("127.0.0.1:5000", "[::1]:5000"):  # kubectl exec, kubectl port-forward
        assert all(authorizer.decide(code, {}, None, local).allowed for code in ADMIN)


def test_acl_secret_is_mounted_read_only_and_turns_acl_on(tmp_path: Path) -> None:
    rendered = render({"acl": {"existingSecret": "namesrv-acl"}, "config": {"aclMode": "permissive"}})
    mounts = {m["name"]: m for m in rendered.container["volumeMounts"]}
    # a directory, not a subPath: the kubelet updates it in place and the workers reload it
    assert mounts["acl"] == {"name": "acl", "mountPath": "/etc/namesrv-acl", "readOnly": True}
    volumes = {v["name"]: v for v in rendered.deployment["spec"]["template"]["spec"]["volumes"]}
    assert volumes["acl"] == {
        "name": "acl",
        "secret": {
            "secretName": "namesrv-acl",
            "defaultMode": 0o440,
            "items": [{"key": "plain_acl.yml", "path": "plain_acl.yml"}],
        },
    }
    config = tomllib.loads(rendered.config_toml)
    assert (config["aclEnable"], config["aclFile"], config["aclMode"]) == (
        True,
        "/etc/namesrv-acl/plain_acl.yml",
        "permissive",
    )
    assert rendered.all("Secret") == []  # the chart never creates one
    path = tmp_path / "namesrv.toml"
    path.write_text(rendered.config_toml, encoding="utf-8")
    loaded = load_settings(path, environ={})
    assert (loaded.aclEnable, loaded.aclFile, loaded.aclMode) == (
        True,
        "/etc/namesrv-acl/plain_acl.yml",
        "permissive",
    )


def test_the_secret_key_is_configurable() -> None:
    rendered = render({"acl": {"existingSecret": "mq-acl", "existingSecretKey": "acl.yaml"}})
    volumes = {v["name"]: v for v in rendered.deployment["spec"]["template"]["spec"]["volumes"]}
    assert volumes["acl"]["secret"]["items"] == [{"key": "acl.yaml", "path": "plain_acl.yml"}]


def test_acl_enabled_without_a_file_fails_rendering() -> None:
    message = render_error({"config": {"aclEnable": True}})
    assert "namesrv: config.aclEnable needs the ACL file: set acl.existingSecret" in message


def test_acl_secret_and_an_explicit_acl_file_conflict() -> None:
    message = render_error({"acl": {"existingSecret": "a"}, "config": {"aclFile": "/x/plain_acl.yml"}})
    assert "set acl.existingSecret or config.aclFile, not both" in message


def test_schema_refuses_an_unknown_acl_mode() -> None:
    message = render_error({"config": {"aclMode": "audit"}})
    assert "at '/config/aclMode'" in message


def test_notes_say_how_to_run_admin_writes() -> None:
    notes = render().notes
    assert "are accepted from loopback only (config.adminAllowFrom)" in notes
    assert "kubectl -n mq exec deploy/rel-namesrv -- namesrv admin wipe-write-perm <brokerName>" in notes
    assert "kubectl -n mq port-forward deploy/rel-namesrv 9876:9876" in notes
    opened = render({"config": {"adminAllowFrom": "10.0.0.0/8"}}).notes
    assert "are accepted from config.adminAllowFrom: 10.0.0.0/8" in opened
    acl = render({"acl": {"existingSecret": "namesrv-acl"}}).notes
    assert "need an admin account of the ACL" in acl
