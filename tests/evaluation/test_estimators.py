"""IPS, SNIPS and DR on simulated label logs whose true policy values are known exactly.

Contexts are drawn uniformly from a finite set, so a policy's value
``(1/M) sum_c sum_a pi(a | c) P(click | c, a)`` is computed exactly.  Each
check runs fixed seeds and counts how often the 95% bootstrap interval holds
the truth; under click noise the uncorrected estimates must sit at the
predicted ``rho0 + (1 - rho0 - rho1) V`` and the corrected ones at ``V``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from app.evaluation.estimators import ESTIMATORS, Evaluation, LabelLog, Options, evaluate
from app.evaluation.policies import fixed_policy, logging_policy, uniform_policy
from app.evaluation.simulate import (
    LABEL_LOGGING,
    N_CONTEXTS,
    SOFTMAX,
    K,
    label_value,
    simulate_label,
)
from app.evaluation.streaming import Batch, evaluate_parts, in_batches

EVENTS, SEEDS = 5_000, 40
#: Resamples per interval: at the default 200 the percentile intervals held the truth in
#: 92-98% of 300 seeds per case, at 1,000 in 94-95% of 200 seeds (uniform logging).
N_BOOT = 1_000
Target = Callable[[LabelLog], np.ndarray | None]
TARGETS: dict[str, Target] = {
    "uniform": uniform_policy,
    "fixed": lambda log: fixed_policy(log, 2),
    "logging": logging_policy,
}


def simulate(seed: int, logging: np.ndarray, rho0: float = 0.0, rho1: float = 0.0,
             known_logging: bool = True) -> tuple[LabelLog, np.ndarray]:
    """A log of :data:`EVENTS` events and each event's context index."""
    return simulate_label(seed, logging, EVENTS, rho0, rho1, known_logging)


def true_value(target: str, logging: np.ndarray) -> float:
    """The exact value of ``target`` when the contexts are uniform over the simulation's."""
    pi = {"uniform": LABEL_LOGGING["uniform"], "logging": logging,
          "fixed": np.eye(K)[np.full(N_CONTEXTS, 2)]}[target]
    return label_value(pi)


def streamed(log: LabelLog, target: Target, options: Options) -> Evaluation:
    """The evaluation of ``target`` on ``log`` by the streaming path: batches of 1,000
    events, each its own part."""
    return evaluate_parts([[batch] for batch in in_batches(log, 1_000)], _parts, target,
                          options)


def _parts(part: list[Batch]) -> list[Batch]:
    return part


def runs(logging: str, rho0: float = 0.0, rho1: float = 0.0, correct: bool = False,
         known_logging: bool = True) -> dict[str, list[Evaluation]]:
    """Per target, the evaluations over :data:`SEEDS` seeds (by the streaming path)."""
    out: dict[str, list[Evaluation]] = {t: [] for t in TARGETS}
    for seed in range(SEEDS):
        log, _ = simulate(seed, LABEL_LOGGING[logging], rho0, rho1, known_logging)
        options = Options(rho0 if correct else None, rho1 if correct else None, seed=seed,
                          n_boot=N_BOOT)
        for name, target in TARGETS.items():
            out[name].append(streamed(log, target, options))
    return out


@pytest.mark.parametrize("target", list(TARGETS))
def test_streamed_batches_give_the_in_memory_estimates(target: str) -> None:
    log, _ = simulate(5, SOFTMAX, 0.1, 0.2)
    memory = evaluate(log, TARGETS[target](log), 0.1, 0.2, 0.01, 0.02, seed=5).to_dict()
    stream = streamed(log, TARGETS[target], Options(0.1, 0.2, 0.01, 0.02, seed=5)).to_dict()
    assert stream.keys() == memory.keys()
    for name in ESTIMATORS:
        for field, value in memory[name].items():
            assert stream[name][field] == pytest.approx(value, rel=1e-9, abs=1e-12), (name,
                                                                                      field)
    assert stream["n"] == memory["n"] and stream["ess"] == pytest.approx(memory["ess"])


