"""Every Redis key and stream name of noisyloop, and nothing else.

All keys of one model share the hash tag ``{tenant:model}`` so that the
multi-key atomic steps of a model (Lua scripts, MULTI/EXEC) stay on one
Redis Cluster shard.  The tenant registry (``{tenants}``), the API-key
registry (``{keys}``) and the job queues (``{jobs}``) carry their own tags.
No other module builds a key string.

Layout (``T`` tenant, ``M`` model, ``E`` event id, ``K`` key id)::

    nl:{tenants}:index          hash  T -> JSON {"created_at"}
    nl:{tenants}:models:T       set   model ids of T
    nl:{tenants}:keys:T         set   key ids of T
    nl:{tenants}:all-models     set   "T/M" of every model (trainer discovery)
    nl:{keys}:K                 hash  tenant, salt, hash, created_at
    nl:{T:M}:model              hash  config (JSON), created_at
    nl:{T:M}:snap               hash  state (codec), version, last_id, counters
    nl:{T:M}:stats              hash  predictions, feedback_accepted, dead-letter counters
    nl:{T:M}:ctx:E              str   decision context (codec) or a tombstone
    nl:{T:M}:pending            zset  E -> deadline (Redis clock, seconds)
    nl:{T:M}:deferred           zset  E -> context expiry of a deferred decision not activated
    nl:{T:M}:part:E             hash  open decision: feedback so far (want, n, f, expiry, r)
    nl:{T:M}:appr:E             str   apprentice decision: "1" if the model agreed, else "0"
    nl:{T:M}:event-ids          zset  E -> expiry (Redis clock) of its ctx, part and appr keys
    nl:{T:M}:job-keys           zset  job, evaluation and event-id alias keys -> expiry (Unix s)
    nl:{T:M}:budget             hash  label-budget strategy state (rounds, state)
    nl:{T:M}:events             stream joined events, consumer group "trainers"
    nl:{T:M}:noise              hash  rho0, rho1, source, estimated_at, n_samples, history
    nl:{T:M}:samples            list  NREst sample buffer (capped)
    nl:{T:M}:anchors            str   anchor rows (propensity, score, click) of observed plays
    nl:{T:M}:scorer             str   shadow scorer of the anchor rows (codec)
    nl:{T:M}:lease              str   trainer lease owner (with expiry)
    nl:{T:M}:asleep             str   "1": the trainer stopped reading the model (also a channel)
    nl:{T:M}:dead               stream poison entries with the reason
    nl:{T:M}:series             list  quality time series, one JSON point each (capped)
    nl:{T:M}:drift              hash  drift detector: state (codec), report (JSON)
    nl:{T:M}:log                stream decision log: batches of applied events and markers
    nl:{T:M}:log-index          list  "entry id, events" of each batch in the log (retention)
    nl:{T:M}:item-ids           hash  rank models: candidate id hash (decimal) -> the id sent
    nl:{T:M}:log-published      str   id of the newest log entry published to Kafka
    nl:{T:M}:job:J              hash  NREst job status
    nl:{T:M}:job-pending        str   id of the model's queued or running NREst job
    nl:{T:M}:versions           zset  kept versions: JSON metadata, scored by version
    nl:{T:M}:vstates            hash  kept versions: "s:V" state (codec), "c:V" config (JSON)
    nl:{T:M}:challengers        hash  challenger name -> JSON definition (algorithm, params, uid)
    nl:{T:M}:ch-state           hash  challenger name -> learner state (codec)
    nl:{T:M}:ch-stats           hash  challenger name (or "_champion") -> JSON estimator sums
    nl:{jobs}:nrest             list  queued NREst jobs ("T/M/J")
    nl:{sweep}:due              zset  "T/M" -> when its earliest decision deadline passes
    nl:{jobs}:noise-due         zset  "T/M" -> when the jobs role next looks at its noise rates
    nl:{T:M}:eval:J             hash  policy evaluation job (request, status, result)
    nl:{jobs}:evaluations       list  queued policy evaluations ("T/M/J")
    nl:{workers}:W              str   worker heartbeat (with expiry)
    nl:{kafka}:decisions-since  str   log entry id from which a log never published to Kafka is
                                      published (when publishing began)
    nl:{rate:T}:bucket          hash  rate-limit token bucket of T (tokens, ts; expires)
"""

