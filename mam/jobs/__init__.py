"""Jobs: the pure lifecycle model, the receiving gate, job records, the agent-side emitter,
the heartbeater and the delegation wrapper."""
