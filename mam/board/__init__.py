"""The workspace's blackboard: versioned text values under checked keys, shared over the broker.

The registry (mam/store/board.py) is the truth; each write is published retained and signed
(mam/board/message.py) so that watchers here and in other workspaces sharing the broker and
MAM_TOPIC_PREFIX see it at once (mam/board/watch.py).
"""
