"""WorkerSettings: flags override the environment, which overrides the defaults; bad values stop
the worker at start-up, naming the setting."""

from __future__ import annotations

from typing import get_args

import pytest
from pydantic import ValidationError

from app.cli import build_parser, main
from app.commands.serve import serve_worker_settings
from app.commands.worker import worker_settings
from app.settings import Settings
from app.worker_settings import Role, WorkerSettings, default_worker_id
from workers.worker import ROLES


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No worker setting from the environment of the test run."""
    for name in WorkerSettings.model_fields:
        monkeypatch.delenv(WorkerSettings.env_var(name), raising=False)
    for name in ("NOISYLOOP_TRAINER_BATCH_SIZE", "NOISYLOOP_TRAINER_INTERVAL_SECONDS"):
        monkeypatch.delenv(name, raising=False)


def from_flags(*flags: str) -> WorkerSettings:
    return worker_settings(build_parser().parse_args(["worker", *flags]))


def test_defaults_without_environment_or_flags() -> None:
    settings = from_flags()
    assert settings == WorkerSettings()
    assert settings.roles == ("trainer", "jobs", "sweeper")
    assert settings.worker_id == default_worker_id()
    assert (settings.batch_size, settings.flush_interval, settings.lease_ttl) == (1000, 0.05, 10.0)


def test_environment_overrides_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NOISYLOOP_WORKER_BATCH_SIZE", "64")
    monkeypatch.setenv("NOISYLOOP_WORKER_LEASE_TTL", "2.5")
    monkeypatch.setenv("NOISYLOOP_WORKER_ROLES", "trainer, sweeper")
    monkeypatch.setenv("NOISYLOOP_WORKER_ID", "w-7")
    monkeypatch.setenv("NOISYLOOP_WORKER_NREST_THREADS", "true")
    settings = from_flags()
    assert (settings.batch_size, settings.lease_ttl) == (64, 2.5)
    assert settings.roles == ("trainer", "sweeper")
    assert settings.worker_id == "w-7" and settings.nrest_threads


def test_older_trainer_variables_are_read_and_the_new_names_win(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NOISYLOOP_TRAINER_BATCH_SIZE", "300")
    monkeypatch.setenv("NOISYLOOP_TRAINER_INTERVAL_SECONDS", "0.2")
    worker = Settings().worker
    assert (worker.batch_size, worker.flush_interval) == (300, 0.2)
    assert from_flags("--batch-size", "5").batch_size == 5
    monkeypatch.setenv("NOISYLOOP_WORKER_BATCH_SIZE", "400")
    assert Settings().worker.batch_size == 400


def test_flag_overrides_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NOISYLOOP_WORKER_BATCH_SIZE", "64")
    monkeypatch.setenv("NOISYLOOP_WORKER_POLL_INTERVAL", "0.3")
    monkeypatch.setenv("NOISYLOOP_WORKER_NREST_THREADS", "true")
    settings = from_flags("--batch-size", "7", "--roles", "jobs", "--no-nrest-threads")
    assert settings.batch_size == 7 and settings.roles == ("jobs",)
    assert not settings.nrest_threads
    assert settings.poll_interval == 0.3  # no flag: the environment's


def test_every_setting_has_a_flag_whose_help_is_its_description() -> None:
    parser = next(action for action in build_parser()._actions
                  if action.dest == "command").choices["worker"]  # type: ignore[index]
    parser.complete()
    helps = {action.dest: action.help or "" for action in parser._actions}
    for name, field in WorkerSettings.model_fields.items():
        assert name in helps, f"no flag for {name}"
        assert helps[name].startswith((field.description or "").rstrip(".")), name
        assert WorkerSettings.env_var(name) in helps[name]


@pytest.mark.parametrize(("flags", "named"), [
    (["--batch-size", "0"], "batch_size"),
    (["--flush-interval", "0"], "flush_interval"),
    (["--lease-ttl", "-1"], "lease_ttl"),
    (["--max-deliveries", "0"], "max_deliveries"),
    (["--roles", "trainer,trainr"], "roles"),
    (["--roles", ","], "roles"),
    (["--worker-id", "two words"], "worker_id"),
])
def test_unsafe_flag_refused_at_start_naming_the_setting(
        flags: list[str], named: str, capsys: pytest.CaptureFixture[str]) -> None:
    # refused before any Redis is needed (the URL points nowhere)
    assert main(["worker", "--redis-url", "redis://127.0.0.1:1", *flags]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"noisyloop worker: {named}"), err


def test_unsafe_environment_value_refused_naming_the_variable(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("NOISYLOOP_WORKER_HEARTBEAT_TTL", "0")
    assert main(["worker", "--redis-url", "redis://127.0.0.1:1", "--check"]) == 2
    assert capsys.readouterr().err == (
        "noisyloop worker: heartbeat_ttl: Input should be greater than or equal to 0.1 "
        "(got '0'; --heartbeat-ttl or NOISYLOOP_WORKER_HEARTBEAT_TTL)\n")
    monkeypatch.delenv("NOISYLOOP_WORKER_HEARTBEAT_TTL")
    monkeypatch.setenv("NOISYLOOP_TRAINER_BATCH_SIZE", "-5")
    assert main(["worker", "--redis-url", "redis://127.0.0.1:1"]) == 2
    assert capsys.readouterr().err.startswith(
        "noisyloop worker: batch_size: Input should be greater than or equal to 1 (got '-5'")


def test_unknown_keyword_refused() -> None:
    with pytest.raises(ValidationError, match="batch_sise"):
        WorkerSettings(batch_sise=10)  # type: ignore[call-arg]  # refused at run time too


def test_roles_are_the_workers_roles() -> None:
    assert list(ROLES) == list(get_args(Role))


def test_duplicate_roles_dropped_in_order() -> None:
    assert from_flags("--roles", "sweeper,trainer,sweeper").roles == ("sweeper", "trainer")
    assert WorkerSettings(roles=("jobs", "jobs")).roles == ("jobs",)


def test_an_algorithm_name_as_role_is_deprecated_and_means_trainer(
        caplog: pytest.LogCaptureFixture) -> None:
    assert from_flags("--roles", "uma,jobs").roles == ("trainer", "jobs")
    assert "role 'uma' is deprecated and means 'trainer'" in caplog.text


def test_the_former_nrest_role_is_the_jobs_role_with_a_warning(
        caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    assert from_flags("--roles", "trainer,nrest").roles == ("trainer", "jobs")
    assert "role 'nrest' is deprecated: it is called 'jobs' now" in caplog.text
    monkeypatch.setenv("NOISYLOOP_WORKER_ROLES", "nrest,jobs")
    assert Settings().worker.roles == ("jobs",)


def test_serve_worker_uses_the_environment_and_its_own_id(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NOISYLOOP_WORKER_BATCH_SIZE", "50")
    settings = serve_worker_settings(Settings())
    assert settings.batch_size == 50 and settings.worker_id.startswith("serve-")
    monkeypatch.setenv("NOISYLOOP_WORKER_ID", "api-1")
    assert serve_worker_settings(Settings()).worker_id == "api-1"


def _env_value(name: str) -> str:
    """A valid value of worker field ``name`` as an environment variable would give it."""
    default = WorkerSettings.model_fields[name].get_default(call_default_factory=True)
    if isinstance(default, tuple):
        return ",".join(default)
    return str(default).lower() if isinstance(default, bool) else str(default)


def test_every_worker_variable_sets_its_field_of_the_one_settings(
        monkeypatch: pytest.MonkeyPatch) -> None:
    for name in WorkerSettings.model_fields:
        monkeypatch.setenv(WorkerSettings.env_var(name), _env_value(name))
        assert name in Settings().worker.model_fields_set, WorkerSettings.env_var(name)
    monkeypatch.setenv("NOISYLOOP_WORKER_SWEEP_LIMIT", "17")
    monkeypatch.setenv("NOISYLOOP_WORKER_ID", "w-9")
    monkeypatch.setenv("NOISYLOOP_PORT", "8123")
    settings = Settings()
    assert (settings.worker.sweep_limit, settings.worker.worker_id, settings.port) == (
        17, "w-9", 8123)


def test_a_misspelt_worker_variable_is_refused_naming_it(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("NOISYLOOP_WORKER_BATCHSIZE", "10")
    with pytest.raises(ValidationError, match=r"worker\.batchsize"):
        Settings()
    assert main(["worker", "--redis-url", "redis://127.0.0.1:1", "--check"]) == 2
    assert capsys.readouterr().err == (
        "noisyloop worker: batchsize: Extra inputs are not permitted (got '10'; "
        "NOISYLOOP_WORKER_BATCHSIZE is no setting (did you mean "
        "'NOISYLOOP_WORKER_BATCH_SIZE'?))\n")
    assert main(["api", "--redis-url", "redis://127.0.0.1:1"]) == 2  # one settings: all refuse
    assert "NOISYLOOP_WORKER_BATCHSIZE is no setting" in capsys.readouterr().err
