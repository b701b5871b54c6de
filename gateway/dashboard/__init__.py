"""The operator's web dashboard and Prometheus ``/metrics``, inside the gateway process
(docs/design.md#dashboard): token login, pages drawn from Jinja2 templates with a small
polling script (no build step), actions through the parts of the gateway that own them.
The server is ``gateway.dashboard.server.Dashboard``; importing this package does not
start the web stack (the CLI's commands import pieces of it, such as the logins).
"""
