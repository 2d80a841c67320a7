"""The one protocol every noisyloop learner implements.

A learner is a plain numpy object (no I/O, no clocks, no HTTP, no Redis):

* ``decide(x, explore=True)`` makes one decision for one input and returns a
  :class:`Decision`: the JSON-friendly ``output`` the client sees and the
  ``context`` (named numpy arrays) that must be logged with the event so that
  a *delayed* feedback can later be joined with it.
* ``learn_one(event)`` learns from one joined event: the logged context plus
  the feedback fields (``click``, ``label``, ``values``, ...).
* ``learn_many(batch)`` learns from a columnar batch of joined events (every
  field stacked along axis 0).  By default it loops over ``learn_one``;
  learners whose updates depend only on logged quantities ("LO", logged-only)
  override it with one matrix product.
* ``get_state()`` / ``set_state(state)`` export and import the learned arrays
  as ``dict[str, np.ndarray]`` (names end in ``_``).

The constructor takes hyper-parameters only, as keyword arguments, validates
them once, keeps each under an attribute of its name and raises
:class:`ParamError` (a ``ValueError`` naming the parameter) when one is out
of range.  Randomness comes only from the ``seed`` parameter.

Capabilities.  What a service must know of a learner, it asks the class, never
the algorithm's name (after scikit-learn's estimator tags and River's
``_tags``): class attributes and class methods of :class:`Learner`, with
defaults here that a learner overrides.  A driver (the API, the workers, the
replay command) reads them from the class before it builds a learner.

* ``task``, ``feedback_fields``, ``logged_only``, ``paper``: what the learner
  decides and learns from (see :class:`Learner`).
* ``uses_noise_rates`` / :meth:`~Learner.takes_noise_rates`: the learner reads
  click-noise rates (:meth:`~Learner.set_noise_rates`); a service refuses
  rates for a model that ignores them.  :meth:`~Learner.set_noise_reliability`
  tells it whether those rates are an estimate or configured (reliable) or
  initial rates awaiting an estimate; a calibrated reward in its decisions then
  carries ``calibration_unreliable``.
* ``one_right_label``: the learner's setting has exactly one right label per input
  (noisy multi-class classification), the assumption under which click-noise rates are
  identifiable from its plays (:mod:`app.learners.noise_anchor`); a driver publishes an
  anchor estimate of another learner's rates only when the model states it.
* ``keeps_noise_samples``: a driver buffers the logged ``(x, played, click)``
  of observed feedback and refits the noise rates on them (NREst,
  :func:`app.learners.noise.estimate_noise_rates`) while the rates were not
  configured by hand; ``owns_noise_estimate``: NREst is part of the algorithm,
  so it refits even over configured rates; :meth:`~Learner.noise_samples`:
  the buffer's size from the hyper-parameters (None: the driver's default).
* ``takes_confusion_matrix``: the learner corrects for a label-noise confusion
  matrix (:meth:`~Learner.set_confusion`, :meth:`~Learner.confusion_report`).
* :meth:`~Learner.labels_per_event`: labels one event needs at least before
  it can be learned from (a label budget cannot promise more than one).
* :meth:`~Learner.no_click_feedback`: the feedback fields of a decision left
  unanswered (None: it cannot become a no-click event, only be dropped).
* ``ranks_candidates``: ``decide`` takes the request's candidate actions
  (``actions=``, ``slots=``) and fills slots with them;
  ``estimates_position_bias``: the learner weighs clicks by a position bias per
  slot (:meth:`~Learner.position_bias_estimate`, the one it learns with when no
  per-slot estimate is handed to it) and says what a model shows while no
  per-slot estimate is published (:meth:`~Learner.position_bias_prior`);
  ``logs_placements``: each shown slot's placement probability and score are
  logged and its feedback is a click (:meth:`~Learner.placement_rows`), so a
  driver estimates examination and click noise per slot from its placements
  (:mod:`app.learners.noise_slots`) and hands the estimate back
  (:meth:`~Learner.set_slot_noise`).
* ``follows_baseline``: :meth:`~Learner.follow` (``follow_ranking`` for
  learners that rank candidates) turns a decision made without exploration
  into one that plays the caller's own choice (a service's apprentice mode:
  the caller's baseline is served and learned from, the learner's greedy
  choice is kept beside it).
* ``service_defaults``: hyper-parameters a service uses instead of the
  constructor's defaults (the client's ``params`` still win).
* :meth:`~Learner.state_bytes`, :meth:`~Learner.buffer_bytes`: the memory a
  model takes, from the shapes, before anything is allocated.

The contract tests (``tests/learners/test_contract.py``) check every
registered learner against what it declares.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

import numpy as np

Event = Mapping[str, Any]
"""One joined event: logged context fields plus feedback fields."""

Batch = Mapping[str, np.ndarray]
"""Columnar batch of joined events: each field stacked along axis 0."""

State = dict[str, np.ndarray]


class ParamError(ValueError):
    """An invalid hyper-parameter or input; ``field`` names the culprit."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True)
