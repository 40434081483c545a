from tests.e2e.conftest import wired  # noqa: F401  (workspace + broker: the double, or real ones)
