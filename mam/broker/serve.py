"""The embedded broker process: amqtt on 127.0.0.1 only, stopped cleanly by SIGINT or SIGTERM.

Run as `python -m mam.broker.serve --port N --username U --password-file F`; `mam broker start`
does that detached, with the workspace's credentials (mam/broker/credentials.py), so only clients
that present them may connect. Without `--password-file` it accepts anyone (tests' private brokers).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal


def broker_config(
    port: int, host: str = "127.0.0.1", *, username: str = "", password_file: str = ""
) -> dict[str, object]:
    if password_file:
        plugins: dict[str, object] = {
            "mam.broker.auth.WorkspaceAuthPlugin": {"username": username, "password_file": password_file}
        }
    else:
        plugins = {"amqtt.plugins.authentication.AnonymousAuthPlugin": {"allow_anonymous": True}}
    return {
        "listeners": {"default": {"type": "tcp", "bind": f"{host}:{port}", "max_connections": 0}},
        "plugins": plugins,
    }


async def serve(port: int, host: str = "127.0.0.1", *, username: str = "", password_file: str = "") -> None:
    from amqtt.broker import Broker

    broker = Broker(broker_config(port, host, username=username, password_file=password_file))
    await broker.start()
    logging.getLogger("mam.broker").warning("embedded broker listening on %s:%d", host, port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await broker.shutdown()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m mam.broker.serve")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1", choices=["127.0.0.1", "::1", "localhost"])
    parser.add_argument("--username", default="")
    parser.add_argument("--password-file", default="", help="Accept only --username with the password in this file.")
    args = parser.parse_args(argv)
    if bool(args.username) != bool(args.password_file):
        parser.error("--username and --password-file go together")
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    asyncio.run(serve(args.port, args.host, username=args.username, password_file=args.password_file))


if __name__ == "__main__":
    main()
