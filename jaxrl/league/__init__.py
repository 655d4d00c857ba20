"""The self-play league: who the learner plays, and how it is rated.

One package owns the league; the rest of jaxrl sees it only as features:

- :class:`jaxrl.league.feature.SelfPlay`, a :class:`~jaxrl.features.Feature` like any
  other, hands the match step its pool and lane probabilities in the plan (the match step,
  :mod:`jaxrl.core.match` and :mod:`jaxrl.core.opponents`, imports nothing of the league);
- :class:`jaxrl.league.exploiters.Exploiters`, a :class:`~jaxrl.features.LearnerFeature`,
  runs the exploiters' vmapped update and hand-off after the learner's.

Modules:

- :mod:`~jaxrl.league.groups`: the static opponent groups of the training envs (current
  policy, RulePolicy, pool lanes) and their masks;
- :mod:`~jaxrl.league.pool`: the snapshot pool and prioritised fictitious self-play (PFSP);
- :mod:`~jaxrl.league.rating`: the learner's in-graph Elo against the RulePolicy;
- :mod:`~jaxrl.league.feature`: the train-step feature that ties them together;
- :mod:`~jaxrl.league.exploiters`: learners trained only against the current policy, whose
  winners join the pool and restart from the learner.

This file imports nothing, so that importing a submodule pulls in no other.
"""
