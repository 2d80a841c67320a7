"""Request features -> a float64 vector of ``n_features``.

Named features are hashed as scikit-learn's ``FeatureHasher`` does
(``alternate_sign=True``): ``h = murmurhash3_32(name, seed=0)`` (signed),
bucket ``|h| mod n_features``, sign ``+1`` if ``h >= 0`` else ``-1``, so
that inner products stay unbiased under collisions.  The hash is stable
across processes and machines (never Python's salted ``hash()``).

Every input a model sees (predict features, examples, noisy copies) must
have a Euclidean norm of at most the model's ``max_feature_norm``
(:func:`check_norms`): finite numbers whose squares overflow, or one
huge event that would swamp every weight, are refused before any learner
sees them.
"""

from __future__ import annotations

import mmh3
import numpy as np

from app.errors import ApiError
from app.fields import NamedFeatures, SparseFeatures
from app.learners.config import ModelConfig


def hash_feature(name: str, n_features: int) -> tuple[int, float]:
    """Bucket and sign of a feature name.

    >>> hash_feature("country=FR", 1 << 20) == hash_feature("country=FR", 1 << 20)
    True
    """
    h = mmh3.hash(name, 0, signed=True)  # scikit-learn's murmurhash3_32(positive=False)
    return abs(h) % n_features, (1.0 if h >= 0 else -1.0)


def named_term(name: str, value: float | str) -> tuple[str, float]:
    """The hashed key and the amount of one named feature: a string value is the
    categorical feature ``name=value`` with amount 1.

    >>> named_term("country", "FR"), named_term("age", 31.0)
    (('country=FR', 1.0), ('age', 31.0))
    """
    return (f"{name}={value}", 1.0) if isinstance(value, str) else (name, value)


def to_vector(features: list[float] | SparseFeatures | NamedFeatures, n_features: int,
              field: str = "features", out: np.ndarray | None = None) -> np.ndarray:
    """The dense input of a learner; 422 naming ``field`` on a wrong length or index.

    ``out``: a zero vector of ``n_features`` to write it into (returned).
    """
    if isinstance(features, list):
        if len(features) != n_features:
            raise ApiError(422, "invalid_features",
                           f"expected {n_features} features, got {len(features)}", field)
        if out is None:
            return np.asarray(features, dtype=np.float64)
        out[:] = features
        return out
    x = np.zeros(n_features) if out is None else out
    if isinstance(features, SparseFeatures):
        idx = np.asarray(features.indices, dtype=np.int64)
        if idx.size and int(idx.max()) >= n_features:
            bad = int(np.argmax(idx >= n_features))
            raise ApiError(422, "invalid_features",
                           f"index {int(idx[bad])} out of range [0, {n_features})",
                           f"{field}.indices[{bad}]")
        if np.unique(idx).size != idx.size:
            raise ApiError(422, "invalid_features", "duplicate indices", f"{field}.indices")
        x[idx] = np.asarray(features.values, dtype=np.float64)
        return x
    for name, value in features.named.items():
        key, amount = named_term(name, value)
        bucket, sign = hash_feature(key, n_features)
        x[bucket] += sign * amount
    if not np.all(np.isfinite(x)):
        raise ApiError(422, "invalid_features", "hashed features overflow", field)
    return x


#: ``max_feature_norm`` of a model that does not set it.
DEFAULT_MAX_FEATURE_NORM = 1e6
#: Largest ``max_feature_norm`` a model may set: squared norms up to 1e300 stay finite.
MAX_FEATURE_NORM_LIMIT = 1e150


def feature_bound(config: ModelConfig) -> float:
    """The ``max_feature_norm`` of a stored model config (the default for older models)."""
    bound = config.max_feature_norm
    return float(DEFAULT_MAX_FEATURE_NORM if bound is None else bound)


def check_norms(X: np.ndarray, max_norm: float, field: str, rows: str | None = None,
                first: int = 0) -> None:
    """422 ``invalid_features`` naming the first row of ``X`` whose norm exceeds ``max_norm``.

    ``X`` is one input ``(d,)`` (named ``field``) or one per row ``(n, d)``
    (named ``rows`` formatted with the row index plus ``first``, e.g. ``"instances[{}]"``).

    >>> check_norms(np.array([3.0, 4.0]), 5.0, "features")
    >>> check_norms(np.array([1e308, -1e308]), 1e6, "features")
    Traceback (most recent call last):
    ...
    app.errors.ApiError: finite values whose squares overflow float64: norm above 1.3e154 ...
    """
    # Entries within max_norm (<= 1e150) cannot overflow a sum of up to 1e8 squares: the
    # usual case costs two vector operations, without an error-state context.
    bound2 = max_norm * max_norm
    if X.ndim == 1 or len(X) == 1:
        x = X.reshape(-1)
        if float(np.abs(x).max()) <= max_norm and float(x.dot(x)) <= bound2:
            return
    with np.errstate(over="ignore"):
        norm2 = np.einsum("...j,...j->...", X, X)
    bad = np.flatnonzero(~(np.atleast_1d(norm2) <= bound2))
    if bad.size == 0:
        return
    i = int(bad[0])
    where = field if rows is None or X.ndim == 1 else rows.format(first + i)
    value = float(np.atleast_1d(norm2)[i])
    found = (f"norm {np.sqrt(value):.4g}" if np.isfinite(value) else
             "finite values whose squares overflow float64: norm above 1.3e154")
    raise ApiError(422, "invalid_features", f"{found} exceeds the model's max_feature_norm "
                   f"{max_norm:.4g}", where)


def to_matrix(instances: list[list[float] | SparseFeatures | NamedFeatures], n_features: int,
              field: str = "instances", first: int = 0) -> np.ndarray:
    """The ``(n, n_features)`` inputs of a batch; 422 naming ``field[i]`` as :func:`to_vector`
    (``i`` counted from ``first``: the index of ``instances[0]`` in the request).

    All-dense batches of the right width become one array in one call; the others are
    written row by row into one matrix (no second copy).
    """
    if all(isinstance(f, list) and len(f) == n_features for f in instances):
        return np.asarray(instances, dtype=np.float64).reshape(len(instances), n_features)
    X = np.zeros((len(instances), n_features))
    for i, f in enumerate(instances):
        to_vector(f, n_features, f"{field}[{first + i}]", X[i])
    return X


def row_spans(rows: int, width: int, max_cells: int) -> list[range]:
    """``range(rows)`` cut into consecutive spans of at most ``max_cells`` cells of rows of
    ``width`` (one row a span when a row alone is wider).

    A batch made dense one span at a time holds at most ``max_cells`` float64 of it at once
    (and at least one row: a model's width is bounded by its ``n_features`` limit).

    >>> row_spans(5, 100_000, 200_000)
    [range(0, 2), range(2, 4), range(4, 5)]
    """
    step = span_rows(width, max_cells)
    return [range(start, min(rows, start + step)) for start in range(0, rows, step)]


def span_rows(width: int, max_cells: int) -> int:
    """Rows of ``width`` in at most ``max_cells`` cells; 1 when a row alone is wider.

    >>> span_rows(100_000, 4_000_000), span_rows(10**6, 10)
    (40, 1)
    """
    return max(1, max_cells // max(1, width))
