"""The built-in compressor's parts, one job per module.

:mod:`agent.context_compressor` wires them into :class:`~agent.context_compressor.ContextCompressor`:
``settings`` (thresholds and budgets, docs/design.md#threshold, #boundaries, #summary, #output-reserve), ``boundaries`` (phases 1-2),
``summary`` (phase 3: the summarizer request and its failures), ``fallback`` (the
deterministic summary), ``assembly`` (phase 4), ``cooldown`` (docs/design.md#failure-ladder, #cooldown) and ``telemetry`` (docs/design.md#telemetry).
"""
