"""Pane backend tests: one contract suite over tmux and herdr, plus herdr's own protocol and start-up."""
