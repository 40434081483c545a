"""Token usage from the agent CLIs' own records (readers), per job."""
