"""The recommender: the cheapest fleet that meets P99 targets, with its commitment plan.

Stages, one module each: ``inputs`` (demand, targets, constraints) -> ``space`` (the candidate
configurations from price sheets and the catalog) -> ``screen`` (analytic capacity per replica
under the targets, hourly fleet sizes, cost) -> ``sweep`` (the cheapest candidates verified in
rounds, escalated on a miss; the winner tightened and its growth checked) over ``verify`` (one
simulation task; serial, a local pool or Dask) -> ``plan`` (what to buy) -> ``engine``
(``recommend()``, which runs them in order and assembles the result) -> ``store``.

Around them: ``sources`` (the demand, prices and profiles a search reads from the store, for
``planner recommend`` and the dashboard alike), ``background`` (a search in its own thread
with its progress, for the dashboard), ``tables`` and ``plot`` (a result as tables and charts).
"""
