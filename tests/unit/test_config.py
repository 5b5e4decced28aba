from __future__ import annotations

import dataclasses
import logging
import socket
import tomllib
from pathlib import Path

import pytest

from namesrv.cli import main
from namesrv.config import ConfigError, Settings, env_name, load_settings, read_settings, with_overrides
from namesrv.javaprops import format_properties, parse_properties

DEFAULT_TOML = Path(__file__).resolve().parents[2] / "config" / "default.toml"


@pytest.fixture(autouse=True)
def _no_test_runner_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests read the process environment: the runner's own NAMESRV_TEST_LOAD_FACTOR (set by
    make test) would be reported as an unknown option."""
    monkeypatch.delenv("NAMESRV_TEST_LOAD_FACTOR", raising=False)


def test_default_toml_lists_every_option_with_its_default_and_a_comment() -> None:
    text = DEFAULT_TOML.read_text()
    data = tomllib.loads(text)
    defaults = {f.name: f.default for f in dataclasses.fields(Settings)}
    assert data == defaults
    lines = text.splitlines()
    for key in defaults:
        index = next(i for i, line in enumerate(lines) if line.startswith(f"{key} = "))
        assert lines[index - 1].startswith("# "), f"{key} has no comment above it"


def test_loading_default_toml_gives_the_defaults() -> None:
    assert load_settings(DEFAULT_TOML, environ={}) == Settings()


def test_precedence_defaults_file_env(tmp_path: Path) -> None:
    cfg = tmp_path / "n.toml"
    cfg.write_text('httpPort = 8181\nremotingPort = 9999\nnamespace = "prod"\n')
    env = {"NAMESRV_REMOTING_PORT": "19876", "REDIS_URL": "redis://r:6379/0"}
    s = load_settings(cfg, environ=env)
    assert (s.httpPort, s.remotingPort, s.namespace, s.redisUrl) == (8181, 19876, "prod", "redis://r:6379/0")
    assert s.defaultBrokerTimeoutMillis == 120000
    s = load_settings(cfg, environ={**env, "NAMESRV_REDIS_URL": "redis://wins:1/0"})
    assert s.redisUrl == "redis://wins:1/0"


def test_env_names_are_upper_snake() -> None:
    assert env_name("httpPort") == "NAMESRV_HTTP_PORT"
    assert env_name("orderMessageEnable") == "NAMESRV_ORDER_MESSAGE_ENABLE"
    assert env_name("redisUrl") == "NAMESRV_REDIS_URL"


def test_java_properties_file_migrates(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    cfg = tmp_path / "namesrv.properties"
    cfg.write_text(
        "# from a Java NameServer\nlistenPort=9877\nbindAddress : 10.0.0.1\n"
        "orderMessageEnable=true\nserverWorkerThreads=8\nmadeUpKey=1\n"
        "scanNotActiveBrokerInterval 7000\n"
    )
    with caplog.at_level(logging.INFO, logger="namesrv.config"):
        s = load_settings(cfg, environ={})
    assert (s.remotingPort, s.listenHost, s.orderMessageEnable, s.scanNotActiveBrokerInterval) == (
        9877,
        "10.0.0.1",
        True,
        7000,
    )
    assert "unknown key 'madeUpKey' ignored" in caplog.text
    assert "serverWorkerThreads is a Java NameServer option with no effect here" in caplog.text


def test_ignored_keys_and_unknown_variables_are_reported(tmp_path: Path) -> None:
    cfg = tmp_path / "namesrv.properties"
    cfg.write_text("rocketmqHome=/opt/rmq\nkvConfigPath=/x\nserverWorkerThreads=8\nlistenPrt=1\n")
    env = {"NAMESRV_HTTP_PROT": "1", "NAMESRV_ADDR": "ns:9876", "NAMESRV_HTTP_PORT": "8181", "HOME": "/"}
    settings, notices = read_settings(cfg, environ=env)
    assert settings.httpPort == 8181
    src, typo = f"config {cfg}", "environment NAMESRV_HTTP_PROT is not an option; ignored"
    no_effect = "is a Java NameServer option with no effect here; ignored"
    assert notices == [
        (logging.INFO, f"{src}: rocketmqHome {no_effect}"),
        (logging.INFO, f"{src}: kvConfigPath {no_effect}"),
        (logging.INFO, f"{src}: serverWorkerThreads {no_effect}"),
        (logging.WARNING, f"{src}: unknown key 'listenPrt' ignored (did you mean listenHost?)"),
        (logging.WARNING, f"{typo} (did you mean NAMESRV_HTTP_PORT?)"),
    ]


def test_print_config_reports_ignored_keys_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = tmp_path / "namesrv.properties"
    cfg.write_text("kvConfigPath=/x\n")
    monkeypatch.setenv("NAMESRV_REMOTNG_PORT", "1")
    assert main(["-c", str(cfg), "-p"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f"namesrv: config {cfg}: kvConfigPath is a Java NameServer option with no effect here; ignored",
        "namesrv: environment NAMESRV_REMOTNG_PORT is not an option; ignored "
        "(did you mean NAMESRV_REMOTING_PORT?)",
    ]


def test_serving_logs_ignored_keys_once_logging_is_configured(
    tmp_path: Path, redis_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The notices are read before logging is configured: they must still reach the log, INFO
    ones included. The HTTP port is taken, so the worker stops right after start-up."""
    cfg = tmp_path / "namesrv.properties"
    cfg.write_text("rocketmqHome=/opt/rmq\n")
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    with socket.socket() as taken, socket.socket() as free:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        free.bind(("127.0.0.1", 0))
        remoting_port = free.getsockname()[1]
        free.close()
        for name, value in {
            "NAMESRV_REDIS_URL": redis_url,
            "NAMESRV_LISTEN_HOST": "127.0.0.1",
            "NAMESRV_HTTP_PORT": str(taken.getsockname()[1]),
            "NAMESRV_REMOTING_PORT": str(remoting_port),
            "NAMESRV_NAMESPACE": "cli-notices",
        }.items():
            monkeypatch.setenv(name, value)
        try:
            assert main(["-c", str(cfg)]) == 1
        finally:
            root.handlers[:], _ = saved
            root.setLevel(saved[1])
    err = capsys.readouterr().err
    assert f"INFO    namesrv.config: config {cfg}: rocketmqHome is a Java NameServer option" in err
    assert "namesrv: cannot start: cannot listen on 127.0.0.1:" in err


