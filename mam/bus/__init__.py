"""The message bus: envelopes, topics, and transports (paho over a real broker, in-memory for tests)."""
