"""The delegate request is declared once (mam/jobs/request.py `OPTIONS`): `mam job delegate`'s options, the MCP
tool `job_delegate`'s input schema, the `DelegateRequest` fields and the skill's SKILL.md all agree with it, and a
value given on the CLI or over MCP reaches the request under its one name."""

from __future__ import annotations

import asyncio
import dataclasses
import re
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from mam.cli import job as job_cli
from mam.errors import UsageError
from mam.jobs.delegate import DelegateRequest, delegate_request
from mam.jobs.request import OPTIONS
from mam.mcp.server import build
from mam.node.front import delegate_args
from mam.settings import KEYS_BY_NAME

ROOT = Path(__file__).resolve().parents[2]
CLI_OWN = {"--workspace", "--brief-file", "--follow", "--json", "--help"}  # the command's own, not the request's
INTERNAL = {"follow_s", "taking_from"}  # DelegateRequest fields that library callers set, never options
JSON_TYPE = {str: "string", bool: "boolean", int: "integer", float: "number"}
# One value per option, none of them its default: each must arrive in the request as given.
SAMPLE: dict[str, Any] = {
    "target": "tmux:w",
    "brief": "do it",
    "timeout_s": 12.5,
    "start_deadline_s": 7.0,
    "heartbeat_s": 3.0,
    "parent_job": "p-1",
    "job_id": "j-1",
    "idempotency_key": "k-1",
    "dispatch_wait_s": 0.0,
    "max_tokens": 5,
    "estimate_tokens": 0,
    "allow_insecure_broker": True,
    "kind": "loop-review",
    "detach": True,
}


def test_every_option_has_a_sample_and_every_request_field_is_an_option_or_internal():
    fields = {f.name for f in dataclasses.fields(DelegateRequest)}
    assert {o.name for o in OPTIONS if o.request} | INTERNAL == fields
    assert {o.name for o in OPTIONS if o.request} == set(SAMPLE), "give the new option a value in SAMPLE"
    for o in OPTIONS:
        assert o.kind in JSON_TYPE, o
        assert o.mcp or o.flag, f"{o.name} is offered nowhere"
        if o.setting:
            assert o.setting in KEYS_BY_NAME and o.setting in o.default, o


def test_the_cli_options_are_the_declared_ones():
    params = {p.name: p for p in job_cli.delegate.params if isinstance(p, click.Option)}
    flags = {f for p in params.values() for f in p.opts if f.startswith("--")}
    assert flags - CLI_OWN == {o.flag for o in OPTIONS if o.flag}
    for o in OPTIONS:
        if not o.flag:
            continue
        p = params[o.name]
        required = o.required and o.name != "brief"  # the CLI may read it from --brief-file instead
        assert p.opts[0] == o.flag and p.help == o.help_text and p.required == required, o.name
        assert p.is_flag == (o.kind is bool), o.name
        if o.kind is int:
            assert isinstance(p.type, click.IntRange) and p.type.min == o.least, o.name


def test_the_mcp_schema_is_the_declared_one():
    tools = asyncio.run(build(None, poll_s=1).list_tools())  # type: ignore[arg-type]
    schema = next(t for t in tools if t.name == "job_delegate").input_schema
    props = schema["properties"]
    assert set(props) == {o.name for o in OPTIONS if o.mcp} | {"wait"}
    assert schema["required"] == [o.name for o in OPTIONS if o.mcp and o.required]
    for o in OPTIONS:
        if not o.mcp:
            continue
        prop = props[o.name]
        assert prop["description"] == o.help_text, o.name
        types = {prop["type"]} if "type" in prop else {a["type"] for a in prop["anyOf"]}
        assert JSON_TYPE[o.kind] in types, (o.name, types)


def test_the_skill_documents_every_cli_option_and_its_default_setting():
    doc = (ROOT / "skills/multi-agent-mux-delegate-job/SKILL.md").read_text(encoding="utf-8")
    rows = {m.group(1): line for line in doc.splitlines() if (m := re.match(r"\| `(--[a-z-]+)", line))}
    for o in OPTIONS:
        if o.flag:
            assert o.flag in rows, f"{o.flag} is not in SKILL.md's Options"
            assert not o.setting or o.setting in rows[o.flag], f"SKILL.md's {o.flag} row does not name {o.setting}"


