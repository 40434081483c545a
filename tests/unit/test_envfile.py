"""The `.mam.env` parser: syntax, error messages that name file and line, and property tests."""

from __future__ import annotations

import string
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mam.envfile import parse_env_file, parse_env_text
from mam.errors import ConfigError


def parse(text: str) -> dict[str, str]:
    return {e.key: e.value for e in parse_env_text(text)}


def test_blank_lines_and_comments_are_skipped():
    text = "\n# a comment\n   # indented comment\n\nA=1\n\t\nB=2 # trailing comment\n"
    assert parse(text) == {"A": "1", "B": "2"}


def test_line_numbers_are_recorded():
    entries = parse_env_text("# c\n\nA=1\nB=2\n")
    assert [(e.key, e.line) for e in entries] == [("A", 3), ("B", 4)]


def test_unquoted_values_are_stripped_and_keep_inner_spaces():
    assert parse("A =  hello world  \n") == {"A": "hello world"}


def test_hash_without_a_space_before_it_is_part_of_the_value():
    assert parse("A=a#b\nB=http://h/#frag # comment\n") == {"A": "a#b", "B": "http://h/#frag"}


def test_equals_signs_after_the_first_belong_to_the_value():
    assert parse("A=x=y==z\n") == {"A": "x=y==z"}


def test_empty_values():
    assert parse("A=\nB=''\nC=\"\"\nD= # nothing\n") == {"A": "", "B": "", "C": "", "D": ""}


def test_single_quotes_are_literal():
    assert parse("A='a \\n b # not a comment \"x\"'\n") == {"A": 'a \\n b # not a comment "x"'}


def test_double_quotes_understand_escapes():
    text = 'A="tab\\there \\"q\\" back\\\\slash \\$HOME nl\\nx"\n'
    assert parse(text) == {"A": 'tab\there "q" back\\slash $HOME nl\nx'}


def test_unknown_escape_keeps_the_backslash():
    assert parse('A="a\\qb"\n') == {"A": "a\\qb"}


def test_inline_comment_after_a_quoted_value():
    assert parse("A='x y' # note\nB=\"p#q\"   #note\n") == {"A": "x y", "B": "p#q"}


def test_export_prefix_is_accepted():
    assert parse("export A=1\nexport   B='two'\n") == {"A": "1", "B": "two"}


def test_crlf_line_endings(tmp_path: Path):
    f = tmp_path / "crlf.env"
    f.write_bytes(b"A=1\r\nB='2'\r\n")
    assert {e.key: e.value for e in parse_env_file(f)} == {"A": "1", "B": "2"}


def test_later_lines_win():
    assert parse("A=1\nA=2\n") == {"A": "2"}


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ("A=1\nnot a setting\n", 2, "expected KEY=VALUE"),
        ("A=1\n\n1BAD=x\n", 3, "invalid key"),
        ("BAD-KEY=x\n", 1, "invalid key"),
        ("=x\n", 1, "invalid key"),
        ("A='unterminated\n", 1, "unterminated"),
        ('A="unterminated\\"\n', 1, "unterminated"),
        ("# ok\nA='x' trailing\n", 2, "after the closing quote"),
        ("A=it's\n", 1, "stray quote"),
    ],
)
def test_malformed_lines_name_the_file_and_the_line(tmp_path: Path, text: str, line: int, words: str):
    f = tmp_path / "bad.env"
    f.write_text(text)
    with pytest.raises(ConfigError) as info:
        parse_env_file(f)
    message = str(info.value)
    assert f"{f}:{line}:" in message
    assert words in message
    assert info.value.line == line
    assert info.value.path == str(f)


@pytest.mark.parametrize(
    "line",
    [
        "MQTT_PASSWORD hunter2-secret",
        "MQTT_PASSWORD='hunter2-secret' trailing",
        "MQTT_PASSWORD=hunter2-secret'",
        "MQTT_PASSWORD='hunter2-secret",
    ],
)
def test_errors_never_echo_the_value(line: str):
    # A malformed line may hold a password: the message names the place, never the text.
    with pytest.raises(ConfigError) as info:
        parse_env_text(line + "\n", source=".mam.env")
    assert "hunter2" not in str(info.value)
    assert ".mam.env:1:" in str(info.value)


def test_missing_file_is_a_config_error(tmp_path: Path):
    with pytest.raises(ConfigError, match="not found"):
        parse_env_file(tmp_path / "nope.env")


def test_undecodable_file_is_a_config_error(tmp_path: Path):
    f = tmp_path / "latin1.env"
    f.write_bytes(b"A=\xff\xfe\n")
    with pytest.raises(ConfigError, match="cannot read"):
        parse_env_file(f)


# -- property tests --------------------------------------------------------------------------------

KEYS = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,20}", fullmatch=True)
# Printable text (letters, digits, punctuation, symbols, spaces) plus the characters that need care:
# quotes, '#', '=', backslash, '$', and tab/newline that only survive through escapes.
VALUES = st.lists(
    st.one_of(
        st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp")),
        st.sampled_from(list("\"'#=\\$ \t\n") + ["\\n", '\\"', " #", "\\"]),
    ),
    max_size=40,
).map("".join)


def quote(value: str) -> str:
    """Write a value the way a careful writer would: double quotes, escaping what the parser unescapes."""
    escaped = (
        value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t").replace("\r", "\\r")
    )
    return f'"{escaped}"'


@settings(max_examples=300, deadline=None)
@given(key=KEYS, value=VALUES, comment=st.booleans(), export=st.booleans())
def test_double_quoted_values_round_trip(key: str, value: str, comment: bool, export: bool):
    line = ("export " if export else "") + f"{key}={quote(value)}" + (" # a comment" if comment else "")
    entries = parse_env_text(f"# header\n{line}\n")
    assert [(e.key, e.value, e.line) for e in entries] == [(key, value, 2)]


@settings(max_examples=300, deadline=None)
@given(pairs=st.dictionaries(KEYS, VALUES, max_size=8))
def test_whole_files_round_trip(tmp_path_factory: pytest.TempPathFactory, pairs: dict[str, str]):
    f = tmp_path_factory.mktemp("prop") / "x.env"
    f.write_text("".join(f"{k}={quote(v)}\n" for k, v in pairs.items()), encoding="utf-8")
    assert {e.key: e.value for e in parse_env_file(f)} == pairs


@settings(max_examples=500, deadline=None)
@given(
    text=st.lists(st.one_of(st.characters(), st.sampled_from(list("=#'\"\\ \n") + ["export ", "A=", "\r\n"]))).map(
        "".join
    )
)
def test_arbitrary_text_raises_only_config_error(text: str):
    try:
        entries = parse_env_text(text)
    except ConfigError as e:
        assert e.line >= 1
        return
    for entry in entries:
        assert entry.key and entry.line >= 1


@settings(max_examples=200, deadline=None)
@given(value=st.text(alphabet=string.ascii_letters + string.digits + "._-/:@%+,", min_size=1, max_size=30))
def test_plain_unquoted_values_are_taken_as_they_are(value: str):
    assert parse(f"K={value}\n") == {"K": value}
