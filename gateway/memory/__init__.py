"""Long-term memory (docs/design.md#memory): which notes a chat and a person see
(:mod:`~gateway.memory.scopes`), the silent flush before every compression
(:mod:`~gateway.memory.flush`) and the ``/memory`` and ``/forget`` commands
(:mod:`~gateway.memory.commands`). The notes themselves live in the store
(``MemoryStore``); the tools and the block the model sees live in the agent."""