class Caught(Exception):
    def __init__(self, values: dict[str, Any]) -> None:
        self.values = values


def test_every_cli_option_reaches_the_request():
    """`mam job delegate`'s command line is parsed from the same declaration (mam.node.front), into the request."""
    args = []
    for o in OPTIONS:
        if o.flag and o.name in SAMPLE:
            args += [o.flag] if o.kind is bool else [o.flag, str(SAMPLE[o.name])]
    values, own, _ws = delegate_args(args)
    assert own == {}
    req = delegate_request(**values)
    assert {name: getattr(req, name) for name in SAMPLE} == SAMPLE


class Service:
    """Records what the tool passes on, then refuses (the tool's error is not this test's concern)."""

    def __init__(self) -> None:
        self.given: dict[str, Any] = {}

    def start_delegation(self, **given: Any) -> None:
        self.given = given
        raise UsageError("caught")


def test_every_mcp_parameter_reaches_the_request():
    service = Service()
    sent = {o.name: SAMPLE[o.name] for o in OPTIONS if o.mcp and o.name in SAMPLE}
    result = asyncio.run(build(service, poll_s=1).call_tool("job_delegate", sent))  # type: ignore[arg-type]
    assert result.is_error and service.given, result  # type: ignore[union-attr]
    req = delegate_request(**service.given)
    assert {name: getattr(req, name) for name in sent} == sent


def test_values_outside_an_option_are_refused_naming_its_flag():
    for name, bad in (("max_tokens", 0), ("estimate_tokens", -1), ("timeout_s", 0.0), ("dispatch_wait_s", -1.0)):
        with pytest.raises(UsageError, match=next(o.flag for o in OPTIONS if o.name == name)):
            delegate_request(target="w", brief="x", **{name: bad})


def test_a_request_handed_to_the_node_arrives_as_it_was():
    """The CLI, the MCP server and a loop hand a delegation to the node as the protocol's typed request: every
    option survives the wire (mam.node.wire), a brief that looks like options included."""
    from mam.node.wire import Frames, frame
    from mam.protocol import check_request, request

    sent = {**SAMPLE, "brief": "--json -x\n--detach", "dedup": False}
    got = Frames().feed(frame(request("delegate", sent, {"MAM_HEARTBEAT_S": "3"})))
    op, args, env = check_request(got[0])
    assert op == "delegate" and env == {"MAM_HEARTBEAT_S": "3"}
    assert delegate_request(**args) == delegate_request(**sent)


def _leaf_commands() -> list[tuple[str, click.Command]]:
    import importlib

    from mam.cli import COMMANDS

    found: list[tuple[str, click.Command]] = []

    def walk(cmd: click.Command, path: str) -> None:
        if isinstance(cmd, click.Group):
            for name in cmd.list_commands(click.Context(cmd)):
                sub = cmd.get_command(click.Context(cmd), name)
                if sub is not None:
                    walk(sub, f"{path} {name}")
        else:
            found.append((path, cmd))

    for name, (module, attr, _help) in COMMANDS.items():
        walk(getattr(importlib.import_module(module), attr), name)
    return found


def test_a_missing_required_option_is_a_usage_error_naming_it():
    """click (8.2 on) takes an explicit `default=None` as a value: a required option declared with one was never
    reported missing and reached the command as None (`mam session create` without --role: "invalid role None")."""
    commands = [(path, cmd) for path, cmd in _leaf_commands() if any(p.required for p in cmd.params)]
    assert len(commands) > 10
    for path, cmd in commands:
        with pytest.raises(click.MissingParameter):
            cmd.make_context(path, [])
    from mam.cli import cli

    result = CliRunner().invoke(cli, ["session", "create", "--agent", "demo", "--session", "x"])
    assert result.exit_code == 2 and "Missing option '--role'" in result.output, result.output
