"""One INFO line per compression attempt, with counts and classes only (docs/design.md#telemetry).

Message text, summary text, the focus topic and error text never go into it: the line is
built from a fixed set of fields, all numbers or short enumerated strings.
"""

from __future__ import annotations

import json
import logging

from agent.context_engine import CompressionResult

log = logging.getLogger("agent.conversation_compression")

TOKEN_COUNT_METHOD = "estimate_rough"


def log_attempt(result: CompressionResult, *, session_id: str) -> dict[str, object]:
    """Log the telemetry line for ``result`` and return the fields it carried."""
    fields: dict[str, object] = {
        "trigger_source": result.trigger_source,
        "commit_status": result.commit_status,
        "failure_class": result.failure_class,
        "attempt_id": result.attempt_id,
        "session_id": session_id,
        "method": result.method,
        "messages_before": result.messages_before,
        "tokens_before": result.tokens_before,
        "token_count_method": TOKEN_COUNT_METHOD,
        "tool_results_pruned": result.tool_results_pruned,
    }
    # A candidate that did not cross the commit boundary has no "after" numbers: null,
    # never the input's numbers passed off as a result.
    committed = result.committed
    fields["messages_after"] = result.messages_after if committed else None
    fields["tokens_after"] = result.tokens_after if committed else None
    fields["tokens_reclaimed"] = result.tokens_before - result.tokens_after if committed else None
    log.info("context compression attempt telemetry: %s", json.dumps(fields, sort_keys=True))
    return fields
