"""What model calls cost, in exact US dollars, and the budgets that cap it (docs/cost.md).

:mod:`agent.cost.prices`: a price per model (configured, built-in table, local = free,
else unknown) and :func:`~agent.cost.prices.cost_of` a call's reported usage.
:mod:`agent.cost.table`: the built-in table, dated. :mod:`agent.cost.budget`: the
pre-flight estimate and the allowed/refused decision with its sentence.
"""
