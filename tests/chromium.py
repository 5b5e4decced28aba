"""A headless Chromium driven over the DevTools protocol (aiohttp's websocket client): just what
the console test needs (navigate, evaluate, screenshot)."""

from __future__ import annotations

import asyncio
import base64
import itertools
import shutil
import tempfile
from pathlib import Path
from typing import Any

import aiohttp

from tests.polling import scaled

SKIP_REASON = "no Chromium at /usr/bin/chromium: `make chromium` installs it (as root)"


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


class Browser:
    def __init__(
        self,
        proc: asyncio.subprocess.Process,
        profile: Path,
        ws: aiohttp.ClientWebSocketResponse,
        session: aiohttp.ClientSession,
    ) -> None:
        self.proc, self.profile, self.ws, self.session = proc, profile, ws, session
        self._ids = itertools.count(1)

    @classmethod
    async def start(cls, executable: str) -> Browser:
        profile = Path(tempfile.mkdtemp(prefix="namesrv-chromium-"))
        proc = await asyncio.create_subprocess_exec(
            executable,
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--remote-debugging-port=0",
            f"--user-data-dir={profile}",
            "--window-size=1400,900",
            "about:blank",
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        port_file = profile / "DevToolsActivePort"
        loop = asyncio.get_running_loop()
        deadline = loop.time() + scaled(30)
        while not port_file.exists() or not port_file.read_text().strip():
            if loop.time() > deadline or proc.returncode is not None:
                proc.kill()
                raise RuntimeError("chromium did not open its DevTools port")
            await asyncio.sleep(0.1)
        port = port_file.read_text().split()[0]
        session = aiohttp.ClientSession()
        async with session.get(f"http://127.0.0.1:{port}/json/list") as resp:
            pages = [t for t in await resp.json() if t["type"] == "page"]
        ws = await session.ws_connect(pages[0]["webSocketDebuggerUrl"], max_msg_size=64 << 20)
        return cls(proc, profile, ws, session)

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        call_id = next(self._ids)
        await self.ws.send_json({"id": call_id, "method": method, "params": params})
        while True:
            message = await asyncio.wait_for(self.ws.receive_json(), scaled(30))
            if message.get("id") == call_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                result: dict[str, Any] = message.get("result", {})
                return result

    async def evaluate(self, expression: str) -> Any:
        reply = await self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return reply["result"].get("value")

    async def screenshot(self, path: Path) -> None:
        reply = await self.call("Page.captureScreenshot", format="png")
        png = base64.b64decode(reply["data"])
        await asyncio.to_thread(_write, path, png)

    async def close(self) -> None:
        await self.ws.close()
        await self.session.close()
        self.proc.terminate()
        try:
            await asyncio.wait_for(self.proc.wait(), 10)
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
