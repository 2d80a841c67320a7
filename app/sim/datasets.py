"""Classification data sets for replays: synthetic SynSep/SynNonSep, bundled sets, CSV files.

Every loader returns ``(X, y)`` with ``X`` float64 of shape ``(n, d)`` and
``y`` int64 labels in ``0..K-1``.  Rows are scaled to unit L2 norm unless
``normalise=False`` (the papers' learners assume ``||x|| <= 1``).
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

#: Names accepted by :func:`load_classification` (besides a CSV path).
CLASSIFICATION_DATASETS: tuple[str, ...] = ("synsep", "synnonsep", "synsep20", "digits", "iris",
                                             "wine")

SYN_CLASSES = 9
#: Classes of ``synsep20``, SynSep with more labels (a bandit with 20 arms).
SYN_MANY_CLASSES = 20
SYN_RARE = 120
SYN_COMMON = 280
SYN_PROTO_MIN, SYN_PROTO_MAX = 20, 40
SYN_DROP = 5
SYN_SWITCH_ON = 20
SYNNONSEP_FLIP = 0.05


def _syn_prototypes(rng: np.random.Generator, n_classes: int) -> list[np.ndarray]:
    """Rare-feature index sets, one per class, each with >= ``SYN_DROP + 1`` features
    that no other prototype has (so that dropping ``SYN_DROP`` never makes an
    example a subset of another class's prototype; this is what keeps the
    classes linearly separable, see :func:`synthetic`)."""
    while True:
        protos = [
            np.sort(rng.choice(SYN_RARE, size=rng.integers(SYN_PROTO_MIN, SYN_PROTO_MAX + 1),
                               replace=False))
            for _ in range(n_classes)
        ]
        sets = [set(p.tolist()) for p in protos]
        if all(len(a - b) > SYN_DROP for a in sets for b in sets if a is not b):
            return protos


def synthetic(n: int, rng: np.random.Generator, label_noise: float = 0.0,
              n_classes: int = SYN_CLASSES) -> tuple[np.ndarray, np.ndarray]:
    """SynSep (``label_noise=0``) / SynNonSep generator after Kakade et al. (2008).

    9 classes (``n_classes``), 400 binary features (120 "rare", then 280 "common").  Each
    class has a prototype that switches on 20-40 rare features.  An example of
    class ``c`` (drawn uniformly) is the prototype with 5 of its rare features
    switched off and 20 random common features switched on.

    Separable by construction: with ``w_c = +1`` on the rare features of
    prototype ``c`` and ``-1`` on the other rare features, an example of class
    ``c`` with active rare set ``A`` scores ``|A|`` for ``c`` and
    ``2|A & P_c'| - |A| < |A|`` for any other class, because prototypes are
    resampled until each keeps more than 5 features outside every other.

    SynNonSep replaces the label of a ``label_noise`` fraction of the
    examples by a uniformly drawn *different* label.
    """
    protos = _syn_prototypes(rng, n_classes)
    y = rng.integers(0, n_classes, size=n)
    X = np.zeros((n, SYN_RARE + SYN_COMMON))
    rows = np.arange(n)[:, None]
    for c, proto in enumerate(protos):
        idx = np.flatnonzero(y == c)
        # a uniformly random subset of proto.size - SYN_DROP features per row
        keep = np.argsort(rng.random((idx.size, proto.size)), axis=1)[:, SYN_DROP:]
        X[idx[:, None], proto[keep]] = 1.0
    common = np.argpartition(rng.random((n, SYN_COMMON)), SYN_SWITCH_ON, axis=1)
    X[rows, SYN_RARE + common[:, :SYN_SWITCH_ON]] = 1.0
    if label_noise > 0:
        flip = rng.random(n) < label_noise
        y[flip] = (y[flip] + rng.integers(1, n_classes, size=int(flip.sum()))) % n_classes
    return X, y.astype(np.int64)


def _sklearn_bundled(name: str) -> tuple[np.ndarray, np.ndarray]:
    from sklearn import datasets

    loader = {"digits": datasets.load_digits, "iris": datasets.load_iris,
              "wine": datasets.load_wine}[name]
    bunch = loader()
    return np.asarray(bunch.data, dtype=np.float64), np.asarray(bunch.target, dtype=np.int64)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def load_csv(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """Read a CSV file whose last column is the label; a non-numeric first row is a header.

    Labels (any strings) are mapped to ``0..K-1`` in sorted order (numeric
    order when all labels are numbers).
    """
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"data set {str(path)!r} is neither a known name "
                         f"{list(CLASSIFICATION_DATASETS)} nor an existing CSV file")
    with p.open(newline="") as fh:
        rows = [r for r in csv.reader(fh) if r and any(c.strip() for c in r)]
    if rows and not all(_is_number(c) for c in rows[0][:-1]):
        rows = rows[1:]
    if not rows:
        raise ValueError(f"CSV file {str(path)!r} has no data rows")
    width = len(rows[0])
    if width < 2:
        raise ValueError(f"CSV file {str(path)!r} needs at least one feature and a label column")
    for lineno, r in enumerate(rows, start=1):
        if len(r) != width:
            raise ValueError(f"CSV file {str(path)!r}: data row {lineno} has {len(r)} "
                             f"columns, expected {width}")
    try:
        X = np.array([[float(c) for c in r[:-1]] for r in rows], dtype=np.float64)
    except ValueError as exc:
        raise ValueError(f"CSV file {str(path)!r}: non-numeric feature ({exc})") from None
    if not np.all(np.isfinite(X)):
        raise ValueError(f"CSV file {str(path)!r}: non-finite feature values")
    raw = [r[-1].strip() for r in rows]
    key = (lambda s: float(s)) if all(_is_number(s) for s in raw) else None
    classes = sorted(set(raw), key=key)
    if len(classes) < 2:
        raise ValueError(f"CSV file {str(path)!r}: need at least 2 distinct labels")
    index = {c: i for i, c in enumerate(classes)}
    return X, np.array([index[s] for s in raw], dtype=np.int64)


def normalise_rows(X: np.ndarray) -> np.ndarray:
    """Scale each row to unit L2 norm (all-zero rows stay zero)."""
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    out = np.zeros_like(X)
    np.divide(X, norms, out=out, where=norms > 0)
    return out


def load_classification(name: str, *, n: int = 10_000, seed: int = 0, normalise: bool = True
                        ) -> tuple[np.ndarray, np.ndarray]:
    """Load a classification data set by name or CSV path.

    Parameters
    ----------
    name:
        ``"synsep"``, ``"synnonsep"``, ``"synsep20"`` (SynSep with 20 classes; ``n`` rows
        generated from ``seed``),
        ``"digits"``, ``"iris"``, ``"wine"`` (scikit-learn bundled, ``n``
        ignored), or the path of a CSV file (last column = label).
    n:
        Rows to generate for the synthetic sets.
    seed:
        Seed of the synthetic generator (prototypes and rows).
    normalise:
        Scale rows to unit L2 norm.

    Returns
    -------
    X, y:
        float64 ``(n, d)`` features and int64 labels in ``0..K-1``.

    Examples
    --------
    >>> X, y = load_classification("synsep", n=50, seed=1)
    >>> X.shape, int(y.max()) < 9, bool(np.allclose(np.linalg.norm(X, axis=1), 1))
    ((50, 400), True, True)
    """
    if name in ("synsep", "synnonsep", "synsep20"):
        if n < 1:
            raise ValueError(f"n must be >= 1 for {name!r}, got {n}")
        noise = SYNNONSEP_FLIP if name == "synnonsep" else 0.0
        classes = SYN_MANY_CLASSES if name == "synsep20" else SYN_CLASSES
        X, y = synthetic(n, np.random.default_rng(seed), label_noise=noise, n_classes=classes)
    elif name in ("digits", "iris", "wine"):
        X, y = _sklearn_bundled(name)
    else:
        X, y = load_csv(name)
    return (normalise_rows(X) if normalise else X), y


def stream_indices(n_rows: int, rounds: int, rng: np.random.Generator) -> np.ndarray:
    """Row order for a replay of ``rounds`` rounds over ``n_rows`` rows.

    A data set with fewer rows than rounds is replayed in random order with
    replacement; otherwise a random permutation is truncated to ``rounds``.
    """
    if n_rows < 1:
        raise ValueError(f"n_rows must be >= 1, got {n_rows}")
    if rounds < 0:
        raise ValueError(f"rounds must be >= 0, got {rounds}")
    if n_rows < rounds:
        return rng.integers(0, n_rows, size=rounds)
    return rng.permutation(n_rows)[:rounds]
