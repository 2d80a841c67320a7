"""``make test-mutants``: plausible bugs put in a copy of the tree, each of which the truth
suite must catch.

Each :class:`Mutant` replaces one line of the code (found by its text, which must occur
exactly once in its file, so that the patch survives edits elsewhere in the file) and
runs the truth suite (``tests/truth``) on the copy, the tests expected to catch it first,
stopping at the first failure.  A mutant is *caught* when a test fails; *survived* when
the whole suite passes; *stale* when its line is no longer in the file (the code moved:
the list needs updating, and the run fails).  The unmutated copy must pass the catching
tests first.  Usage::

    python -m tests.mutants [--json PATH] [NAME ...]

Prints one line per mutant and exits non-zero unless every mutant is caught.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRUTH = "tests/truth"
#: The in-process truth tests, first in every run (fast: a caught mutant stops there).
ESTIMATORS = "tests/truth/test_estimators_truth.py"


@dataclass(frozen=True)
class Mutant:
    """One bug: in ``path``, the line holding ``line`` has it replaced by ``bug``."""

    name: str
    path: str
    line: str
    bug: str
    breaks: str
    """The numbers it makes wrong."""
    caught_by: tuple[str, ...]
    """The truth tests expected to catch it (run first)."""


def _test(name: str) -> str:
    return f"{ESTIMATORS}::{name}"


MUTANTS = (
    Mutant("drop the noise correction", "app/evaluation/rates.py",
           "return (f.astype(np.float64) if rates is None else rates.correct(f)), "
           "correction_of(rates)",
           "return f.astype(np.float64), correction_of(rates)",
           "every evaluation corrected by rates (label and rank, given or the model's): the "
           "raw click rate shown as the value",
           (_test("test_corrected_label_evaluations_cover_each_policys_true_value"),
            _test("test_each_slot_is_corrected_by_its_own_rates"))),
    Mutant("swap rho0 and rho1", "app/evaluation/rates.py",
           "r0, r1 = check_noise_rates(rho0, rho1)",
           "r1, r0 = check_noise_rates(rho0, rho1)",
           "evaluations corrected by scalar rates (a request's rho0/rho1, a label model's own)",
           (_test("test_corrected_label_evaluations_cover_each_policys_true_value"),)),
    Mutant("use slot 0's rates for every slot", "app/evaluation/rates.py",
           "return SlotRates((self.theta[k],), (self.rho0[k],), self.rho1, (self.theta_se[k],),",
           "return SlotRates((self.theta[0],), (self.rho0[0],), self.rho1, (self.theta_se[0],),",
           "a rank evaluation's positions below slot 0 and its slates (per-slot rates)",
           (_test("test_each_slot_is_corrected_by_its_own_rates"),)),
    Mutant("do not divide rho0 by theta", "app/learners/noise_slots.py",
           "rho0 = v / theta", "rho0 = v",
           "the per-slot estimate's rho0_k below slot 0 (GET .../noise slots), and what it "
           "corrects: position_bias users, rank evaluations by the model's rates",
           (_test("test_the_per_slot_estimate_covers_every_slots_rates"),)),
    Mutant("drop the rates' error from an interval", "app/evaluation/running.py",
           "return ((value - k) ** 2 * e.rho0_se ** 2 + value * value * e.rho1_se ** 2) "
           "/ e.beta ** 2",
           "return 0.0",
           "the champion's and challengers' intervals and vs_champion (GET .../challengers, "
           "gauges) at estimated rates: too narrow",
           (_test("test_running_values_carry_the_rates_errors"),)),
    Mutant("evaluate the wrong fixed label", "app/evaluation/shapes.py",
           'return functools.partial(fixed_policy, action=int(policy.partition(":")[2]))',
           'return functools.partial(fixed_policy, action=int(policy.partition(":")[2]) + 1)',
           "a label model's fixed:N evaluations",
           (_test("test_corrected_label_evaluations_cover_each_policys_true_value"),)),
    Mutant("publish without the width gate", "app/learners/noise_anchor.py",
           "elif 2.0 * z * max(se0, se1) > max_width:", "elif False:",
           "GET .../noise: a label estimate published with intervals wider than max_width, "
           "and every number corrected by it shown unflagged",
           (_test("test_no_label_noise_estimate_is_published_wider_than_max_width"),)),
    Mutant("ignore forgetting in a published estimate", "app/learners/noise_anchor.py",
           "a = age_weights(n, half_life)", "a = age_weights(n, None)",
           "GET .../noise with a half_life: the rates of the whole buffer shown as today's",
           (_test("test_a_forgetting_estimate_covers_the_rates_now"),)),
    Mutant("never withdraw a published estimate", "app/learners/noise_publish.py",
           'return out["status"] != "published" and out.get("reason") in WITHDRAWING',
           "return False",
           "GET .../noise and every number calibrated by the rates: an estimate a later "
           "refresh refused for its assumptions still shown (and used) as reliable",
           (_test("test_no_graded_world_shows_rates_past_a_refusal_of_its_assumption"),)),
    Mutant("publish without one right label stated", "app/learners/noise_anchor.py",
           "if not one_right_label:", "if False:",
           "GET .../noise of a ridge bandit at its defaults: rates published in a graded "
           "world, where no rates fit, and every number they calibrate shown unflagged",
           (_test("test_no_graded_world_is_published_for_a_model_at_its_defaults"),)),
    Mutant("learn every slot at slot 0's examination", "app/learners/rank.py",
           "alpha, beta = np.maximum(self._affine[0], self.theta_floor), self._affine[1]",
           "alpha, beta = np.maximum(np.full(self.slots, self._affine[0][0]), "
           "self.theta_floor), self._affine[1]",
           "a rank model's expected_reward (and its ranking) at a published per-slot "
           "estimate: clicks below slot 0 not divided by their examination",
           ("tests/truth/test_rank_rewards_truth.py",)),
    Mutant("swap rho0 and rho1 in the series' calibrated reward", "workers/series.py",
           "else calibrated_probability(online, rho0, rho1)),",
           "else calibrated_probability(online, rho1, rho0)),",
           "series points' calibrated_reward (GET .../series, the calibrated_reward gauge)",
           ("tests/truth/test_trust_truth.py::"
            "test_series_rewards_hold_slot_0s_relevance_at_published_rates",)),
    Mutant("take rho0's low end from the whole bottom band", "app/learners/noise_slots.py",
           "rho0_iv[:, 0], bottom_share = _bottom_low(rho0_iv, k, s, f, q_bottom, theta, se[0],",
           "_, bottom_share = _bottom_low(rho0_iv, k, s, f, q_bottom, theta, se[0],",
           "a rank model's per-slot rho0_k intervals under graded relevance: the bottom band's "
           "relevant items raise them past their truth",
           (_test("test_the_per_slot_rho0_intervals_hold_under_graded_relevance"),)),
)


def copy_tree(dest: Path) -> None:
    """The checkout's files (tracked and new, as git lists them) copied under ``dest``."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT,
                           check=True, capture_output=True).stdout.decode().split("\0")
    for name in filter(None, files):
        source = ROOT / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)


