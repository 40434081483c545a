"""The registry: SQLite is the truth for sessions, jobs and events; YAML and JSON files are mirrors."""