@pytest.mark.parametrize(
    ("content", "suffix", "message"),
    [
        ('httpPort = "eighty"\n', ".toml", "httpPort: invalid value 'eighty'"),
        ("httpPort = 70000\n", ".toml", "httpPort: 70000 from"),
        ("orderMessageEnable = 3\n", ".toml", "orderMessageEnable: invalid value 3"),
        ('logFormat = "xml"\n', ".toml", "logFormat: 'xml' from"),
        ('[redis]\nurl = "x"\n', ".toml", "tables are not used"),
        ("httpPort = \n", ".toml", "not valid TOML"),
        ("enableControllerInNamesrv=true\n", ".properties", "enableControllerInNamesrv: a stateless fleet"),
        ("scanNotActiveBrokerInterval=-5\n", ".properties", "scanNotActiveBrokerInterval: -5 from"),
    ],
)
def test_bad_values_name_the_key(tmp_path: Path, content: str, suffix: str, message: str) -> None:
    cfg = tmp_path / f"bad{suffix}"
    cfg.write_text(content)
    with pytest.raises(ConfigError, match=message):
        load_settings(cfg, environ={})


def test_bad_env_value_names_the_variable() -> None:
    with pytest.raises(ConfigError, match="httpPort: invalid value 'x' from environment NAMESRV_HTTP_PORT"):
        load_settings(None, environ={"NAMESRV_HTTP_PORT": "x"})


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_settings(tmp_path / "nope.toml", environ={})


