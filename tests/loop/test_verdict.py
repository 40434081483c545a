"""Strict verdict parsing: the token alone on the last non-empty line, or NOT PASS with a reason."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mam.loop.verdict import NOT_PASS_TOKEN, PASS_TOKEN, parse_verdict


def last_line(text: str) -> str | None:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else None


@pytest.mark.parametrize(
    "text",
    [
        "# Review\n\nAll good.\n[VERDICT: PASS]\n",
        "[VERDICT: PASS]",
        "findings: none\n   [VERDICT: PASS]   \n\n\n",
        "body\r\n[VERDICT: PASS]\r\n",
    ],
)
def test_pass(text: str) -> None:
    v = parse_verdict(text)
    assert v.passed and v.wellformed and v.reason == "" and v.label == "PASS"


def test_a_wellformed_not_pass() -> None:
    v = parse_verdict("- bug in x\n[VERDICT: NOT PASS]\n")
    assert not v.passed and v.wellformed and "NOT PASS" in v.reason


@pytest.mark.parametrize(
    "text, why",
    [
        ("", "empty"),
        ("   \n\n", "empty"),
        ("Looks fine to me.", "no verdict line"),
        ("Overall this is [VERDICT: PASS] in my view.", "inline"),
        ("[verdict: pass]", "malformed verdict line"),
        ("[VERDICT: pass]", "malformed verdict line"),
        ("[VERDICT:PASS]", "malformed verdict line"),
        ("[VERDICT: PASS]\n[VERDICT: NOT PASS]", "2 verdict lines"),
        ("[VERDICT: PASS]\n[VERDICT: PASS]", "2 verdict lines"),
        ("[VERDICT: PASS]\nOne more thing: fix x.", "not the last non-empty line"),
        ("[VERDICT: PASS] ok", "inline"),
        ("> [VERDICT: PASS]", "inline"),
        ("`[VERDICT: PASS]`", "inline"),
    ],
)
def test_not_pass_with_reason(text: str, why: str) -> None:
    v = parse_verdict(text)
    assert not v.passed and not v.wellformed
    assert why in v.reason


LINES = st.lists(
    st.one_of(
        st.text(max_size=40),
        st.sampled_from(
            [
                PASS_TOKEN,
                NOT_PASS_TOKEN,
                " [VERDICT: PASS] ",
                "[verdict: pass]",
                "[VERDICT: PASS] x",
                "",
                "  ",
                "\u00a0[VERDICT: PASS]\u2028",
                "[ VERDICT : PASS ]",
            ]
        ),
    ),
    max_size=8,
)


@settings(max_examples=600, deadline=None)
@given(st.text())
def test_random_text_never_crashes_and_never_passes_by_accident(text: str) -> None:
    v = parse_verdict(text)
    if v.passed:
        assert last_line(text) == PASS_TOKEN
    else:
        assert v.reason


@settings(max_examples=600, deadline=None)
@given(LINES, st.sampled_from(["\n", "\r\n", "\r"]))
def test_structured_reports(lines: list[str], sep: str) -> None:
    text = sep.join(lines)
    v = parse_verdict(text)
    assert v.passed == (last_line(text) == PASS_TOKEN and v.wellformed)
    if v.passed:
        assert last_line(text) == PASS_TOKEN


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_characters="[]"), max_size=200))
def test_any_body_then_the_pass_line_passes(body: str) -> None:
    v = parse_verdict(body + "\n" + PASS_TOKEN + "\n")
    assert v.passed, v.reason