def coverage(evaluations: list[Evaluation], estimator: str, truth: float) -> float:
    hits = [e.to_dict()[estimator]["ci_low"] <= truth <= e.to_dict()[estimator]["ci_high"]
            for e in evaluations]
    return float(np.mean(hits))


@pytest.mark.slow
@pytest.mark.parametrize("logging", list(LABEL_LOGGING))
def test_intervals_cover_the_true_value(logging: str) -> None:
    results = runs(logging)
    for target, evaluations in results.items():
        truth = true_value(target, LABEL_LOGGING[logging])
        for estimator in ESTIMATORS:
            assert coverage(evaluations, estimator, truth) >= 0.9, (target, estimator)
            mean = np.mean([e.to_dict()[estimator]["value"] for e in evaluations])
            sd = np.std([e.to_dict()[estimator]["value"] for e in evaluations])
            assert abs(mean - truth) < 4 * sd / np.sqrt(SEEDS), (target, estimator)
        assert all(e.correction["rho0"] is None for e in evaluations)


def test_the_logging_policy_without_its_matrix_is_the_on_policy_mean() -> None:
    log, _ = simulate(0, SOFTMAX, known_logging=False)
    result = evaluate(log, logging_policy(log))
    assert result.ips.value == pytest.approx(log.rewards.mean())
    assert result.snips.value == pytest.approx(log.rewards.mean())
    assert result.ess == pytest.approx(EVENTS)
    truth = true_value("logging", SOFTMAX)
    assert result.dr.ci_low <= truth <= result.dr.ci_high


def test_fixed_action_weights_give_the_effective_sample_size() -> None:
    log, _ = simulate(1, LABEL_LOGGING["uniform"])
    result = evaluate(log, fixed_policy(log, 2))
    taken = int((log.actions == 2).sum())
    assert result.ess == pytest.approx(taken)  # weights K on the events that took action 2
    assert result.snips.value == pytest.approx(log.rewards[log.actions == 2].mean())


@pytest.mark.slow
def test_click_noise_biases_the_raw_estimates_by_the_predicted_amount() -> None:
    rho0, rho1 = 0.1, 0.3
    beta = 1 - rho0 - rho1
    corrected = runs("softmax", rho0, rho1, correct=True)
    raw = runs("softmax", rho0, rho1, correct=False)
    for target in TARGETS:
        truth = true_value(target, SOFTMAX)
        predicted = rho0 + beta * truth
        for estimator in ESTIMATORS:
            fixed = np.array([e.to_dict()[estimator]["value"] for e in corrected[target]])
            plain = np.array([e.to_dict()[estimator]["value"] for e in raw[target]])
            se_fixed, se_plain = fixed.std() / np.sqrt(SEEDS), plain.std() / np.sqrt(SEEDS)
            assert abs(fixed.mean() - truth) < 4 * se_fixed, (target, estimator)
            assert coverage(corrected[target], estimator, truth) >= 0.9, (target, estimator)
            assert abs(plain.mean() - predicted) < 4 * se_plain, (target, estimator)
            assert abs(plain.mean() - truth) > 8 * se_plain, (target, estimator)
    assert corrected["uniform"][0].correction == {
        "reward": "h(f) = (f - rho0) / (1 - rho0 - rho1)", "rho0": rho0, "rho1": rho1}


def test_bad_input_is_refused() -> None:
    log, _ = simulate(2, LABEL_LOGGING["uniform"])
    with pytest.raises(ValueError, match="rho1"):
        evaluate(log, uniform_policy(log), rho0=0.1)
    with pytest.raises(ValueError, match="rho1"):
        evaluate(log, uniform_policy(log), rho0=0.5, rho1=0.5)
    with pytest.raises(ValueError, match="fixed action 4"):
        fixed_policy(log, 4)
    with pytest.raises(ValueError, match="propensities"):
        LabelLog(log.X, log.actions, np.zeros(EVENTS), log.rewards, K)
