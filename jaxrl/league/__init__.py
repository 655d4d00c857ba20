"""The self-play league: who the learner plays, and how it is rated.

One package owns the league; the rest of jaxrl sees it through two doors:

- the match step (:mod:`jaxrl.match`) calls :mod:`jaxrl.league.lanes` for the pool lanes'
  forward pass and their bookkeeping (draws, pure matches, per-slot results);
- the train step sees :class:`jaxrl.league.feature.SelfPlay`, a
  :class:`~jaxrl.features.Feature` like any other, and, with ``selfplay.exploiters``, runs
  the exploiters' vmapped update and hand-off between learners (as PBT between members).

Modules:

- :mod:`~jaxrl.league.groups`: the static opponent groups of the training envs (current
  policy, RulePolicy, pool lanes) and their masks;
- :mod:`~jaxrl.league.pool`: the snapshot pool and prioritised fictitious self-play (PFSP);
- :mod:`~jaxrl.league.rating`: the learner's in-graph Elo against the RulePolicy;
- :mod:`~jaxrl.league.lanes`: the pool lanes inside the match step;
- :mod:`~jaxrl.league.feature`: the train-step feature that ties them together;
- :mod:`~jaxrl.league.exploiters`: learners trained only against the current policy, whose
  winners join the pool and restart from the learner.

This file imports nothing, so that :mod:`jaxrl.match` can import a submodule without
pulling in the feature (which itself imports the match step).
"""
