"""A session's screen as the page shows it: every escape sequence and control character removed."""

from __future__ import annotations

from mam.sessions.screen import strip_controls


def test_sequences_and_controls_are_removed_text_and_layout_kept() -> None:
    raw = (
        "\x1b[1;31mred\x1b[0m plain\r\n"  # SGR colour, CRLF
        "\x1b]0;a window title\x07title gone\n"  # OSC ended by BEL
        "\x1b]8;;https://evil.example\x1b\\link\x1b]8;;\x1b\\ text\n"  # OSC 8 hyperlink ended by ST
        "\x9b2Jc1 csi\x1bcreset\x1b7saved\x1b(Bcharset\n"  # C1 CSI, RIS, DECSC, a charset
        "tab\there\x00\x07\x08\x7f\x85 ok\n"  # NUL, BEL, BS, DEL, C1 NEL
        "ünïcode ✓ ● kept\n"
    )
    assert strip_controls(raw) == (
        "red plain\ntitle gone\nlink text\nc1 csiresetsavedcharset\ntab\there ok\nünïcode ✓ ● kept\n"
    )