def pytest(tree: Path, tests: list[str]) -> subprocess.CompletedProcess[str]:
    """The truth tests ``tests`` on ``tree``, stopping at the first failure."""
    env = {**os.environ, "PYTHONPATH": f"{tree}{os.pathsep}{tree / 'clients/python/src'}",
           "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
                           "--no-header", "-o", "addopts=-ra", *tests],
                          cwd=tree, env=env, capture_output=True, text=True)


def first_failure(out: str) -> str:
    """The test named in pytest's first ``FAILED``/``ERROR`` summary line."""
    for line in out.splitlines():
        if line.startswith(("FAILED ", "ERROR ")):
            return line.split(" ")[1]
    return ""


def run(mutant: Mutant, tree: Path) -> dict[str, object]:
    """Apply ``mutant`` to ``tree``, run the truth suite, restore the file."""
    path = tree / mutant.path
    text = path.read_text()
    lines = [i for i, line in enumerate(text.splitlines()) if mutant.line in line]
    out: dict[str, object] = {**asdict(mutant), "caught_by": list(mutant.caught_by)}
    if len(lines) != 1:
        return {**out, "outcome": "stale", "lines_found": len(lines)}
    start = time.monotonic()
    path.write_text(text.replace(mutant.line, mutant.bug))
    try:
        done = pytest(tree, [*mutant.caught_by, TRUTH])
    finally:
        path.write_text(text)
    return {**out, "line_number": lines[0] + 1,
            "outcome": "survived" if done.returncode == 0 else "caught",
            "failed": first_failure(done.stdout), "seconds": round(time.monotonic() - start)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="mutants to run (default: all)")
    parser.add_argument("--json", help="write the results there")
    args = parser.parse_args(argv)
    chosen = [m for m in MUTANTS if not args.names or m.name in args.names]
    with tempfile.TemporaryDirectory(prefix="noisyloop-mutants-") as tmp:
        tree = Path(tmp)
        copy_tree(tree)
        catching = sorted({t for m in chosen for t in m.caught_by})
        baseline = pytest(tree, catching)
        if baseline.returncode != 0:
            print("the unmutated tree fails its catching tests:\n" + baseline.stdout[-3000:])
            return 2
        results = []
        for mutant in chosen:
            result = run(mutant, tree)
            results.append(result)
            print(f"{result['outcome']:8} {mutant.name} ({mutant.path}:"
                  f"{result.get('line_number', '?')}) {result.get('failed', '')}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")
    return 0 if all(r["outcome"] == "caught" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
