"""The embedded broker process: amqtt on 127.0.0.1 only, stopped cleanly by SIGINT or SIGTERM.

Run as `python -m mam.broker.serve --port N`; `mam broker start` does that detached.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal


def broker_config(port: int, host: str = "127.0.0.1") -> dict[str, object]:
    return {
        "listeners": {"default": {"type": "tcp", "bind": f"{host}:{port}", "max_connections": 0}},
        "plugins": {"amqtt.plugins.authentication.AnonymousAuthPlugin": {"allow_anonymous": True}},
    }


async def serve(port: int, host: str = "127.0.0.1") -> None:
    from amqtt.broker import Broker

    broker = Broker(broker_config(port, host))
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
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    asyncio.run(serve(args.port, args.host))


if __name__ == "__main__":
    main()
