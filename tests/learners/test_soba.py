"""SOBA against a direct transcription of Beygelzimer, Orabona & Zhang 2017, Algorithm 1
(explicit A, solved each round)."""

from __future__ import annotations

import numpy as np
import pytest

from app.learners.base import ParamError
from app.learners.proxy import unbiased_click
from app.learners.soba import SOBA


class ReferenceSOBA:
    """Algorithm 1 literally: explicit ``A`` (or its diagonal), ``W = A^-1 theta`` by solving."""

    def __init__(self, k: int, d: int, a: float, diagonal: bool) -> None:
        self.k, self.d, self.diagonal = k, d, diagonal
        self.A = np.full(k * d, a) if diagonal else a * np.eye(k * d)
        self.theta = np.zeros(k * d)
        self.mc = 0.0

    def W(self) -> np.ndarray:
        w = self.theta / self.A if self.diagonal else np.linalg.solve(self.A, self.theta)
        return w.reshape(self.k, self.d)

    def learn(self, x: np.ndarray, played: int, prob: float, v: float) -> None:
        if v == 0:
            return
        W = self.W()
        s = W @ x
        others = [r for r in range(self.k) if r != played]
        ybar = others[int(np.argmax(s[others]))]
        if 1 - s[played] + s[ybar] <= 0:
            return
        grad = np.zeros((self.k, self.d))
        grad[ybar] += x
        grad[played] -= x
        g = (v / prob) * grad.ravel()
        z = np.sqrt(prob) * g
        Ainv_z = z / self.A if self.diagonal else np.linalg.solve(self.A, z)
        m = ((W.ravel() @ z) ** 2 + 2 * (W.ravel() @ g)) / (1 + z @ Ainv_z)
        if self.mc + m >= 0:
            self.mc += m
            self.A = self.A + (z * z if self.diagonal else np.outer(z, z))
            self.theta = self.theta - g


@pytest.mark.parametrize("diagonal", [False, True])
@pytest.mark.parametrize("noise_corrected", [False, True])
def test_soba_matches_reference_transcription(diagonal: bool, noise_corrected: bool) -> None:
    k, d, rho = 4, 3, (0.1, 0.2)
    rng = np.random.default_rng(0)
    centers = rng.standard_normal((k, d))
    model = SOBA(n_features=d, n_classes=k, seed=1, gamma=0.3, a=0.5, diagonal=diagonal,
                 noise_corrected=noise_corrected, rho0=rho[0], rho1=rho[1])
    ref = ReferenceSOBA(k, d, 0.5, diagonal)
    for _ in range(300):
        y = int(rng.integers(k))
        x = centers[y] + 0.3 * rng.standard_normal(d)
        ctx = model.decide(x).context
        click = float(ctx["played"] == y)
        click = 1.0 - click if rng.random() < rho[int(click)] else click
        model.learn_one({**ctx, "click": click})
        v = unbiased_click(click, *rho) if noise_corrected else click
        ref.learn(ctx["x"], int(ctx["played"]), float(ctx["prob"]), v)
        np.testing.assert_allclose(model.W_, ref.W(), rtol=1e-8, atol=1e-10)
    assert model.margin_[0] == pytest.approx(ref.mc, rel=1e-8)
    assert np.any(model.W_ != 0)


def test_soba_noise_corrected_without_noise_equals_plain() -> None:
    rng = np.random.default_rng(3)
    plain = SOBA(n_features=3, n_classes=3, seed=2, gamma=0.2)
    corrected = SOBA(n_features=3, n_classes=3, seed=2, gamma=0.2, noise_corrected=True)
    for _ in range(200):
        y = int(rng.integers(3))
        x = np.eye(3)[y] + 0.1 * rng.standard_normal(3)
        for model in (plain, corrected):
            ctx = model.decide(x).context
            model.learn_one({**ctx, "click": float(ctx["played"] == y)})
    np.testing.assert_array_equal(plain.W_, corrected.W_)


@pytest.mark.parametrize("kwargs, field", [
    ({"gamma": 0.6}, "gamma"), ({"gamma": 0.0}, "gamma"), ({"a": 0.0}, "a"),
    ({"rho0": 0.5, "rho1": 0.5}, "rho1"), ({"n_features": 1000, "n_classes": 10}, "diagonal"),
])
def test_soba_refuses_invalid_params(kwargs: dict[str, float], field: str) -> None:
    params = {"n_features": 3, "n_classes": 3, **kwargs}
    with pytest.raises(ParamError) as info:
        SOBA(**params)  # type: ignore[arg-type]
    assert info.value.field == field


def test_soba_diagonal_accepts_large_models() -> None:
    model = SOBA(n_features=1000, n_classes=10, diagonal=True)
    assert model.get_state()["Ainv_"].shape == (10_000,)
