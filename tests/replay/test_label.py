"""The label / label_set replay runner: scoring, simulated feedback, the noise estimators."""

from __future__ import annotations

import argparse

import numpy as np
import pytest

from app.learners.base import ParamError
from app.learners.registry import build
from app.replay import label
from app.sim.datasets import load_classification, stream_indices


def _args(**overrides: object) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    label.add_arguments(parser.add_argument_group())
    args = parser.parse_args([])
    args.dataset, args.algorithm, args.rounds, args.task = "iris", "rcnbf", 600, "label"
    args.params = None
    for name, value in overrides.items():
        setattr(args, name, value)
    return args


def test_run_reports_curve_progress_and_feedback_rates() -> None:
    done: list[int] = []
    result = label.run(_args(rho0=0.2, rho1=0.4, gamma=0.3, rounds=2500, estimator="fixed"), 3,
                       done.append)
    assert sum(done) == 2500 and result.rounds == 2500 and result.seed == 3
    assert result.metric == "error_rate" and result.curve[-1] == (2500, result.final)
    assert result.params == {"gamma": 0.3, "rho0": 0.2, "rho1": 0.4}
    # the noisy click rate is rho0 + (1 - rho0 - rho1) * P(played right)
    right = 1 - result.extra["played_error_rate"]
    expected = 0.2 + 0.4 * right
    assert abs(result.extra["noisy_click_rate"] - expected) < 4 * np.sqrt(0.25 / 2500)
    assert "noise_estimates" not in result.extra


def test_run_rcnbf_without_noise_equals_banditron() -> None:
    a = label.run(_args(gamma=0.2, estimator="fixed"), 0, lambda n: None)
    b = label.run(_args(gamma=0.2, algorithm="banditron"), 0, lambda n: None)
    assert a.curve == b.curve and a.extra == b.extra


def test_run_mc_dbf_with_one_label_equals_banditron() -> None:
    a = label.run(_args(task="label_set", algorithm="mc_dbf", m=1, gamma=0.2), 1,
                  lambda n: None)
    b = label.run(_args(algorithm="banditron", gamma=0.2), 1, lambda n: None)
    assert a.curve == b.curve


def test_run_feedback_delay_learns_in_batches() -> None:
    # Reference: decide 7 rounds with frozen weights, then learn them one by one.
    rounds, delay, seed = 200, 7, 2
    result = label.run(_args(algorithm="banditron", gamma=0.3, rounds=rounds,
                             feedback_delay=delay), seed, lambda n: None)
    X, y = load_classification("iris", seed=seed)
    order = stream_indices(len(y), rounds, np.random.default_rng([seed, 1]))
    model = build("label", "banditron", n_features=4, n_classes=3,
                  params={"gamma": 0.3}, seed=seed)
    errors = []
    for start in range(0, rounds, delay):
        events = []
        for i in order[start:start + delay]:
            d = model.decide(X[i])
            errors.append(d.output["greedy_label"] != y[i])
            events.append({**d.context, "click": float(d.context["played"] == y[i])})
        for event in events:
            model.learn_one(event)
    assert result.final == pytest.approx(np.mean(errors), abs=1e-12)
    assert result.extra["feedback_delay"] == delay


def test_run_full_information_learner_gets_true_labels() -> None:
    result = label.run(_args(algorithm="perceptron", rho0=0.4, rho1=0.4), 0, lambda n: None)
    assert result.extra["final_window_error_rate"] < 0.2  # iris, noise-free labels


@pytest.mark.slow
def test_run_at_defaults_estimates_as_the_service_and_publishes_by_its_rule() -> None:
    # rcnbf's service default is the anchor estimator: the learner starts from 0, not the
    # truth, and 2,500 plays are too few to publish (the top set needs 100 plays)
    result = label.run(_args(rho0=0.2, rho1=0.4, gamma=0.3, rounds=2600), 3, lambda n: None)
    assert result.extra["estimator"] == "anchor" and "rho0" not in result.params
    (estimate,) = result.extra["noise_estimates"]
    assert (estimate["t"], estimate["estimator"], estimate["status"], estimate["reason"]) == (
        2500, "anchor", "insufficient_data", "too_few_events")
    assert estimate["rho0"] is None and estimate["interval"]["rho0"] is None
    with pytest.raises(ParamError, match="--estimator"):  # rcnbf keeps no NREst samples
        label.run(_args(estimator="nrest"), 0, lambda n: None)
    with pytest.raises(ParamError, match="--estimator"):  # banditron uses no rates
        label.run(_args(algorithm="banditron", estimator="anchor"), 0, lambda n: None)


