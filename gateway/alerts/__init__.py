"""Alerts to the operator (docs/operations.md#alerts): conditions that need a hand,
watched by a scheduler job, told once when they start and once when they clear."""

from gateway.alerts.conditions import Observation
from gateway.alerts.monitor import ActiveAlert, Alerts

__all__ = ["ActiveAlert", "Alerts", "Observation"]