class ConfusionReport:
    """The confusion matrix a learner uses now and where it comes from."""

    matrix: list[list[float]]
    """Rows: noisy label ``p``; columns: true class ``q``."""
    configured: bool
    """Set by the client (else estimated from gold examples, or the identity until then)."""
    n_gold: int
    """Gold examples counted."""
    ready: bool
    """Whether a configured or estimated matrix is in use (not the identity)."""
    message: str | None = None
    """Why the gold estimate is not in use (None when it is, or when configured)."""


@dataclass(frozen=True)
class Decision:
    """One decision: what the client sees and what must be logged.

    Attributes
    ----------
    output:
        JSON-serialisable response fields, e.g. ``{"label": 3,
        "probability": 0.91, "greedy_label": 3}``.
    context:
        Named arrays to log with the event (``x``, greedy and played labels,
        their probability, ...).  ``learn_one`` receives them back, joined
        with the feedback.
    """

    output: dict[str, Any]
    context: dict[str, np.ndarray] = field(default_factory=dict)


class Learner(ABC):
    """Base class of all learners (see the module docstring).

    Subclasses set ``task`` (``label``, ``label_set``, ``regression``,
    ``noisy_label`` or ``noisy_input``), ``feedback_fields`` (the feedback
    keys ``learn_one`` reads), ``logged_only`` (True when an update
    depends only on logged quantities, so batches commute) and ``paper``
    (where the algorithm comes from: authors, title and the algorithm or
    section; the algorithm reference in ``docs/algorithms.md`` shows it).
    """

    task: ClassVar[str]
    feedback_fields: ClassVar[tuple[str, ...]]
    logged_only: ClassVar[bool] = False
    paper: ClassVar[str] = ""
    uses_noise_rates: ClassVar[bool] = False
    """Whether the learner reads click-noise rates (it then has ``set_noise_rates``)."""
    noise_rates_reliable: bool = True
    """Whether the noise rates in force are an estimate or configured (False: initial rates
    awaiting an estimate); see :meth:`set_noise_reliability`."""
    one_right_label: ClassVar[bool] = False
    """Whether its setting has exactly one right label per input (multi-class
    classification), so that an anchor estimate of its click-noise rates rests on an
    assumption the learner itself makes (else the model must state it)."""
    keeps_noise_samples: ClassVar[bool] = False
    """Whether a driver keeps NREst samples for it and hands it their estimates (it then
    uses noise rates and learns from clicks)."""
    owns_noise_estimate: ClassVar[bool] = False
    """Whether NREst is part of the algorithm: its estimates replace even rates configured
    by hand (it then keeps noise samples)."""
    takes_confusion_matrix: ClassVar[bool] = False
    """Whether the learner corrects for a label-noise confusion matrix (it then has
    ``set_confusion`` and ``confusion_report``)."""
    ranks_candidates: ClassVar[bool] = False
    """Whether ``decide`` ranks candidate actions given with the request (``actions=``)."""
    estimates_position_bias: ClassVar[bool] = False
    """Whether the learner weighs clicks by a position bias per slot (``position_bias_estimate``,
    ``position_bias_prior``)."""
    logs_placements: ClassVar[bool] = False
    """Whether its placements feed the per-slot click-noise estimate (``placement_rows``,
    ``set_slot_noise``)."""
    follows_baseline: ClassVar[bool] = False
    """Whether :meth:`follow` can play the caller's own choice in place of the learner's."""
    explains_scores: ClassVar[bool] = False
    """Whether ``feature_effects`` splits a candidate's score into one term per input
    feature (a linear score: the term is the feature's value times its effect)."""
    exploration_param: ClassVar[str | None] = None
    """The hyper-parameter holding the share of decisions spread uniformly over the choices
    (in ``[0, 1]``), which a service setting of the exploration share sets; None: none."""
    service_defaults: ClassVar[Mapping[str, Any]] = {}
    """Hyper-parameters a service uses instead of the constructor's defaults (e.g. to keep
    snapshots small); a client's params still win, replay keeps the constructor's."""

    @classmethod
    def takes_noise_rates(cls, params: Mapping[str, Any]) -> bool:
        """Whether a model of this class with hyper-parameters ``params`` uses noise rates."""
        return cls.uses_noise_rates

    @classmethod
    def noise_samples(cls, params: Mapping[str, Any]) -> int | None:
        """NREst samples kept for a model with ``params`` (None: the driver's default)."""
        return None

    @classmethod
    def labels_per_event(cls, params: Mapping[str, Any]) -> int:
        """Labels an event must carry at least before a model with ``params`` learns from it."""
        return 1

    @classmethod
    def no_click_feedback(cls, params: Mapping[str, Any]) -> dict[str, np.ndarray] | None:
        """Feedback fields of an unanswered decision of a model with ``params`` (no click);
        None when the learner does not learn from clicks."""
        return {"click": np.array(0.0)} if "click" in cls.feedback_fields else None

    @classmethod
    def observed_clicks(cls, batch: Batch) -> np.ndarray:
        """One observed click per event of a joined batch, as a service's reward counters
        average it (``debiased_reward``): the ``click`` field; empty without one."""
        return np.asarray(batch.get("click", np.empty(0)), dtype=np.float64)

    @classmethod
    def drift_strata(cls, batch: Batch) -> np.ndarray:
        """The stratum of each event of :meth:`observed_clicks` for the drift detector
        (:mod:`app.learners.drift`): ``2 played + (played != greedy)`` when the batch logs
        one played and one greedy label per event, the policy's choice the detector must
        not mistake for a change of the world; else 0 for every event."""
        n = cls.observed_clicks(batch).shape[0]
        played, greedy = batch.get("played"), batch.get("greedy")
        if played is None or greedy is None:
            return np.zeros(n, dtype=np.intp)
        played, greedy = np.asarray(played), np.asarray(greedy)
        if played.shape != (n,) or greedy.shape != (n,) or played.dtype.kind not in "iu" \
                or greedy.dtype.kind not in "iu" or (n and played.min() < 0):
            return np.zeros(n, dtype=np.intp)
        strata: np.ndarray = 2 * played.astype(np.intp) + (played != greedy)
        return strata

    @classmethod
    def state_bytes(cls, n_features: int, n_classes: int | None,
                    params: Mapping[str, Any]) -> int:
        """Bytes of :meth:`get_state` for this config, from the shapes alone.

        Nothing is allocated, so that a service can refuse a model too large
        to build before building it.  ``params`` holds every hyper-parameter
        (defaults filled in); a size parameter of the wrong type raises
        :class:`ParamError`.  Every registered learner declares it (the
        tests compare it with :meth:`get_state`).
        """
        raise NotImplementedError(f"{cls.__name__} does not declare its state size")

    @classmethod
    def buffer_bytes(cls, n_features: int, n_classes: int | None,
                     params: Mapping[str, Any]) -> int:
        """Bytes a driver keeps per model of this class beside its state (none by default)."""
        return 0

    @abstractmethod
    def decide(self, x: np.ndarray, explore: bool = True) -> Decision:
        """Decide for one input ``x`` of shape ``(n_features,)``."""

    @abstractmethod
    def learn_one(self, event: Event) -> None:
        """Learn from one joined event (logged context + feedback)."""

    def learn_many(self, batch: Batch) -> None:
        """Learn from a columnar batch; by default one event at a time."""
        for event in iter_events(batch):
            self.learn_one(event)

    @abstractmethod
    def get_state(self) -> State:
        """Copy of the learned arrays, by name."""

    @abstractmethod
    def set_state(self, state: Mapping[str, np.ndarray]) -> None:
        """Replace the learned arrays; shapes must match those of ``get_state``."""

    def decide_many(self, X: np.ndarray, explore: bool = True) -> list[Decision]:
        """Decide for each row of ``X``; learners may vectorise this."""
        return [self.decide(x, explore=explore) for x in X]

    def decide_contexts(self, X: np.ndarray, explore: bool = True) -> Batch:
        """The contexts of :meth:`decide_many`, stacked as columns (what a learner that
        follows logged plays learns from); learners may build the columns directly."""
        return stack_events([d.context for d in self.decide_many(X, explore=explore)])

    def follow(self, decision: Decision, baseline: int) -> Decision:
        """``decision`` (made without exploration) playing the label ``baseline`` instead,
        with probability 1 (a deterministic choice of the caller's), its greedy label kept.

        For label learners that declare ``follows_baseline``: their context
        logs the ``played`` label and its probability ``prob``, so that the
        feedback teaches them about the label served.  Output fields about the
        played label other than the label itself (``expected_reward``) are
        dropped when the baseline is not the greedy label.
        """
        if not self.follows_baseline:
            raise NotImplementedError(f"{type(self).__name__} does not follow a baseline")
        if int(decision.context["played"]) == baseline:
            return decision
        output = {k: v for k, v in decision.output.items()
                  if k not in ("expected_reward", "calibration_unreliable")}
        output.update(label=baseline, probability=1.0)
        context: dict[str, Any] = {**decision.context, "played": baseline, "prob": 1.0}
        return Decision(output, context)

    def set_noise_rates(self, rho0: float, rho1: float) -> None:
        """Use click-noise rates from now on (learners that declare ``uses_noise_rates``)."""
        raise NotImplementedError(f"{type(self).__name__} uses no noise rates")

    def set_noise_reliability(self, reliable: bool) -> None:
        """Whether the rates of :meth:`set_noise_rates` can be trusted for calibration
        (:attr:`noise_rates_reliable`; learners that declare ``uses_noise_rates``)."""
        if not self.uses_noise_rates:
            raise NotImplementedError(f"{type(self).__name__} uses no noise rates")
        self.noise_rates_reliable = bool(reliable)

    def position_bias_estimate(self) -> tuple[np.ndarray, str]:
        """Position bias per slot relative to slot 0 that the learner learns with when no
        per-slot estimate is handed to it, and its source (learners that declare
        ``estimates_position_bias``)."""
        raise NotImplementedError(f"{type(self).__name__} has no position bias")

    @classmethod
    def position_bias_prior(cls, params: Mapping[str, Any]) -> tuple[tuple[float, ...], str]:
        """Position bias per slot that a model with ``params`` shows while no per-slot
        estimate is published, and its source: the values it was given (``configured``) or
        1 per slot (``insufficient_data``) (learners that declare ``estimates_position_bias``;
        :func:`app.learners.noise_publish.position_bias` is the rule that picks)."""
        raise NotImplementedError(f"{cls.__name__} has no position bias")

    @classmethod
    def placement_rows(cls, batch: Batch
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(slot, probability, score, click)`` of every shown slot of a joined batch, in
        order (learners that declare ``logs_placements``)."""
        raise NotImplementedError(f"{cls.__name__} logs no placements")

    def set_slot_noise(self, affine: tuple[Sequence[float], Sequence[float]] | None) -> None:
        """Use the per-slot click model ``P(click | slot k, R) = beta_k + alpha_k R`` given as
        ``(alpha, beta)``, or None to go back to the noise rates (learners that declare
        ``logs_placements``)."""
        raise NotImplementedError(f"{type(self).__name__} logs no placements")

    def set_confusion(self, matrix: np.ndarray | Sequence[Sequence[float]] | None) -> None:
        """Use the client's confusion matrix, or None to estimate it again (learners that
        declare ``takes_confusion_matrix``)."""
        raise NotImplementedError(f"{type(self).__name__} takes no confusion matrix")

    def confusion_report(self) -> ConfusionReport:
        """The confusion matrix in use and where it comes from (learners that declare
        ``takes_confusion_matrix``)."""
        raise NotImplementedError(f"{type(self).__name__} takes no confusion matrix")


class CandidateRanker(Protocol):
    """What a learner that declares ``ranks_candidates`` offers a driver (``follow_ranking``:
    if it also declares ``follows_baseline``)."""

    def decide(self, x: np.ndarray, explore: bool = True, *,
               actions: np.ndarray | None = None, slots: int | None = None,
               allowed: np.ndarray | None = None) -> Decision: ...

    def follow_ranking(self, x: np.ndarray, baseline: Sequence[int], *,
                       actions: np.ndarray | None = None, slots: int | None = None,
                       allowed: np.ndarray | None = None) -> Decision: ...

    def first_slot_probabilities(self, x: np.ndarray, actions: np.ndarray) -> np.ndarray: ...

    def feature_effects(self, x: np.ndarray, actions: np.ndarray
                        ) -> tuple[float, np.ndarray, np.ndarray]: ...


def check_state(expected: Mapping[str, np.ndarray], given: Mapping[str, np.ndarray]) -> State:
    """Validate ``given`` against ``expected`` names and shapes; return float copies.

    Raises :class:`ParamError` naming the first mismatching array.
    """
    missing = set(expected) - set(given)
    if missing:
        raise ParamError("state", f"missing arrays: {sorted(missing)}")
    out: State = {}
    for name, ref in expected.items():
        arr = np.asarray(given[name])
        if arr.shape != ref.shape:
            raise ParamError(f"state.{name}", f"shape {arr.shape} != expected {ref.shape}")
        if arr.dtype.kind in "fc" and not np.all(np.isfinite(arr)):
            raise ParamError(f"state.{name}", "contains non-finite values")
        out[name] = arr.astype(ref.dtype, copy=True)
    return out


def stack_events(events: Sequence[Event]) -> dict[str, np.ndarray]:
    """Turn a list of events into a columnar batch (fields stacked on axis 0).

    The variable-length fields (:data:`PADDED_FIELDS`: ORS's ``values``,
    KernelOGD's ``copies``, a rank decision's ``candidates``) are padded with
    ``NaN`` rows to the longest, an event without one as if it had none; their
    readers ignore ``NaN`` rows.  Any other field must have the same shape in
    every event (numpy raises otherwise).

    >>> stack_events([{"values": np.array([1.0])}, {"values": np.array([2.0, 3.0])}])["values"]
    array([[ 1., nan],
           [ 2.,  3.]])
    """
    if not events:
        return {}
    keys = dict.fromkeys(events[0].keys())
    keys.update(dict.fromkeys(k for e in events for k in e if k in PADDED_FIELDS))
    return {k: _stack_field(_padded_column(events, k), True) if k in PADDED_FIELDS
            else _stack_field([np.asarray(e[k]) for e in events], False) for k in keys}


#: Fields whose length varies between events (padded with NaN rows in a batch): feedback
#: fields, and the candidates a rank decision logs for its model's challengers.
PADDED_FIELDS = frozenset({"values", "copies", "candidates"})


def _padded_column(events: Sequence[Event], key: str) -> list[np.ndarray]:
    """The field ``key`` of each event, with no rows where an event lacks it."""
    arrays = [np.asarray(e[key]) if key in e else None for e in events]
    like = next(a for a in arrays if a is not None)
    empty = np.empty((0, *like.shape[1:]), dtype=like.dtype)
    return [empty if a is None else a for a in arrays]


def _stack_field(arrays: list[np.ndarray], pad: bool) -> np.ndarray:
    """Stack one field; with ``pad``, NaN-pad float arrays that differ only in their first axis."""
    first = arrays[0].shape
    if not pad or all(a.shape == first for a in arrays) or not all(
            a.ndim >= 1 and a.shape[1:] == first[1:] and a.dtype.kind == "f" for a in arrays):
        return np.stack(arrays)  # same shapes, or numpy's error for incompatible ones
    out = np.full((len(arrays), max(a.shape[0] for a in arrays), *first[1:]), np.nan,
                  dtype=np.result_type(*arrays))
    for i, a in enumerate(arrays):
        out[i, : a.shape[0]] = a
    return out


def iter_events(batch: Batch) -> Iterator[dict[str, np.ndarray]]:
    """Iterate over the rows of a columnar batch as single events."""
    n = batch_size(batch)
    for i in range(n):
        yield {k: v[i] for k, v in batch.items()}


def batch_size(batch: Batch) -> int:
    """Number of events in a columnar batch."""
    return len(next(iter(batch.values()))) if batch else 0


def check_range(name: str, value: float, low: float, high: float,
                low_open: bool = False, high_open: bool = False) -> float:
    """Return ``value`` as float if it lies in the interval, else raise ParamError."""
    v = float(value)
    ok_low = v > low if low_open else v >= low
    ok_high = v < high if high_open else v <= high
    if not (np.isfinite(v) and ok_low and ok_high):
        lb = "(" if low_open else "["
        rb = ")" if high_open else "]"
        raise ParamError(name, f"must lie in {lb}{low}, {high}{rb}, got {value!r}")
    return v


def check_positive(name: str, value: float) -> float:
    """``value`` as a float if it is finite and ``> 0``, else :class:`ParamError`."""
    return check_range(name, value, 0.0, np.inf, low_open=True, high_open=True)


def check_non_negative(name: str, value: float) -> float:
    """``value`` as a float if it is finite and ``>= 0``, else :class:`ParamError`."""
    return check_range(name, value, 0.0, np.inf, high_open=True)


def check_int(name: str, value: int, low: int, high: int | None = None) -> int:
    """Return ``value`` if it is an integer in ``[low, high]``, else raise ParamError."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ParamError(name, f"must be an integer, got {value!r}")
    if value < low or (high is not None and value > high):
        bound = f"[{low}, {high}]" if high is not None else f">= {low}"
        raise ParamError(name, f"must be {bound}, got {value}")
    return int(value)


#: Bytes of one float64 or int64 state entry.
ITEM_BYTES = 8


def size_param(params: Mapping[str, Any], name: str) -> int:
    """The integer size parameter ``name`` of ``params`` (ParamError if it is not one)."""
    return check_int(name, params[name], 0)


def check_input(x: np.ndarray, n_features: int) -> np.ndarray:
    """Return ``x`` as a float64 vector of length ``n_features`` or raise ParamError."""
    arr = np.asarray(x, dtype=np.float64)
    if arr.shape != (n_features,):
        raise ParamError("features", f"expected shape ({n_features},), got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ParamError("features", "contains non-finite values")
    return arr
