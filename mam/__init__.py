"""mam: a backplane for long-lived terminal coding agents and the jobs delegated to them."""

__version__ = "0.1.0"
