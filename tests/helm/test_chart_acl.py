"""The chart's ACL values: plain_acl.yml from an existing Secret, mounted where it can change."""

from __future__ import annotations

import tomllib
from pathlib import Path

from namesrv.config import load_settings
from tests.helm.chart import render, render_error


def test_without_acl_no_secret_is_mounted_and_admin_allow_from_is_the_default() -> None:
    rendered = render()
    assert "acl" not in {m["name"] for m in rendered.container["volumeMounts"]}
    config = tomllib.loads(rendered.config_toml)
    assert (config["aclEnable"], config["aclFile"], config["aclMode"]) == (False, "", "enforcing")
    assert config["adminAllowFrom"] == (
        "127.0.0.0/8,::1/128,10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,100.64.0.0/10,fc00::/7"
    )


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