@pytest.mark.parametrize("algorithm", ["rcnbf", "linucb_diag"])
def test_run_denying_one_right_label_publishes_no_estimate(algorithm: str) -> None:
    # --no-one-right-label: what a service does for a model whose owner denies it (and, for
    # the ridge bandits, for one nobody stated it for); the data are classes, so by default
    # the replay states it
    stated, denied = (label.run(_args(algorithm=algorithm, rho0=0.2, rho1=0.4, rounds=2600,
                                      one_right_label=flag), 3, lambda n: None)
                      for flag in (True, False))
    assert stated.extra["noise_estimates"][0]["reason"] == "too_few_events"
    (estimate,) = denied.extra["noise_estimates"]
    assert (estimate["status"], estimate["reason"], estimate["rho0"]) == (
        "insufficient_data", "one_right_label_unstated", None)
    assert _args().one_right_label is True


@pytest.mark.slow
def test_run_rcine_with_nrest_estimates_noise_every_n_s() -> None:
    result = label.run(_args(dataset="synsep", algorithm="rcine", rounds=6000, gamma=0.5,
                             rho0=0.2, rho1=0.4, n_s=3000, estimator="nrest"), 0,
                       lambda n: None)
    estimates = result.extra["noise_estimates"]
    assert [e["t"] for e in estimates] == [3000, 6000]
    # Accuracy is tested in tests/learners/test_noise.py; 3000 records of 9
    # classes give a coarse estimate, so only a gross check here that estimates
    # are made from the right buffer and published without an interval.
    first = estimates[0]
    assert (first["estimator"], first["status"], first["interval"]) == (
        "nrest", "published", None)
    assert abs(first["rho0"] - 0.2) < 0.15 and abs(first["rho1"] - 0.4) < 0.15
    assert "rho0" not in result.params  # rcine is not told the true rates
    plain = label.run(_args(dataset="synsep", algorithm="banditron", rounds=6000, gamma=0.5,
                            rho0=0.2, rho1=0.4), 0, lambda n: None)
    before = [p for p in result.curve if p[0] <= 3000]
    assert [p for p in plain.curve if p[0] <= 3000] == before  # same until the refresh...
    assert plain.final != result.final                # ...then the estimates are used


def test_run_refuses_options_the_learner_does_not_take() -> None:
    with pytest.raises(ParamError, match="--n-s"):
        label.run(_args(n_s=1000), 0, lambda n: None)
    with pytest.raises(ParamError, match="--gamma"):
        label.run(_args(algorithm="perceptron", gamma=0.1), 0, lambda n: None)
    with pytest.raises(ParamError, match="feedback-delay"):
        label.run(_args(feedback_delay=0), 0, lambda n: None)


def test_run_params_json_overrides_options() -> None:
    result = label.run(_args(gamma=0.1, params={"gamma": 0.4}), 0, lambda n: None)
    assert result.params["gamma"] == 0.4


def test_observer_sees_every_learned_event_in_stream_order() -> None:
    """In batches of the feedback delay, each with the logged context and the click."""
    batches: list[list[dict[str, object]]] = []
    result = label.run(_args(rho0=0.2, rho1=0.4, gamma=0.3, feedback_delay=7), 1,
                       lambda n: None, batches.append)
    assert [len(b) for b in batches] == [7] * 85 + [5]
    clicks = np.array([float(e["click"]) for b in batches for e in b])  # type: ignore[arg-type]
    assert clicks.mean() == pytest.approx(result.extra["noisy_click_rate"])
    assert {"x", "played", "prob", "click"} <= set(batches[0][0])
