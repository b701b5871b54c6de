"""The operator's web dashboard and Prometheus ``/metrics``, inside the gateway process
(docs/design.md#dashboard): token login, pages drawn from Jinja2 templates with a small
polling script (no build step), actions through the parts of the gateway that own them.
"""

from gateway.dashboard.server import Dashboard

__all__ = ["Dashboard"]
