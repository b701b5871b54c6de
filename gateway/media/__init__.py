"""Voice, audio and documents -> text the agent can read (docs/design.md#media).

Nothing is imported here: the document worker (document_worker.py) runs as
``python -m gateway.media.document_worker`` and must not pay for the SDKs the rest needs.
"""
