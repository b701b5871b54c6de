"""A conversation's way through the gateway: the router (authorization, commands,
session keys), the lanes (one turn at a time per session), the turn runner, hygiene, and
the live sessions with the transcript a turn writes through (docs/design.md#message-flow)."""