def test_print_config_shows_effective_values_and_embedded_mode(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NAMESRV_HTTP_PORT", "8123")
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.delenv("NAMESRV_REDIS_URL", raising=False)
    assert main(["-p"]) == 0
    out = capsys.readouterr().out
    assert "httpPort=8123\n" in out
    assert "orderMessageEnable=false\n" in out
    assert "embedded redis-server will be started" in out


def test_cli_reports_config_errors(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NAMESRV_REMOTING_PORT", "-1")
    assert main(["-p"]) == 2
    assert "configuration error: remotingPort: -1" in capsys.readouterr().err


def test_overrides_touch_only_dynamic_keys() -> None:
    s = with_overrides(Settings(), {"enableTopicList": "false", "httpPort": "1"}, "test")
    assert s.enableTopicList is False and s.httpPort == 8080


def test_properties_parsing_follows_java() -> None:
    text = (
        "# comment\n! also\nkey1=value1\nkey2 : value2\nkey3 value3\n  key4=multi\\\n   line\n"
        "key\\ 5=sp\\u00e9cial\\tTab\nempty=\n{key=value}\n"
    )
    assert parse_properties(text) == {
        "key1": "value1",
        "key2": "value2",
        "key3": "value3",
        "key4": "multiline",
        "key 5": "sp\u00e9cial\tTab",
        "empty": "",
        "{key": "value}",
    }
    assert format_properties({"b": "2", "a": "1"}) == "a=1\nb=2\n"


def test_default_toml_is_rendered_from_the_settings() -> None:
    """config/default.toml is generated from the Settings dataclass: `make config` rewrites it."""
    from namesrv.config import render_default_toml

    assert DEFAULT_TOML.read_text() == render_default_toml()


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"NAMESRV_REDIS_WRITE_REPLICAS": "1"},
            "redisWriteReplicas: the embedded Redis (no redisUrl) has no replicas; set it to 0",
        ),
        (
            {"NAMESRV_REDIS_WRITE_REPLICAS": "1", "REDIS_URL": "redis+cluster://127.0.0.1:7000"},
            "redisWriteReplicas: not supported with Redis Cluster (redis+cluster://); set 0",
        ),
    ],
)
def test_write_replicas_no_write_could_meet_are_refused(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as refused:
        read_settings(environ=env)
    assert str(refused.value) == message


def test_write_replicas_with_a_sentinel_url_are_accepted() -> None:
    env = {"NAMESRV_REDIS_WRITE_REPLICAS": "2", "REDIS_URL": "redis+sentinel://127.0.0.1:26379/mymaster"}
    settings, _ = read_settings(environ=env)
    assert (settings.redisWriteReplicas, settings.redisWriteReplicaTimeoutMillis) == (2, 500)


def test_write_replicas_from_sentinel_need_a_sentinel_url() -> None:
    with pytest.raises(ConfigError) as refused:
        read_settings(environ={"NAMESRV_REDIS_WRITE_REPLICAS": "-1", "REDIS_URL": "redis://127.0.0.1:6379/0"})
    assert str(refused.value) == (
        "redisWriteReplicas: -1 counts the replicas Sentinel reports: needs redis+sentinel://"
    )
    env = {"NAMESRV_REDIS_WRITE_REPLICAS": "-1", "REDIS_URL": "redis+sentinel://127.0.0.1:26379/mymaster"}
    assert read_settings(environ=env)[0].redisWriteReplicas == -1


@pytest.mark.parametrize(
    "url", ["https://reports.example.com/route-history/report.html", "http://10.0.0.5:8000/", "/reports/"]
)
def test_console_report_url_takes_a_web_address_or_a_path(url: str) -> None:
    settings, _ = read_settings(environ={"NAMESRV_CONSOLE_REPORT_URL": url})
    assert settings.consoleReportUrl == url


@pytest.mark.parametrize(
    "url",
    [
        "javascript:alert(1)",
        "file:///srv/report/report.md",
        "report/report.md",
        "//evil.example/x",
        "https://",
    ],
)
def test_console_report_url_refuses_what_is_not_a_web_link(url: str) -> None:
    with pytest.raises(ConfigError) as refused:
        read_settings(environ={"NAMESRV_CONSOLE_REPORT_URL": url})
    assert str(refused.value) == (
        f"consoleReportUrl: {url!r} is neither an http(s) URL nor a path starting with '/'"
    )


def test_console_report_url_is_bounded() -> None:
    with pytest.raises(ConfigError) as refused:
        read_settings(environ={"NAMESRV_CONSOLE_REPORT_URL": "https://example.com/" + "r" * 2048})
    assert str(refused.value) == "consoleReportUrl: longer than 2048 characters"
