"""The recommender: the cheapest fleet that meets P99 targets, with its commitment plan.

Stages, one module each: ``inputs`` (demand, targets, constraints) -> ``space`` (the candidate
configurations from price sheets and the catalog) -> ``screen`` (analytic capacity per replica
under the targets, hourly fleet sizes, cost) -> ``sweep`` (the cheapest candidates verified in
rounds, escalated on a miss; the winner tightened and its growth checked) over ``verify`` (one
simulation task; serial, a local pool or Dask) -> ``plan`` (what to buy) -> ``engine``
(``recommend()``, which runs them in order and assembles the result).

Around them: ``limits`` (what one recommendation may simulate, checked on values), ``tables``
and ``plot`` (a result as tables and charts). The package takes and returns values: loading
the demand, prices and profiles, storing the result and the dashboard's background search are
the use case's (``planner.usecases.recommend`` and ``recommend_background``), the stored
recommendations ``planner.store.recommendations``.
"""
