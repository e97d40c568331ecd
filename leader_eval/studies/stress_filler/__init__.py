"""Committed templates of realistic room traffic that ``leader_eval.studies.stress`` grows event logs with.

``chat_traffic.yaml`` holds other agents' small talk and status chatter and tool results. None of
it states a goal, asks the leader anything or bears on any decision; ``leader_eval.studies.stress``
re-checks every generated line against the case it pads (``filler_violations``).
"""