from __future__ import annotations

PREFIX = "nl"
#: Consumer group of the trainers on every model's event stream.
TRAINER_GROUP = "trainers"
#: Field of a model's stats hash: the newest stream id the trainer has handled (its batch
#: published, every after-publish step run, acknowledged); a sync waits for it.
HANDLED_FIELD = "trainer_handled_id"
#: Separator of "tenant/model" members (neither id may contain it).
MODEL_SEP = "/"

TENANT_INDEX = f"{PREFIX}:{{tenants}}:index"
ALL_MODELS = f"{PREFIX}:{{tenants}}:all-models"
NREST_QUEUE = f"{PREFIX}:{{jobs}}:nrest"
EVALUATION_QUEUE = f"{PREFIX}:{{jobs}}:evaluations"
#: Where the logs of models never published to Kafka start (set when publishing began).
DECISIONS_SINCE = f"{PREFIX}:{{kafka}}:decisions-since"
#: Sorted set: "tenant/model" -> Redis time from which the model's earliest pending
#: deadline has passed (:mod:`app.store.dueset`).
SWEEP_DUE = f"{PREFIX}:{{sweep}}:due"
#: Sorted set: "tenant/model" -> Unix time of the jobs role's next look at whether the
#: model's noise rates are due for an estimate (:mod:`app.store.dueset`).
NOISE_DUE = f"{PREFIX}:{{jobs}}:noise-due"


def tenant_models(tenant: str) -> str:
    """Set of the model ids of ``tenant``."""
    return f"{PREFIX}:{{tenants}}:models:{tenant}"


def tenant_keys(tenant: str) -> str:
    """Set of the API key ids of ``tenant``."""
    return f"{PREFIX}:{{tenants}}:keys:{tenant}"


def api_key(key_id: str) -> str:
    """Hash of one API key (tenant, salt, keyed hash of the secret)."""
    return f"{PREFIX}:{{keys}}:{key_id}"


def rate_bucket(tenant: str) -> str:
    """Token bucket of ``tenant``'s rate limit (own hash tag: spreads over Cluster shards)."""
    return f"{PREFIX}:{{rate:{tenant}}}:bucket"


def worker_heartbeat(worker_id: str) -> str:
    """Heartbeat of one worker process (expires when the worker dies)."""
    return f"{PREFIX}:{{workers}}:{worker_id}"


#: Pattern of the channels on which a sleeping model's trainer is woken (each channel is named
#: as the model's :attr:`ModelKeys.asleep` flag).
ASLEEP_CHANNELS = f"{PREFIX}:{{*}}:asleep"


def asleep_model(channel: str) -> tuple[str, str]:
    """``(tenant, model)`` of a channel of :data:`ASLEEP_CHANNELS` (tenant ids hold no
    ``:``)."""
    tag = channel.removeprefix(f"{PREFIX}:{{").removesuffix("}:asleep")
    tenant, model = tag.split(":", 1)
    return tenant, model


def model_ref(tenant: str, model: str) -> str:
    """The ``"tenant/model"`` member used in :data:`ALL_MODELS` and job ids."""
    return f"{tenant}{MODEL_SEP}{model}"


def split_model_ref(ref: str) -> tuple[str, str]:
    """Inverse of :func:`model_ref`."""
    tenant, model = ref.split(MODEL_SEP, 1)
    return tenant, model


