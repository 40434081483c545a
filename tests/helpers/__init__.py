"""Test helpers shared by every test module: brokers, tmux servers, polling, workspaces."""
