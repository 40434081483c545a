"""The monitor: one reconciler per workspace that repairs registry drift and closes orphaned jobs.

It never starts a broker, a tmux or herdr server, or a pane (looking never starts anything).
"""