class ModelKeys:
    """The keys of one model, all with the hash tag ``{tenant:model}``."""

    __slots__ = ("model", "tag", "tenant")

    def __init__(self, tenant: str, model: str) -> None:
        self.tenant = tenant
        self.model = model
        self.tag = f"{PREFIX}:{{{tenant}:{model}}}"

    @property
    def meta(self) -> str:
        """Hash: ``config`` (JSON) and ``created_at``."""
        return f"{self.tag}:model"

    @property
    def snapshot(self) -> str:
        """Hash: ``state``, ``version``, ``last_id`` and the trainer's counters."""
        return f"{self.tag}:snap"

    @property
    def stats(self) -> str:
        """Hash: counters of the model's requests and events (``predictions``,
        ``feedback_accepted``, ``events_dead_lettered``, ``dead_letters_dropped``)."""
        return f"{self.tag}:stats"

    @property
    def pending(self) -> str:
        """Sorted set: event id -> deadline of every decision awaiting feedback."""
        return f"{self.tag}:pending"

    @property
    def deferred(self) -> str:
        """Sorted set: event id -> context expiry (Redis clock, seconds) of every decision
        made with ``defer`` and not activated yet."""
        return f"{self.tag}:deferred"

    @property
    def events(self) -> str:
        """Stream of joined events (context + feedback) for the trainer."""
        return f"{self.tag}:events"

    @property
    def noise(self) -> str:
        """Hash: current noise rates, their source and estimate history."""
        return f"{self.tag}:noise"

    @property
    def samples(self) -> str:
        """List: capped NREst sample buffer."""
        return f"{self.tag}:samples"

    @property
    def anchors(self) -> str:
        """String: packed ``(propensity, score, click)`` float32 rows of the model's observed
        plays, oldest first (the anchor estimator's data)."""
        return f"{self.tag}:anchors"

    @property
    def anchor_scorer(self) -> str:
        """String: codec state of the shadow scorer that scored the anchor rows."""
        return f"{self.tag}:scorer"

    @property
    def lease(self) -> str:
        """String with expiry: which trainer owns the model."""
        return f"{self.tag}:lease"

    @property
    def asleep(self) -> str:
        """String: set when the model's trainer stopped reading its idle stream; a step that
        adds an entry removes it and publishes on the channel of the same name
        (:data:`ASLEEP_CHANNELS`, ``lua/lib_wake.lua``)."""
        return f"{self.tag}:asleep"

    @property
    def dead_letter(self) -> str:
        """Stream of event-stream entries the trainer could not apply, with the reason."""
        return f"{self.tag}:dead"

    @property
    def log(self) -> str:
        """Stream: the decision log, every applied event and marker
        (:mod:`app.store.decisionlog`)."""
        return f"{self.tag}:log"

    @property
    def series(self) -> str:
        """List: the model's quality time series, one JSON point each, oldest first (capped)."""
        return f"{self.tag}:series"

    @property
    def drift(self) -> str:
        """Hash: the drift detector's ``state`` (codec) and last ``report`` (JSON)."""
        return f"{self.tag}:drift"

    @property
    def log_index(self) -> str:
        """List: ``"<entry id> <events>"`` of each batch in the decision log, oldest first."""
        return f"{self.tag}:log-index"

    @property
    def item_ids(self) -> str:
        """Hash: a rank model's candidate ids by their 64-bit hash, as logged
        (:mod:`app.store.decisionlog`)."""
        return f"{self.tag}:item-ids"

    @property
    def feature_names(self) -> str:
        """Hash: a named feature's hashed key (``c:`` context, ``a:`` action) -> the bucket it
        hashed into, as requests named them (:mod:`app.store.featurenames`)."""
        return f"{self.tag}:feature-names"

    @property
    def feature_importances(self) -> str:
        """Hash: id -> JSON of each feature-importance report of the model."""
        return f"{self.tag}:feature-importances"

    @property
    def named_evaluations(self) -> str:
        """Hash: id -> JSON of each evaluation a client named (its policies' jobs, then
        their results)."""
        return f"{self.tag}:named-evaluations"

    @property
    def log_published(self) -> str:
        """String: id of the newest decision-log entry published to the Kafka decisions
        topic."""
        return f"{self.tag}:log-published"

    def context(self, event_id: str) -> str:
        """String: logged decision context of one event (or its tombstone)."""
        return f"{self.tag}:ctx:{event_id}"

    def partial(self, event_id: str) -> str:
        """Hash: feedback received so far for a decision that awaits more labels or copies,
        or adds up its feedback until its deadline."""
        return f"{self.tag}:part:{event_id}"

    def alias(self, event_id: str) -> str:
        """String: a decision known by a client's own event id (compatibility routes): the
        service's event id and the chosen action's id (JSON), or empty while it is made."""
        return f"{self.tag}:alias:{event_id}"

    def alias_rewards(self, event_id: str) -> str:
        """List: the rewards a client sent, by its own event id, before the decision was
        activated, in order (kept until they are learned)."""
        return f"{self.tag}:alias-rewards:{event_id}"

    def apprentice(self, event_id: str) -> str:
        """String: whether the model's own choice agreed with the baseline served for an
        apprentice decision (``"1"`` or ``"0"``; expires with the context)."""
        return f"{self.tag}:appr:{event_id}"

    @property
    def label_budget(self) -> str:
        """Hash: ``rounds`` and ``state`` (codec) of the model's label-budget strategy."""
        return f"{self.tag}:budget"

    def job(self, job_id: str) -> str:
        """Hash: status of one NREst job."""
        return f"{self.tag}:job:{job_id}"

    def evaluation(self, job_id: str) -> str:
        """Hash: request, status and result of one policy evaluation."""
        return f"{self.tag}:eval:{job_id}"

    @property
    def nrest_staged(self) -> str:
        """Sorted set: ids of the model's NREst jobs, scored by the Unix time their hash was
        stored as queued, until a sweeper sees them no longer queued
        (:meth:`app.store.jobs.JobQueue.requeue_stale`)."""
        return f"{self.tag}:job-staged"

    @property
    def evaluations_staged(self) -> str:
        """Sorted set: ids of the model's evaluation jobs, as :attr:`nrest_staged`."""
        return f"{self.tag}:eval-staged"

    @property
    def pending_job(self) -> str:
        """String with expiry: id of the model's NREst job while it is queued or running."""
        return f"{self.tag}:job-pending"

    @property
    def challengers(self) -> str:
        """Hash: challenger name -> JSON definition (``name``, ``algorithm``, ``params``,
        ``uid``, ``created_at``)."""
        return f"{self.tag}:challengers"

    @property
    def challenger_states(self) -> str:
        """Hash: challenger name -> codec state of its learner."""
        return f"{self.tag}:ch-state"

    @property
    def challenger_stats(self) -> str:
        """Hash: challenger name -> JSON of its estimator sums, events, status; ``_champion``
        -> the champion's on-policy sums over the events the challengers followed."""
        return f"{self.tag}:ch-stats"

    @property
    def versions(self) -> str:
        """Sorted set: JSON metadata of each kept version (``version``, ``created_at``,
        ``events_applied``, ``kept_at``, ``reason``), scored by the version."""
        return f"{self.tag}:versions"

    @property
    def version_states(self) -> str:
        """Hash: ``s:V`` the codec state and ``c:V`` the config JSON of each kept version V."""
        return f"{self.tag}:vstates"

    @property
    def event_index(self) -> str:
        """Sorted set: event id -> an upper bound of the expiry (Redis clock seconds) of its
        per-event keys (:meth:`context`, :meth:`partial`, :meth:`apprentice`), so that a
        delete finds them without a scan; entries past their expiry are trimmed as decisions
        are logged."""
        return f"{self.tag}:event-ids"

    @property
    def job_index(self) -> str:
        """Sorted set: key of each job or evaluation hash of the model (:meth:`job`,
        :meth:`evaluation`) and of each client event-id alias (:meth:`alias`,
        :meth:`alias_rewards`) -> an upper bound of its expiry (Unix seconds)."""
        return f"{self.tag}:job-keys"

    def event_keys(self, event_id: str) -> list[str]:
        """Every per-event key of one event (those :attr:`event_index` stands for)."""
        return [self.context(event_id), self.partial(event_id), self.apprentice(event_id)]

    def fixed(self) -> list[str]:
        """Every key of the model except the per-event and per-job ones (found through
        :attr:`event_index` and :attr:`job_index`)."""
        return [self.meta, self.snapshot, self.stats, self.pending, self.deferred, self.events,
                self.noise, self.samples, self.anchors, self.anchor_scorer, self.lease,
                self.asleep, self.dead_letter, self.label_budget, self.pending_job,
                self.nrest_staged, self.evaluations_staged, self.log,
                self.log_index, self.item_ids, self.feature_names, self.feature_importances,
                self.named_evaluations, self.log_published,
                self.series, self.drift, self.versions, self.version_states, self.challengers,
                self.challenger_states, self.challenger_stats, self.event_index,
                self.job_index]


#: Sorted set: worker id -> Redis time of its last heartbeat, for the workers
#: that run the trainer role (they share the models by counting each other).
#: Worker ids never start with "_", so this never collides with a heartbeat.
LIVE_TRAINERS = f"{PREFIX}:{{workers}}:_trainers"
#: Field of a model's noise hash: samples buffered since its last NREst run.
SAMPLES_NEW_FIELD = "samples_new"
