"""Small helpers shared by every layer: files, processes, polling."""
