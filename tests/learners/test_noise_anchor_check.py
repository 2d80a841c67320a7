"""The anchor estimate refuses worlds its assumptions do not hold in, and still publishes
where they do: the service's pipeline in process (:func:`app.sim.relevance.label_plays`:
``linucb_diag`` at its defaults, the trainer's shadow scorer), estimated by the service's
rule every 2,500 plays (:func:`app.learners.noise_publish.anchor_estimate`)."""

from __future__ import annotations

import numpy as np
import pytest

from app.learners.noise_anchor import (
    ANCHOR_NOT_FLAT,
    ANCHOR_UNCHECKED,
    AnchorEstimate,
    estimate_from_anchors,
)
from app.learners.noise_publish import ANCHOR_EVERY, anchor_estimate
from app.sim.relevance import World, best_half, context_graded, graded, label_plays, one_right
from tests.learners.test_noise_anchor import epsilon_greedy_plays

RATES = (0.1, 0.2)


def refreshes(world: World, n: int, seed: int) -> list[AnchorEstimate]:
    """The estimate at every :data:`ANCHOR_EVERY` plays of ``n``."""
    plays = label_plays(world, n, RATES, seed)
    return [anchor_estimate(plays.prob[:t], plays.score[:t], plays.click[:t],
                            world.n_classes, {}, one_right_label=True)
            for t in range(ANCHOR_EVERY, n + 1, ANCHOR_EVERY)]


def test_context_dependent_graded_relevance_is_never_published() -> None:
    """Relevance ``sigmoid(3 w_a . x + b_a)``: the old estimator published rates off by
    0.2-0.35 from 10,000 plays on; now no refresh of 20,000 plays is published, and the
    last says why: the bottom anchor clicks below the rho0 the others imply (shown, or
    not yet shown within the tolerance)."""
    for seed in range(3):
        estimates = refreshes(context_graded(), 20_000, seed)
        assert not any(e.published for e in estimates), [e.reason for e in estimates]
        assert estimates[-1].reason in (ANCHOR_NOT_FLAT, ANCHOR_UNCHECKED), estimates[-1]


@pytest.mark.slow
@pytest.mark.parametrize(("world", "bound"),
                         [(graded(), 11), (best_half(), 13), (context_graded(), 5)],
                         ids=["graded", "best_half", "context_graded"])
def test_graded_worlds_are_seldom_published(world: World, bound: int) -> None:
    """Three labels right with probability about 0.2/0.45/0.7 (the reported world), labels
    right with 0.5/0.35/0.2/0.05 by rank, and relevance ``sigmoid(3 w_a . x + b_a)``: over
    seeds 0-9 and the 12 refreshes of 30,000 plays, at most ``bound`` of the 120 estimates
    are published.  The streams are seeded, so the counts are exact for this code: 6, 7
    and 2 with the bottom anchor the lower half of the explored plays' wrong share (26, 27
    and 2 with the lowest 2% of all recent margins; 70, 70 and 86 without the anchor
    check).  Each bound is the count plus two Poisson standard deviations,
    ``ceil(c + 2 sqrt(c))``: a change that only moves a few refreshes across the check's
    threshold (other seeds, another batch size) stays under it, the old bottom set's 26
    and 27 do not.  *Not* the goal of none: 4 of the 6 published 0.2/0.45/0.7 refreshes
    are seed 7, where the explored plays the shadow model ranks lowest are hardly less
    relevant than the rest (0.28 against 0.31 at 30,000; 0.21 against 0.34 in seed 0), so
    the bottom set does not hold the worst label's plays; the check's power is that of the
    explored plays of the worst labels (:mod:`app.learners.noise_anchor`, Anchor
    check)."""
    published = sum(e.published for seed in range(10)
                    for e in refreshes(world, 30_000, seed))
    assert published <= bound, published


@pytest.mark.slow
def test_the_one_right_label_world_still_publishes_within_0_05() -> None:
    """The truth suite's world (10 labels, right label ``argmax W x``): at 20,000 plays at
    least 8 of seeds 0-9 publish (measured 10), each within 0.05 of both rates."""
    published = 0
    for seed in range(10):
        est = refreshes(one_right(), 20_000, seed)[-1]
        if est.published:
            published += 1
            assert abs(est.rho0 - RATES[0]) <= 0.05 and abs(est.rho1 - RATES[1]) <= 0.05, est
    assert published >= 8, published


def test_the_bottom_anchor_disagreement_has_a_calibrated_error() -> None:
    """Where the anchors hold (an oracle scorer), ``D / se`` over 100 seeds has mean 0 and
    standard deviation 1: within 0.3 of each (3 standard errors of a mean of 100 unit
    normals, and about 4 of a standard deviation's)."""
    K, z = 9, []
    for seed in range(100):
        prob, score, click = epsilon_greedy_plays(20_000, K, 0.05, 0.7, (0.2, 0.3), seed)
        est = anchor_estimate(prob, score, click, K, {}, one_right_label=True)
        z.append(est.disagreement / est.disagreement_se)
    assert abs(np.mean(z)) <= 0.3 and abs(np.std(z) - 1.0) <= 0.3, (np.mean(z), np.std(z))


def test_a_bottom_set_that_clicks_above_the_rest_of_the_wrong_share_is_unchecked() -> None:
    """An oracle scorer's plays publish; the same plays with the wrong plays' scores
    ordered against their clicks (the clicked wrong plays lowest: a scorer whose low
    margins pick out no surely wrong plays) put every clicked wrong play in the bottom set,
    which then clicks above the rest of the wrong share (``drop`` about -0.4) and above the
    rho0 the other anchors imply, so the disagreement cannot contradict them: the estimate
    is refused with :data:`ANCHOR_UNCHECKED`."""
    K = 9
    prob, score, click = epsilon_greedy_plays(40_000, K, 0.05, 0.7, (0.2, 0.3), 0)
    assert anchor_estimate(prob, score, click, K, {}, one_right_label=True).published
    wrong = score < 1.0  # the oracle scores a right play 1 + noise
    inverted = np.where(wrong, score - 0.5 * click, score)
    est = anchor_estimate(prob, inverted, click, K, {}, one_right_label=True)
    assert est.reason == ANCHOR_UNCHECKED and est.drop + 3.0 * est.drop_se < 0.0, est
    assert est.disagreement < 0.0, est


def test_a_bottom_score_ranks_the_bottom_set_and_nothing_else() -> None:
    """``bottom_score`` ranks the explored plays for the bottom set and the rest of the wrong
    share only: the margin itself gives the service's estimate; the oracle's wrong plays
    ranked against their clicks (as above, but in ``bottom_score`` alone) make the estimate
    :data:`ANCHOR_UNCHECKED` while the top anchor and the uniform anchor stay as they
    were."""
    K = 9
    prob, score, click = epsilon_greedy_plays(40_000, K, 0.05, 0.7, (0.2, 0.3), 0)
    service = estimate_from_anchors(prob, score, click, K)
    assert service.published
    assert estimate_from_anchors(prob, score, click, K, bottom_score=score) == service
    inverted = np.where(score < 1.0, score - 0.5 * click, score)
    est = estimate_from_anchors(prob, score, click, K, bottom_score=inverted)
    assert est.reason == ANCHOR_UNCHECKED and est.drop < 0.0, est
    assert (est.n_top, est.m_top, est.m_uniform) == (service.n_top, service.m_top,
                                                     service.m_uniform)
