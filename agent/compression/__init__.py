"""The built-in compressor's parts, one job per module.

:mod:`agent.context_compressor` wires them into :class:`~agent.context_compressor.ContextCompressor`:
``settings`` (thresholds and budgets, SPEC C2/C5/C6/T5), ``boundaries`` (phases 1-2),
``summary`` (phase 3: the summarizer request and its failures), ``fallback`` (the
deterministic summary), ``assembly`` (phase 4), ``cooldown`` (C8/C9) and ``telemetry`` (C11).
"""
