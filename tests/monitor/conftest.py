from tests.e2e.conftest import wired  # noqa: F401  (workspace + broker, both amqtt and Mosquitto)
