"""Request features -> a float64 vector of ``n_features``.

Named features are hashed as scikit-learn's ``FeatureHasher`` does
(``alternate_sign=True``): ``h = murmurhash3_32(name, seed=0)`` (signed),
bucket ``|h| mod n_features``, sign ``+1`` if ``h >= 0`` else ``-1``, so
that inner products stay unbiased under collisions.  The hash is stable
across processes and machines (never Python's salted ``hash()``).
"""

from __future__ import annotations

import numpy as np
from sklearn.utils import murmurhash3_32

from app.api.errors import ApiError
from app.api.schemas.predict import NamedFeatures, SparseFeatures


def hash_feature(name: str, n_features: int) -> tuple[int, float]:
    """Bucket and sign of a feature name.

    >>> hash_feature("country=FR", 1 << 20) == hash_feature("country=FR", 1 << 20)
    True
    """
    h = int(murmurhash3_32(name, seed=0, positive=False))
    return abs(h) % n_features, (1.0 if h >= 0 else -1.0)


def to_vector(features: list[float] | SparseFeatures | NamedFeatures, n_features: int,
              field: str = "features") -> np.ndarray:
    """The dense input of a learner; 422 naming ``field`` on a wrong length or index."""
    if isinstance(features, list):
        if len(features) != n_features:
            raise ApiError(422, "invalid_features",
                           f"expected {n_features} features, got {len(features)}", field)
        return np.asarray(features, dtype=np.float64)
    x = np.zeros(n_features)
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
        key, amount = (f"{name}={value}", 1.0) if isinstance(value, str) else (name, value)
        bucket, sign = hash_feature(key, n_features)
        x[bucket] += sign * amount
    if not np.all(np.isfinite(x)):
        raise ApiError(422, "invalid_features", "hashed features overflow", field)
    return x


def to_matrix(instances: list[list[float] | SparseFeatures | NamedFeatures], n_features: int,
              field: str = "instances") -> np.ndarray:
    """The ``(n, n_features)`` inputs of a batch; 422 naming ``field[i]`` as :func:`to_vector`.

    All-dense batches of the right width become one array in one call.
    """
    if all(isinstance(f, list) and len(f) == n_features for f in instances):
        return np.asarray(instances, dtype=np.float64).reshape(len(instances), n_features)
    return np.stack([to_vector(f, n_features, f"{field}[{i}]") for i, f in enumerate(instances)])
