"""Every Lua script follows the library's conventions (lua/README.md)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from namesrv.store.scripts import ScriptError, discover, lua_root, parse_script

LUA = Path(__file__).resolve().parents[2] / "lua"
SCRIPT_FILES = sorted(p for p in LUA.glob("*.lua"))


def test_every_script_is_discovered_and_documented_in_the_readme() -> None:
    scripts = discover()
    readme = (LUA / "README.md").read_text()
    assert {p.name.rsplit("-", 1)[0] for p in SCRIPT_FILES} == set(scripts)
    for name, script in scripts.items():
        assert f"`{name}-{script.num_keys}`" in readme, f"{name} missing from lua/README.md"


@pytest.mark.parametrize("path", SCRIPT_FILES, ids=lambda p: p.name)
def test_header_lists_exactly_the_keys_its_name_says(path: Path) -> None:
    declared = int(path.stem.rsplit("-", 1)[1])
    header = re.match(r"--\[\[(.*?)\]\]", path.read_text(), re.S)
    assert header, "script must open with a --[[ ]] header"
    listed = [int(i) for i in re.findall(r"^\s*KEYS\[(\d+)\]", header.group(1), re.M)]
    assert listed == list(range(1, declared + 1))


@pytest.mark.parametrize("path", SCRIPT_FILES, ids=lambda p: p.name)
def test_body_uses_only_declared_keys_unless_variadic(path: Path) -> None:
    script = parse_script(path.name, path.read_text(), LUA / "includes")
    body = script.source.split("]]", 1)[1]
    used = {int(i) for i in re.findall(r"KEYS\[(\d+)\]", body)}
    assert used <= set(range(1, script.num_keys + 1)), f"uses KEYS{sorted(used)}"
    if re.search(r"KEYS\[[^\]0-9]", body):  # computed index: only for variadic scripts
        assert script.variadic, "computes a KEYS index but is not marked @keys-variadic"


@pytest.mark.parametrize("path", SCRIPT_FILES, ids=lambda p: p.name)
def test_no_key_name_is_built_inside_lua(path: Path) -> None:
    body = path.read_text().split("]]", 1)[1]
    assert "{" + "ns}" not in body
    assert not re.search(r"['\"]\{[^}]*\}:", body), "key prefix built inside Lua"


def test_time_comes_only_from_redis() -> None:
    for path in [*SCRIPT_FILES, *(LUA / "includes").glob("*.lua")]:
        text = path.read_text()
        assert "os.time" not in text and "os.clock" not in text, path.name


def test_packaged_root_falls_back_to_the_checkout() -> None:
    assert Path(str(lua_root())).resolve() in (LUA.resolve(), Path(str(lua_root())).resolve())
    assert (Path(str(lua_root())) / "includes" / "common.lua").is_file()


@pytest.mark.parametrize(
    ("name", "source", "message"),
    [
        ("bad_name.lua", "--[[ KEYS ARGV Returns ]]", "name must be"),
        ("noHeader-1.lua", "return 1", "must open with"),
        (
            "wrongKeys-2.lua",
            "--[[\n  KEYS[1] a\n  ARGV Returns\n]]",
            "header lists KEYS [1], the name says 2",
        ),
        ("noArgv-0.lua", "--[[\n  Returns: 1\n]]", "no ARGV section"),
        (
            "missingInclude-0.lua",
            '--[[\n ARGV Returns\n]]\n--- @include "nope"\n',
            "include 'nope' not found",
        ),
    ],
)
def test_loader_rejects_bad_scripts(name: str, source: str, message: str) -> None:
    with pytest.raises(ScriptError, match=re.escape(message)):
        parse_script(name, source, LUA / "includes")


def test_includes_are_expanded_once() -> None:
    source = '--[[\n ARGV Returns\n]]\n--- @include "common"\n--- @include "common"\n'
    flat = parse_script("twice-0.lua", source, LUA / "includes").source
    assert flat.count("local function nowMs()") == 1
    assert "(already included: common)" in flat
