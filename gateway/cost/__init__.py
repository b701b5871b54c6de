"""What model calls cost, kept and capped (docs/cost.md).

:mod:`~gateway.cost.payer`: whose turn a call belongs to (the chat and the person).
:mod:`~gateway.cost.pricing`: each configured route's price. :mod:`~gateway.cost.meter`:
the budget check before a call and the record after it, which every model call passes
through (:class:`gateway.provider_events.ReportedProvider`). :mod:`~gateway.cost.report`:
``/usage``, ``/status``'s line and ``nightowl usage``.
"""
