"""The operator's side: the ``nightowl`` command line and what it runs besides the
gateway (doctor, sessions, install-service, replay)."""
