"""What runs on a clock: reminders the agent set, idle compression, and the retry of
replies a platform did not take (docs/design.md#idle-compression,
docs/design.md#delivery-guarantee).

- :mod:`~gateway.scheduling.scheduler`: starts and stops them together; the delivery retry.
- :mod:`~gateway.scheduling.jobs`: apscheduler in the gateway's event loop.
- :mod:`~gateway.scheduling.reminders`: the ``schedule_message`` tool; arming, firing and
  delivering reminders (times are read in :mod:`~gateway.scheduling.reminder_times`).
- :mod:`~gateway.scheduling.idle`: idle compression.
"""
