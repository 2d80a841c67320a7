"""Off-policy evaluation of logged bandit feedback (pure numpy, like :mod:`app.learners`).

* :mod:`app.evaluation.estimators`: IPS, self-normalised IPS and doubly robust
  estimates with bootstrap intervals and the effective sample size, with the
  click-noise correction ``h(f)``, whose rates may carry standard errors, as
  mergeable accumulators (:mod:`app.evaluation.sums`).
* :mod:`app.evaluation.streaming`: the same over a stream of batches, in one
  process or several; :mod:`app.evaluation.parquetlog` reads a Parquet export
  as such batches, :mod:`app.evaluation.spark` runs them on Spark.
* :mod:`app.evaluation.slates`: reward-interaction IPS (and its
  self-normalised form) for slates under the cascade assumption, and
  :mod:`app.evaluation.rankings`: a rank log's values per slot and per
  ranking, both as mergeable accumulators that stream like the label ones.
* :mod:`app.evaluation.policies`: target policies as ``n x K`` matrices of
  ``pi(a | x)``.
* :mod:`app.evaluation.reward_model`: the cross-fitted ridge reward model of
  the doubly robust estimator, fitted from mergeable sums.
* :mod:`app.evaluation.simulate`: simulated label and slate logs whose
  policies' values are known exactly (the tests' and benchmark's worlds).
"""
