"""What runs on a clock: reminders the agent set, idle compression, and the retry of
replies a platform did not take (docs/design.md#idle-compression)."""
