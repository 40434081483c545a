"""Tests of the agent adapters (mam/agents/*) and of the fake agent CLIs they are tested against."""
