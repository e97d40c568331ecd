"""How sure a score is, and whether a difference between two runs is real.

Data model: an evaluation has cases; case ``i`` has a weight ``w_i`` and ``k_i`` samples, each
scored 0/1 (pass) or in [0, 1]. A case's score is the mean over its samples; the suite score is
the weight-averaged case score. The estimand is the *population* suite score: the weighted mean
``E[w p] / E[w]`` of the cases' true scores ``p_i`` over the population the cases were drawn
from. Uncertainty therefore comes from resampling *cases* (the case-level bootstrap captures both
which cases were picked and how their few samples fell).

Method choices (each measured by simulation; see docs/statistics.md for the figures):

- Intervals for a suite score: bootstrap over cases, BCa (bias-corrected and accelerated)
  evaluated at Hesterberg's small-sample "expanded" levels. Plain percentile intervals cover
  only 89-94 % at 20 cases with skewed scores; this construction covers 94-97 %.
- When every case score is 0 or 1 the suite score is a proportion and the Wilson score
  interval (with Kish's effective sample size under weights) replaces the bootstrap: with 20
  binary cases at a pass rate near 0.9 every bootstrap variant covers only about 90 %.
- Paired comparison: paired bootstrap (same construction) for the interval of the difference;
  the paired t-test for the p-value (calibrated in simulation, unlike the sign-flip
  permutation test, which is conservative when per-case differences tie; that one stays
  available as ``test="sign_flip"``).
- Rare events (hard fails, leaks): the exact stratified count test (Fisher's exact test by
  case, ``exact_count_test``); a paired t-test over cases cannot see one new event against a
  baseline of none. Its smallest attainable p-value lets the gate's Holm family leave it out
  when it cannot reach its share (Tarone; ``holm_alphas``).
- Flaky cases: the exact Clopper-Pearson interval (``clopper_pearson``) and the chi-square tail
  (``chi2_sf``) for overdispersion across runs.
- The regression gate is a one-sided test at ``alpha`` (a regression is a one-direction
  question), so its false-alarm rate is ``alpha``, not ``alpha / 2``.

Quantiles: the normal distribution comes from :class:`statistics.NormalDist` (stdlib, exact to
double precision); Student's t CDF uses the closed-form finite series for integer degrees of
freedom, inverted by bisection. No scipy.

Every result holds builtin ``float``/``int`` values only, so it crosses pytest-xdist's
serializer and ``json.dumps`` unchanged.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import lru_cache
from statistics import NormalDist
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, Union

from leader_eval.bounded.numeric import np

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = [
    "CountTest",
    "Estimate",
    "GateStatistic",
    "PairedComparison",
    "PairedDecision",
    "Verdict",
    "chi2_sf",
    "clopper_pearson",
    "decide_paired",
    "exact_count_test",
    "gate_statistic",
    "holm_adjusted",
    "holm_alphas",
    "holm_steps",
    "paired_compare",
    "pass_at_k",
    "pass_hat_k",
    "pool_runs",
    "rate_ci",
    "regression_verdict",
    "run_spread",
    "simulated_power",
    "suite_estimate",
    "t_quantile",
    "tarone_family",
    "weighted_mean_ci",
    "worsened_rates",
]

Verdict = Literal["pass", "fail", "improved"]
# Case scores and weights: any sequence of numbers, numpy arrays included.
if TYPE_CHECKING:
    Numbers: TypeAlias = Sequence[float] | npt.NDArray[Any]
else:  # numpy loads at its first use (bounded.numeric): typing.get_type_hints resolves it then
    Numbers = Union[Sequence[float], "np.ndarray"]  # a string cannot join a "|"

_NORMAL = NormalDist()
# Upper bound on the elements of one resampling matrix; larger jobs are split into row blocks
# so memory stays near 64 MB whatever the suite size.
_MAX_MATRIX_ELEMENTS = 4_000_000
# Enumerate all 2**m sign patterns up to this many non-zero differences.
_EXACT_SIGN_FLIP_MAX = 16


# --------------------------------------------------------------------------------------------
# Result records
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Estimate:
    """A point estimate with its confidence interval and how much data it rests on.

    ``note`` says when the interval is not an ordinary one (no cases, a single case, every case
    scored the same, the Wilson interval used for binary case scores).
    """

    value: float
    low: float
    high: float
    n_cases: int
    n_samples: int
    confidence: float = 0.95
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Estimate:
        return cls(
            value=float(data["value"]),
            low=float(data["low"]),
            high=float(data["high"]),
            n_cases=int(data["n_cases"]),
            n_samples=int(data["n_samples"]),
            confidence=float(data.get("confidence", 0.95)),
            note=str(data.get("note", "")),
        )


@dataclass(frozen=True)
class PairedComparison:
    """Run B against run A over the cases both have: ``diff = b - a`` (weighted means).

    ``low``/``high`` bound ``diff`` (paired bootstrap over cases, at ``confidence``);
    ``p_value`` is two-sided (sign-flip permutation test of "no difference").
    """

    metric: str
    a: float
    b: float
    diff: float
    low: float
    high: float
    p_value: float
    n_cases: int
    confidence: float = 0.95
    test: str = "t"  # how p_value was computed: "t", "sign_flip_exact" or "sign_flip_mc"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PairedComparison:
        return cls(
            metric=str(data["metric"]),
            a=float(data["a"]),
            b=float(data["b"]),
            diff=float(data["diff"]),
            low=float(data["low"]),
            high=float(data["high"]),
            p_value=float(data["p_value"]),
            n_cases=int(data["n_cases"]),
            confidence=float(data.get("confidence", 0.95)),
            test=str(data.get("test", "t")),
        )


# --------------------------------------------------------------------------------------------
# Distribution helpers (no scipy)
# --------------------------------------------------------------------------------------------


def _t_cdf(t: float, df: int) -> float:
    """Student's t CDF for integer ``df`` from the closed-form finite series (exact)."""
    theta = math.atan2(t, math.sqrt(df))
    s, c = math.sin(theta), math.cos(theta)
    c2 = c * c
    if df % 2 == 1:
        term = c
        total = c if df > 1 else 0.0
        for j in range(1, (df - 1) // 2):
            term *= c2 * (2 * j) / (2 * j + 1)
            total += term
        return 0.5 + (theta + s * total) / math.pi
    term = total = 1.0
    for j in range(1, df // 2):
        term *= c2 * (2 * j - 1) / (2 * j)
        total += term
    return 0.5 + s * total / 2


@lru_cache(maxsize=256)
def _t_ppf(q: float, df: int) -> float:
    """Quantile of Student's t with integer ``df`` >= 1."""
    if not 0.0 < q < 1.0:
        raise ValueError(f"quantile level must be in (0, 1), got {q}")
    if df > 400:
        # Cornish-Fisher (Abramowitz & Stegun 26.7.5); at df > 400 its error is < 1e-9 and the
        # series above would need df / 2 terms per bisection step.
        z = _NORMAL.inv_cdf(q)
        g1 = (z**3 + z) / 4
        g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
        g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
        return z + g1 / df + g2 / df**2 + g3 / df**3
    lo, hi = -1.0, 1.0
    while _t_cdf(lo, df) > q:
        lo *= 2
    while _t_cdf(hi, df) < q:
        hi *= 2
    for _ in range(100):
        mid = (lo + hi) / 2
        if _t_cdf(mid, df) < q:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12:
            break
    return (lo + hi) / 2


def t_quantile(q: float, df: int) -> float:
    """Quantile ``q`` of Student's t with integer ``df`` >= 1 (exact CDF inverted by bisection)."""
    return _t_ppf(q, df)


def _wilson(p: float, n: float, confidence: float) -> tuple[float, float]:
    """Wilson score interval for a proportion ``p`` observed over ``n`` (possibly effective) trials."""
    z = _NORMAL.inv_cdf(1 - (1 - confidence) / 2)
    z2 = z * z
    denom = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(max(p * (1 - p), 0.0) / n + z2 / (4 * n * n)) / denom
    # p = 0 or 1 must keep that end exactly (rounding would otherwise give 1e-17 instead of 0).
    low = 0.0 if p <= 0.0 else max(0.0, centre - half)
    high = 1.0 if p >= 1.0 else min(1.0, centre + half)
    return low, high


# --------------------------------------------------------------------------------------------
# Bootstrap over cases
# --------------------------------------------------------------------------------------------


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")


def _as_arrays(values: Numbers, weights: Numbers | None) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(values, dtype=float).reshape(-1)
    if weights is None:
        w = np.ones_like(x)
    else:
        w = np.asarray(weights, dtype=float).reshape(-1)
        if w.shape != x.shape:
            raise ValueError(f"{x.size} case scores but {w.size} weights")
    if not np.all(np.isfinite(x)):
        raise ValueError("case scores must be finite numbers")
    if not (np.all(np.isfinite(w)) and np.all(w > 0)):
        # A zero-weight case would make some resamples 0/0; drop such cases before calling.
        raise ValueError("weights must be finite and > 0")
    return x, w


def _bootstrap_means(x: np.ndarray, w: np.ndarray, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """Weighted means of ``n_boot`` resamples of the cases (rows of one index matrix per block)."""
    n = x.size
    wx = w * x
    out = np.empty(n_boot)
    rows = max(1, _MAX_MATRIX_ELEMENTS // n)
    for start in range(0, n_boot, rows):
        stop = min(n_boot, start + rows)
        idx = rng.integers(0, n, size=(stop - start, n))
        out[start:stop] = wx[idx].sum(axis=1) / w[idx].sum(axis=1)
    return out


def _bca_expanded_interval(
    x: np.ndarray, w: np.ndarray, value: float, boots: np.ndarray, confidence: float
) -> tuple[float, float]:
    """BCa interval read at Hesterberg's small-sample expanded levels.

    Expansion: the nominal tail ``alpha`` becomes ``2 * Phi(-sqrt(n/(n-1)) * t_{alpha/2, n-1})``,
    which undoes the bootstrap's ``(n-1)/n`` variance shrinkage and uses t rather than normal
    tails. BCa then shifts those levels for median bias (z0) and skewness (acceleration ``a``,
    from the leave-one-case-out jackknife). Both corrections were needed to reach 94-97 %
    coverage at 20 cases (docs/statistics.md).
    """
    n = x.size
    alpha = 1.0 - confidence
    t = _t_ppf(1.0 - alpha / 2, n - 1)
    # With 2-3 cases the expanded tail underflows to 0 (t with 1 df is huge); keep it a valid
    # probability so the interval becomes the bootstrap's full range instead of an error.
    alpha_x = min(max(2.0 * _NORMAL.cdf(-math.sqrt(n / (n - 1)) * t), 1e-12), alpha)

    b = boots.size
    below = float(np.mean(boots < value) + 0.5 * np.mean(boots == value))
    below = min(max(below, 1.0 / (b + 1)), b / (b + 1))
    z0 = _NORMAL.inv_cdf(below)

    wx, sw = w * x, w.sum()
    jack = (wx.sum() - wx) / (sw - w)
    d = jack.mean() - jack
    ss = float(np.sum(d * d))
    accel = float(np.sum(d**3)) / (6.0 * ss**1.5) if ss > 0 else 0.0

    levels = []
    for z in (_NORMAL.inv_cdf(alpha_x / 2), _NORMAL.inv_cdf(1 - alpha_x / 2)):
        zz = z0 + z
        denom = 1.0 - accel * zz
        # A huge acceleration can flip the mapping; fall back to the expanded percentile level.
        levels.append(_NORMAL.cdf(z0 + zz / denom) if denom > 0 else _NORMAL.cdf(z))
    low, high = np.quantile(boots, levels)
    # BCa ends need not bracket the point estimate in degenerate resamples; users rely on it.
    return min(float(low), value), max(float(high), value)


def _interval(
    x: np.ndarray, w: np.ndarray, *, confidence: float, n_boot: int, rng: np.random.Generator, allow_wilson: bool
) -> tuple[float, float, float, str]:
    """(value, low, high, note) for the weighted mean of ``x`` with at least one case."""
    n = x.size
    value = float(np.sum(w * x) / np.sum(w))
    if n == 1:
        return value, value, value, _ONE_CASE
    if allow_wilson and np.all((x == 0.0) | (x == 1.0)):
        n_eff = float(w.sum() ** 2 / np.sum(w * w))
        low, high = _wilson(value, n_eff, confidence)
        return value, low, high, _wilson_note(n_eff)
    if np.all(x == x[0]):
        return value, value, value, f"all {n} cases scored {value:g}: the bootstrap interval has zero width"
    boots = _bootstrap_means(x, w, n_boot, rng)
    low, high = _bca_expanded_interval(x, w, value, boots, confidence)
    return value, low, high, ""


_ONE_CASE = "one case: no spread to estimate an interval from; interval is degenerate"


def _wilson_note(n_eff: float) -> str:
    return f"binary case scores: Wilson score interval (effective n {n_eff:.1f})"


#: whole-number weights summing below this keep every sum, square and product below it exact
#: in a double (2**26 squared is 2**52), whatever order the sums are taken in
_EXACT_WEIGHT_TOTAL = 2.0**26


_NUMBER_TYPES = frozenset((float, int))  # not bool: True is 1, yet not a score or a weight
_ZERO_ONE = frozenset((0, 1))
_ONE = frozenset((1,))


def _whole_counts(values: Numbers, weights: Numbers | None) -> tuple[int, float, float, float] | None:
    """(cases, total weight, weight passed, sum of squared weights) of 0/1 case scores with
    whole-number weights given as lists, or None for anything else (numpy arrays included).

    Every sum here is of whole numbers below ``_EXACT_WEIGHT_TOTAL``, so it is exact in any order:
    the estimate made from them is the one the arrays give bit for bit (numpy sums pairwise),
    and a run whose case scores are all 0 or 1 (one sample per case, the usual CI shape) never
    loads numpy for them."""
    if not isinstance(values, list | tuple) or not (weights is None or isinstance(weights, list | tuple)):
        return None
    if weights is not None and len(weights) != len(values):
        return None  # the arrays' error
    if len(values) < _EXACT_WEIGHT_TOTAL and (
        weights is None or (set(map(type, weights)) <= _NUMBER_TYPES and set(weights) <= _ONE)
    ):
        # every weight 1 (the usual suite): the same checks and sums by set and sum, in C (the
        # loop below took ~1.2 ms a call for 2,000 cases, eight calls a summary)
        if not set(map(type, values)) <= _NUMBER_TYPES or not set(values) <= _ZERO_ONE:
            return None
        n = len(values)
        return n, float(n), float(sum(values)), float(n)
    total = passed = squares = 0.0
    for i, v in enumerate(values):
        if type(v) not in (float, int) or (v != 0 and v != 1):
            return None
        w = 1.0 if weights is None else weights[i]
        if type(w) not in (float, int) or not 0 < w < _EXACT_WEIGHT_TOTAL or w != int(w):
            return None
        total += w
        squares += w * w
        if v:
            passed += w
    if total >= _EXACT_WEIGHT_TOTAL:
        return None
    return len(values), float(total), float(passed), float(squares)


def _counted_estimate(
    n: int, total: float, passed: float, squares: float, *, n_samples: int | None, confidence: float
) -> Estimate:
    """``weighted_mean_ci`` of 0/1 case scores from ``_whole_counts`` (its notes, word for word)."""
    samples = n if n_samples is None else int(n_samples)
    if n == 0:
        nan = float("nan")
        return Estimate(nan, nan, nan, 0, samples, float(confidence), "no cases")
    value = passed / total
    if n == 1:
        return Estimate(value, value, value, n, samples, float(confidence), _ONE_CASE)
    n_eff = total**2 / squares
    low, high = _wilson(value, n_eff, confidence)
    return Estimate(value, low, high, n, samples, float(confidence), _wilson_note(n_eff))


def weighted_mean_ci(
    case_scores: Numbers,
    weights: Numbers | None = None,
    *,
    n_samples: int | None = None,
    confidence: float = 0.95,
    n_boot: int = 2000,
    seed: int = 0,
) -> Estimate:
    """Weighted mean of case scores with a bootstrap-over-cases confidence interval.

    The interval is BCa with small-sample expansion (see module doc); binary case scores get
    the Wilson interval instead. Edge cases: no cases gives NaN value and bounds; one case or
    all-equal non-binary scores give a zero-width interval; ``note`` says which.

    ``n_samples`` is the total number of samples behind the case scores (defaults to the
    number of cases, i.e. one sample per case). The result is a pure function of the inputs
    and ``seed``.
    """
    _check_confidence(confidence)
    if n_boot < 100:
        raise ValueError(f"n_boot must be >= 100 for stable interval ends, got {n_boot}")
    # a seed numpy's generator would refuse takes the arrays' way, to be refused as before
    counted = _whole_counts(case_scores, weights) if type(seed) is int and seed >= 0 else None
    if counted is not None:
        return _counted_estimate(*counted, n_samples=n_samples, confidence=confidence)
    x, w = _as_arrays(case_scores, weights)
    n = int(x.size)
    samples = n if n_samples is None else int(n_samples)
    if n == 0:
        nan = float("nan")
        return Estimate(nan, nan, nan, 0, samples, float(confidence), "no cases")
    rng = np.random.default_rng(seed)
    value, low, high, note = _interval(x, w, confidence=confidence, n_boot=n_boot, rng=rng, allow_wilson=True)
    return Estimate(value, low, high, n, samples, float(confidence), note)


def suite_estimate(
    samples_by_case: Mapping[str, Sequence[float]],
    weights: Mapping[str, float] | None = None,
    *,
    confidence: float = 0.95,
    n_boot: int = 2000,
    seed: int = 0,
) -> Estimate:
    """Suite score from per-sample results: case score = mean of its samples, then
    :func:`weighted_mean_ci`. Cases are taken in sorted id order so the result does not depend
    on dict order. A case with no samples is an error (it has no score)."""
    ids = sorted(samples_by_case)
    scores: list[float] = []
    total = 0
    for cid in ids:
        values = samples_by_case[cid]
        if len(values) == 0:
            raise ValueError(f"case {cid!r} has no samples")
        scores.append(float(np.mean(np.asarray(values, dtype=float))))
        total += len(values)
    w = None if weights is None else [float(weights[cid]) for cid in ids]
    return weighted_mean_ci(scores, w, n_samples=total, confidence=confidence, n_boot=n_boot, seed=seed)


def rate_ci(successes: int, trials: int, confidence: float = 0.95, *, n_cases: int | None = None) -> Estimate:
    """A plain rate (e.g. hard-fail rate over samples) with its Wilson score interval.

    ``trials`` is recorded as ``n_samples``; ``n_cases`` defaults to ``trials`` (pass the
    number of distinct cases when the trials are samples of fewer cases). Note that Wilson
    treats the trials as independent: for per-sample rates whose samples cluster by case,
    prefer :func:`suite_estimate` on the 0/1 samples, which resamples cases.
    """
    _check_confidence(confidence)
    if trials < 0 or not 0 <= successes <= trials:
        raise ValueError(f"need 0 <= successes <= trials, got {successes}/{trials}")
    cases = trials if n_cases is None else int(n_cases)
    if trials == 0:
        nan = float("nan")
        return Estimate(nan, nan, nan, cases, 0, float(confidence), "no trials")
    p = successes / trials
    low, high = _wilson(p, float(trials), confidence)
    return Estimate(float(p), low, high, cases, int(trials), float(confidence), "Wilson score interval")


# --------------------------------------------------------------------------------------------
# Paired comparison
# --------------------------------------------------------------------------------------------


def _sign_flip_p(d: np.ndarray, w: np.ndarray, n_perm: int, rng: np.random.Generator) -> tuple[float, str]:
    """Two-sided p-value of sum(w*d) under random sign flips of the per-case differences.

    Under "no difference" each case's two runs are exchangeable, so each difference is as
    likely to have either sign. Zero differences contribute nothing whatever their sign, so
    they are dropped first: that keeps the exact enumeration usable for more suites.
    """
    x = (w * d)[d != 0]
    m = int(x.size)
    if m == 0:
        return 1.0, "sign_flip_exact"
    observed = abs(float(x.sum()))
    # Equal sums computed in another order differ in the last bits; count them as ties.
    threshold = observed - 1e-9 * max(1.0, float(np.abs(x).sum()))
    if m <= _EXACT_SIGN_FLIP_MAX:
        patterns = np.arange(2**m, dtype=np.int64)[:, None] >> np.arange(m, dtype=np.int64)
        signs = (patterns & 1) * 2.0 - 1.0
        return float(np.mean(np.abs(signs @ x) >= threshold)), "sign_flip_exact"
    hits = 0
    rows = max(1, _MAX_MATRIX_ELEMENTS // m)
    for start in range(0, n_perm, rows):
        size = min(rows, n_perm - start)
        signs = rng.integers(0, 2, size=(size, m)) * 2.0 - 1.0
        hits += int(np.count_nonzero(np.abs(signs @ x) >= threshold))
    # (hits + 1) / (n + 1): the observed labelling counts as one draw, so p is never 0.
    return (hits + 1) / (n_perm + 1), "sign_flip_mc"


def _paired_t_p(d: np.ndarray, w: np.ndarray, n_perm: int, rng: np.random.Generator) -> tuple[float, str]:
    """Two-sided paired t-test of mean difference 0 (weighted mean, linearised standard error).

    With equal weights this is the textbook paired t-test on n - 1 degrees of freedom. When
    every difference is the same the standard error is 0 and t is undefined; the exact
    sign-flip test answers then (all differences zero: p = 1).
    """
    n = d.size
    if n < 2:
        return 1.0, "t"
    sw = float(w.sum())
    diff = float(np.sum(w * d)) / sw
    resid = w * (d - diff) / sw
    se = math.sqrt(n / (n - 1) * float(np.sum(resid * resid)))
    # A spread below rounding noise of the mean means "all differences equal".
    if se <= 1e-12 * max(1.0, abs(diff)):
        return _sign_flip_p(d, w, n_perm, rng)
    t = abs(diff) / se
    return float(min(1.0, 2.0 * (1.0 - _t_cdf(t, n - 1)))), "t"


def paired_compare(
    a_scores: Mapping[str, float],
    b_scores: Mapping[str, float],
    weights: Mapping[str, float] | None = None,
    *,
    metric: str = "score",
    confidence: float = 0.95,
    n_boot: int = 2000,
    seed: int = 0,
    test: Literal["t", "sign_flip"] = "t",
    n_perm: int = 10_000,
) -> PairedComparison:
    """Compare run B with run A case by case, over the cases both have.

    ``diff = weighted mean(b) - weighted mean(a)``; the interval comes from resampling cases
    (both runs' scores of a case travel together) with the same BCa-expanded construction as
    :func:`weighted_mean_ci`. ``p_value`` is two-sided, from

    - ``test="t"`` (default): the paired t-test on the per-case differences. Measured by
      simulation it is calibrated (4-6 % false positives at 5 % for 20-50 cases, 1-10 samples
      per case; docs/statistics.md) and more powerful than the sign-flip test, which is
      conservative when many differences tie (k samples give only 2k+1 possible values);
    - ``test="sign_flip"``: the sign-flip permutation test, exact (all sign patterns) when at
      most 16 cases differ, else Monte Carlo with ``n_perm`` draws from ``seed``. Its false
      positive rate never exceeds the level, at the price of power.

    For a one-sided question halve ``p_value`` (both null distributions are symmetric), which
    is what :func:`regression_verdict` does.
    """
    _check_confidence(confidence)
    if test not in ("t", "sign_flip"):
        raise ValueError(f"test must be 't' or 'sign_flip', got {test!r}")
    common = sorted(set(a_scores) & set(b_scores))
    if not common:
        raise ValueError("the two runs have no cases in common")
    if weights is None:
        w = np.ones(len(common))
    else:
        missing = [cid for cid in common if cid not in weights]
        if missing:
            raise ValueError(f"no weight for cases {missing[:5]}{' ...' if len(missing) > 5 else ''}")
        w = np.array([float(weights[cid]) for cid in common])
    a = np.array([float(a_scores[cid]) for cid in common])
    b = np.array([float(b_scores[cid]) for cid in common])
    _, w = _as_arrays(a, w)
    _as_arrays(b, w)
    d = b - a
    boot_rng, perm_rng = (np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(2))
    # Wilson is for proportions; differences always go through the bootstrap.
    diff, low, high, _ = _interval(d, w, confidence=confidence, n_boot=n_boot, rng=boot_rng, allow_wilson=False)
    if test == "t":
        p, used = _paired_t_p(d, w, n_perm, perm_rng)
    else:
        p, used = _sign_flip_p(d, w, n_perm, perm_rng)
    sw = float(w.sum())
    return PairedComparison(
        metric=metric,
        a=float(np.sum(w * a) / sw),
        b=float(np.sum(w * b) / sw),
        diff=diff,
        low=low,
        high=high,
        p_value=float(p),
        n_cases=len(common),
        confidence=float(confidence),
        test=used,
    )


# --------------------------------------------------------------------------------------------
# Exact binomial interval and the chi-square tail (flaky cases)


def _binom_cdf(x: int, n: int, p: float) -> float:
    """P(X <= x) for X ~ Binomial(n, p), summed in log space (exact to rounding for any n)."""
    if x < 0:
        return 0.0
    if x >= n:
        return 1.0
    if p <= 0.0:
        return 1.0
    if p >= 1.0:
        return 0.0
    lp, lq = math.log(p), math.log1p(-p)
    lg = math.lgamma
    terms = [lg(n + 1) - lg(i + 1) - lg(n - i + 1) + i * lp + (n - i) * lq for i in range(x + 1)]
    top = max(terms)
    return min(1.0, math.exp(top) * sum(math.exp(t - top) for t in terms))


def clopper_pearson(successes: int, trials: int, confidence: float = 0.95) -> tuple[float, float]:
    """Exact (Clopper-Pearson) interval for a binomial proportion: it covers at least ``confidence``
    for every true rate. The ends solve ``P(X >= x | low) = P(X <= x | high) = (1 - confidence) / 2``
    by bisection on the exact binomial CDF (no scipy)."""
    _check_confidence(confidence)
    if trials < 1 or not 0 <= successes <= trials:
        raise ValueError(f"need 0 <= successes <= trials and trials >= 1, got {successes}/{trials}")
    tail = (1.0 - confidence) / 2.0

    def solve(f: Any) -> float:
        lo, hi = 0.0, 1.0
        for _ in range(60):
            mid = (lo + hi) / 2
            if f(mid):
                hi = mid
            else:
                lo = mid
        return (lo + hi) / 2

    low = 0.0 if successes == 0 else solve(lambda p: 1.0 - _binom_cdf(successes - 1, trials, p) >= tail)
    high = 1.0 if successes == trials else solve(lambda p: _binom_cdf(successes, trials, p) <= tail)
    return low, high


def chi2_sf(x: float, df: int) -> float:
    """Upper tail ``P(X >= x)`` of the chi-square distribution with integer ``df`` >= 1: the
    regularized upper incomplete gamma ``Q(df/2, x/2)`` (series below ``a + 1``, continued
    fraction above, as in Numerical Recipes), accurate to about 1e-12."""
    if df < 1:
        raise ValueError(f"df must be >= 1, got {df}")
    if x <= 0:
        return 1.0
    a, z = df / 2.0, x / 2.0
    log_front = a * math.log(z) - z - math.lgamma(a)
    if z < a + 1:
        term = total = 1.0 / a
        ap = a
        for _ in range(10_000):
            ap += 1
            term *= z / ap
            total += term
            if abs(term) < abs(total) * 1e-15:
                break
        return max(0.0, 1.0 - total * math.exp(log_front))
    tiny = 1e-300
    b = z + 1 - a
    c = 1 / tiny
    d = 1 / b
    h = d
    for i in range(1, 10_000):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1 / d
        delta = d * c
        h *= delta
        if abs(delta - 1) < 1e-15:
            break
    return min(1.0, math.exp(log_front) * h)


# --------------------------------------------------------------------------------------------
# Rare events: exact stratified count test


@dataclass(frozen=True)
class CountTest:
    """Exact test that run B has more (or fewer) events than run A, case by case.

    ``p_more``: one-sided p-value of "B has no more events than A" (small when B has more);
    ``p_less`` the mirror image. ``min_p_more`` / ``min_p_less``: the smallest values those
    p-values could take given the per-case event totals, i.e. whether the test can reach a level
    at all (with no event in either run both are 1). ``method``: ``exact`` (the enumerated null
    distribution) or ``normal`` (its normal approximation with a continuity correction, used when
    the enumeration would cost more than ``EXACT_COUNT_WORK``; the same statistic and null).
    """

    events_a: int
    samples_a: int
    events_b: int
    samples_b: int
    expected_b: float
    p_more: float
    p_less: float
    min_p_more: float
    min_p_less: float
    n_cases: int
    method: str = "exact"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


#: most support points the exact count test will enumerate (all cases together)
MAX_COUNT_SUPPORT = 1_000_000
#: most multiply-adds the exact enumeration may cost (the convolution of the cases' null
#: distributions); beyond it the normal approximation answers. At that size every case total is
#: large or there are thousands of cases, where the approximation is accurate to well under the
#: levels the gate uses, and a hostile golden (a billion samples per case, 100,000 cases) cannot
#: hang the gate.
EXACT_COUNT_WORK = 20_000_000


@lru_cache(maxsize=4096)
def _hypergeom_pmf(total: int, events: int, draws: int) -> tuple[int, np.ndarray]:
    """(first support point, pmf) of the events among ``draws`` of ``total`` samples holding ``events``.

    Cached (read-only arrays): a suite's cases share a few (samples, events) shapes, and the gate,
    compare and the simulations ask for the same ones again and again."""
    return _hypergeom_pmf_uncached(int(total), int(events), int(draws))


def _hypergeom_pmf_uncached(total: int, events: int, draws: int) -> tuple[int, np.ndarray]:
    lo, hi = max(0, events - (total - draws)), min(events, draws)
    x = np.arange(lo, hi + 1, dtype=float)
    lg = np.vectorize(math.lgamma)
    # log C(events, x) + log C(total - events, draws - x), normalised: lgamma is accurate to ~1e-15
    # relative, and normalising by the sum removes the common log C(total, draws)
    logp = (
        lg(events + 1.0) - lg(x + 1) - lg(events - x + 1)
        + lg(total - events + 1.0) - lg(draws - x + 1) - lg(total - events - draws + x + 1)
    )  # fmt: skip
    p = np.exp(logp - logp.max())
    p /= p.sum()
    p.setflags(write=False)
    return lo, p


def _hypergeom_moments(total: np.ndarray, events: np.ndarray, draws: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and variance of the hypergeometric count (arrays, elementwise)."""
    total = np.asarray(total, dtype=float)
    frac = np.asarray(draws, dtype=float) / np.where(total > 0, total, 1.0)
    mean = events * frac
    with np.errstate(divide="ignore", invalid="ignore"):
        var = np.where(total > 1, events * frac * (1 - frac) * (total - events) / (total - 1), 0.0)
    return mean, np.maximum(var, 0.0)


def _normal_tails(
    observed: np.ndarray, mean: np.ndarray | float, var: np.ndarray | float
) -> tuple[np.ndarray, np.ndarray]:
    """(P(S >= observed), P(S <= observed)) by the normal approximation with continuity correction."""
    sd = np.sqrt(var)
    with np.errstate(divide="ignore", invalid="ignore"):
        z_more = np.where(sd > 0, (observed - 0.5 - mean) / np.where(sd > 0, sd, 1.0), -np.inf)
        z_less = np.where(sd > 0, (observed + 0.5 - mean) / np.where(sd > 0, sd, 1.0), np.inf)
    erfc = np.vectorize(math.erfc, otypes=[float])
    return 0.5 * erfc(z_more / math.sqrt(2.0)), 0.5 * erfc(-z_less / math.sqrt(2.0))


def exact_count_test(a: Mapping[str, tuple[int, int]], b: Mapping[str, tuple[int, int]]) -> CountTest:
    """Exact stratified test of event counts (hard fails, leaks, passes) of run B against run A.

    ``a`` and ``b`` map case id -> ``(events, scored samples)``; cases in both with samples on
    both sides are compared. Under "no change" each case has one event probability, whatever it
    is, shared by its samples in both runs. Conditional on a case's total events, B's share of
    them is hypergeometric and free of that probability, so the test is exact for any mix of
    case rates (a case that always fails contributes no evidence, as it should). The statistic
    is B's total events; its null distribution is the convolution of the cases' hypergeometrics.
    This is Fisher's exact test stratified by case (exact Cochran-Mantel-Haenszel). When the
    convolution would cost more than ``EXACT_COUNT_WORK`` multiply-adds, the same statistic is
    referred to its normal approximation (exact conditional mean and variance, continuity
    correction): ``method`` says which.

    Why not the paired t-test: against a baseline with zero events almost every per-case
    difference is 0, and one new event in one case moves no t statistic; 5 new events in 5 cases
    give p = (1/3)^5 = 0.004 here at 6 baseline and 3 new samples per case.
    """
    common = sorted(cid for cid in set(a) & set(b) if a[cid][1] > 0 and b[cid][1] > 0)
    for cid in common:
        for side, (x, n) in (("A", a[cid]), ("B", b[cid])):
            if not 0 <= x <= n:
                raise ValueError(f"case {cid!r}: run {side} has {x} events in {n} samples")
    rows = [(a[cid][0] + b[cid][0], a[cid][1] + b[cid][1], b[cid][1]) for cid in common]  # (t, N, n_b)
    spans = [(max(0, t - (n - nb)), min(t, nb)) for t, n, nb in rows]
    observed = sum(b[cid][0] for cid in common)
    support = sum(hi - lo for lo, hi in spans) + 1
    work = cum = 0
    for lo, hi in spans:
        cum += hi - lo
        work += (cum + 1) * (hi - lo + 1)
    expected = sum(t * nb / n for t, n, nb in rows)
    offset = sum(lo for lo, _ in spans)
    if work <= EXACT_COUNT_WORK and support <= MAX_COUNT_SUPPORT:
        # the extremes of the null distribution are products of the cases' extremes
        log_top = log_bottom = 0.0
        dist = np.ones(1)
        for t, n, nb in rows:
            if t == 0:
                continue
            _, pmf = _hypergeom_pmf(n, t, nb)
            log_bottom += math.log(pmf[0]) if pmf[0] > 0 else -math.inf
            log_top += math.log(pmf[-1]) if pmf[-1] > 0 else -math.inf
            dist = np.convolve(dist, pmf)
        k = observed - offset
        # exact-integer support: tails are plain sums, clipped against rounding above 1
        p_more = float(min(1.0, dist[max(k, 0) :].sum())) if k < dist.size else 0.0
        p_less = float(min(1.0, dist[: k + 1].sum())) if k >= 0 else 0.0
        min_more, min_less, method = math.exp(log_top), math.exp(log_bottom), "exact"
    else:
        t_arr = np.array([r[0] for r in rows], dtype=float)
        mean, var = _hypergeom_moments(
            np.array([r[1] for r in rows], dtype=float), t_arr, np.array([r[2] for r in rows], dtype=float)
        )
        m, v = float(mean.sum()), float(var.sum())
        pm, pl = _normal_tails(np.array([observed, offset + support - 1, offset], dtype=float), m, v)
        p_more, p_less = float(pm[0]), float(pl[0])
        # the smallest p this approximation can give: the statistic at its extremes
        min_more, min_less, method = float(pm[1]), float(pl[2]), "normal"
    return CountTest(
        events_a=sum(a[cid][0] for cid in common),
        samples_a=sum(a[cid][1] for cid in common),
        events_b=observed,
        samples_b=sum(b[cid][1] for cid in common),
        expected_b=expected,
        p_more=p_more,
        p_less=p_less,
        min_p_more=min_more,
        min_p_less=min_less,
        n_cases=len(common),
        method=method,
    )


# --------------------------------------------------------------------------------------------
# pass@k and pass^k
# --------------------------------------------------------------------------------------------


def _integer(v: object) -> bool:
    # a numpy integer exists only once numpy is loaded: no need to load it to ask
    return isinstance(v, int) or ("numpy" in sys.modules and isinstance(v, np.integer))


def _check_nck(n: int, c: int, k: int) -> None:
    if not (_integer(n) and _integer(c) and _integer(k)):
        raise TypeError("n, c and k must be integers")
    if n < 1:
        raise ValueError(f"need at least one sample, got n={n}")
    if not 0 <= c <= n:
        raise ValueError(f"need 0 <= c <= n, got c={c}, n={n}")
    if not 1 <= k <= n:
        raise ValueError(f"need 1 <= k <= n (k samples out of the n drawn), got k={k}, n={n}")


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from ``n`` samples of which ``c`` passed: ``1 - C(n-c, k) / C(n, k)``,
    the chance that at least one of ``k`` samples drawn without replacement passes.

    Computed as ``1 - prod_{i=n-c+1}^{n} (1 - k/i)`` so large ``n`` neither overflows nor loses
    precision in a ratio of huge binomials.
    """
    _check_nck(n, c, k)
    if n - c < k:
        return 1.0
    if c <= 1:  # a product of no factor or one, as numpy's would give it (a one-sample case per call)
        return 0.0 if c == 0 else 1.0 - (1.0 - float(k) / float(n))
    i = np.arange(n - c + 1, n + 1, dtype=float)
    return float(1.0 - np.prod(1.0 - k / i))


def pass_hat_k(n: int, c: int, k: int) -> float:
    """Unbiased pass^k (all of ``k`` samples pass) from ``n`` samples with ``c`` passes:
    ``C(c, k) / C(n, k) = prod_{i=0}^{k-1} (c-i)/(n-i)``."""
    _check_nck(n, c, k)
    if c < k:
        return 0.0
    if k == 1:  # the one factor c / n, as numpy's product of one float would give it (a case per call)
        return float(c) / float(n)
    i = np.arange(k, dtype=float)
    return float(np.prod((c - i) / (n - i)))


# --------------------------------------------------------------------------------------------
# Regression gate
# --------------------------------------------------------------------------------------------


def _one_sided_bound(current: Estimate, alpha: float, upper: bool) -> float:
    """The one-sided (1 - alpha) bound of ``current`` on one side.

    The stored interval is two-sided at ``current.confidence``; its ends are one-sided bounds
    at ``(1 + confidence) / 2``. When ``confidence == 1 - 2 * alpha`` the end is used as is;
    otherwise that side's half-width is rescaled by the ratio of normal quantiles, which keeps
    the interval's asymmetry. Compute the Estimate at ``1 - 2 * alpha`` to avoid the rescaling.
    """
    end = current.high if upper else current.low
    target = 1.0 - alpha
    have = (1.0 + current.confidence) / 2.0
    if math.isclose(target, have, rel_tol=0, abs_tol=1e-12):
        return end
    scale = _NORMAL.inv_cdf(target) / _NORMAL.inv_cdf(have)
    return current.value + (end - current.value) * scale


def regression_verdict(
    golden: float,
    current: Estimate,
    *,
    higher_is_better: bool,
    tolerance: float,
    paired: PairedComparison | None = None,
    alpha: float = 0.05,
) -> tuple[Verdict, str]:
    """Gate one metric of a run against its golden value. Returns ``(verdict, explanation)``.

    ``"fail"`` needs both:

    1. practical: ``current.value`` is worse than ``golden`` by more than ``tolerance``;
    2. statistical, a one-sided test at level ``alpha`` in the worse direction:
       - with ``paired`` (``paired_compare(golden_cases, current_cases)``): its diff points the
         worse way and its one-sided p-value ``p_value / 2`` is below ``alpha``;
       - without: ``golden`` lies beyond ``current``'s one-sided ``1 - alpha`` bound (the
         ``1 - 2 alpha`` two-sided interval's end; see :func:`_one_sided_bound`).

    ``"improved"`` is the mirror image; anything else is ``"pass"``. The test is one-sided so
    that, with no real change, ``"fail"`` fires in ``alpha`` of runs (measured: see
    docs/statistics.md); a two-sided interval at ``1 - alpha`` would fire in only ``alpha / 2``.
    When the paired comparison is available it alone decides the statistical part: it shares
    the cases with the golden run, so between-case variation (which the unpaired interval
    must include) cancels out; requiring the unpaired interval as well would halve the
    false-alarm rate below ``alpha`` and cost most of the power (measured in the docs).
    """
    if not 0.0 < alpha < 0.5:
        raise ValueError(f"alpha must be in (0, 0.5), got {alpha}")
    if tolerance < 0:
        raise ValueError(f"tolerance must be >= 0, got {tolerance}")
    if current.n_cases == 0 or math.isnan(current.value):
        raise ValueError("current estimate has no data; a missing metric is the caller's verdict to make")
    sign = 1.0 if higher_is_better else -1.0
    delta = current.value - golden
    worse_by = -sign * delta  # > 0: current is worse than golden
    head = f"{current.value:.4g} vs golden {golden:.4g} ({delta:+.4g}, tolerance {tolerance:g})"

    if paired is not None:
        one_sided = paired.p_value / 2.0
        paired_worse = sign * paired.diff < 0
        paired_better = sign * paired.diff > 0
        evidence = f"paired p={paired.p_value:.3g} (one-sided {one_sided:.3g}) over {paired.n_cases} cases"
        credible_worse = paired_worse and one_sided < alpha
        credible_better = paired_better and one_sided < alpha
    else:
        if current.n_cases < 2:
            return "pass", f"pass: {head}; only {current.n_cases} case, too few to judge without a paired comparison"
        worse_bound = _one_sided_bound(current, alpha, upper=higher_is_better)
        better_bound = _one_sided_bound(current, alpha, upper=not higher_is_better)
        # Worse means golden sits past the bound on the favourable side of current.
        credible_worse = sign * (golden - worse_bound) > 0
        credible_better = sign * (better_bound - golden) > 0
        side = "upper" if higher_is_better else "lower"
        evidence = (
            f"one-sided {1 - alpha:.0%} {side} bound {worse_bound:.4g} over {current.n_cases} cases"
            if worse_by > 0
            else f"one-sided {1 - alpha:.0%} bound {better_bound:.4g} over {current.n_cases} cases"
        )

    if worse_by > tolerance and credible_worse:
        return "fail", f"fail: {head}; worse beyond tolerance and significant at alpha={alpha:g}: {evidence}"
    if -worse_by > tolerance and credible_better:
        return "improved", f"improved: {head}; better beyond tolerance and significant at alpha={alpha:g}: {evidence}"
    if worse_by > tolerance:
        return "pass", f"pass: {head}; worse beyond tolerance but not significant at alpha={alpha:g}: {evidence}"
    return "pass", f"pass: {head}; within tolerance or not significant: {evidence}"


# --------------------------------------------------------------------------------------------
# Repeated runs
# --------------------------------------------------------------------------------------------


def pool_runs(per_run_case_scores: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Mean score per case across repeated runs of the same cases.

    Pooling k runs of a case is the same as one run with k times the samples, so feed the
    result to :func:`weighted_mean_ci` (with ``n_samples`` summed over runs). Runs must cover
    the same cases: a case missing from one run would be silently scored on fewer samples.
    """
    if not per_run_case_scores:
        raise ValueError("no runs to pool")
    first = per_run_case_scores[0]
    ids = list(first)
    id_set = set(ids)
    for r, run in enumerate(per_run_case_scores[1:], start=1):
        if set(run) != id_set:
            only_first = sorted(id_set - set(run))[:5]
            only_this = sorted(set(run) - id_set)[:5]
            raise ValueError(f"run {r} has different cases: missing {only_first}, extra {only_this}")
    n = len(per_run_case_scores)
    return {cid: float(sum(float(run[cid]) for run in per_run_case_scores) / n) for cid in ids}


def run_spread(values: Numbers) -> dict[str, float | int]:
    """Spread of run-level scores (e.g. three evaluations of one candidate).

    ``std`` is the sample standard deviation (``ddof=1``); 0.0 for a single run.
    """
    x = np.asarray(values, dtype=float).reshape(-1)
    if x.size == 0:
        raise ValueError("no run scores")
    std = float(np.std(x, ddof=1)) if x.size > 1 else 0.0
    return {"mean": float(x.mean()), "std": std, "min": float(x.min()), "max": float(x.max()), "n": int(x.size)}


# --------------------------------------------------------------------------------------------
# One family of tests: Holm's step-down procedure with Tarone's refinement


def holm_steps(p_values: Mapping[str, float]) -> Iterator[tuple[str, float, tuple[str, ...]]]:
    """Holm's step-down order, the one both Holm functions walk: each hypothesis, smallest
    p-value first (ties by name), with its p-value and the hypotheses still in the family at its
    step (itself and every later one). Holm tests step ``i`` against ``alpha / len(rest)``
    (:func:`holm_adjusted`); with Tarone's refinement against ``alpha / K(rest)``
    (:func:`holm_alphas`). Lazy: a caller that stops at its first non-rejection computes nothing
    for the later steps."""
    order = sorted((float(p), name) for name, p in p_values.items())
    names = tuple(name for _, name in order)
    for i, (p, name) in enumerate(order):
        yield name, p, names[i:]


def holm_adjusted(p_values: Mapping[str, float]) -> dict[str, float]:
    """Holm's step-down adjusted p-values (capped at 1): hypothesis ``i`` in :func:`holm_steps`
    order gets the largest of ``len(rest) * p`` over itself and the steps before it. Rejecting
    when the adjusted p-value is below ``alpha`` makes Holm's decisions at ``alpha``, the ones
    :func:`holm_alphas` gives without ``min_p`` (flaky reports these values over its cases)."""
    out: dict[str, float] = {}
    running = 0.0
    for name, p, rest in holm_steps(p_values):
        running = max(running, min(1.0, len(rest) * p))
        out[name] = running
    return out


def holm_alphas(
    p_worse: Mapping[str, float | None], alpha: float, *, min_p: Mapping[str, float] | None = None
) -> dict[str, float]:
    """The level at which to test each hypothesis of a family so that the chance of any false
    rejection stays at most ``alpha`` (Holm's step-down procedure, with Tarone's refinement).

    The one implementation of the levels: the gate, ``compare`` (each direction), the checkpoint
    recommendation, adaptive sampling and ``plan`` all call it; it walks :func:`holm_steps`, as
    :func:`holm_adjusted` does.

    ``p_worse``: each hypothesis's one-sided p-value, or None when it has none (an unpaired
    interval test): those get Bonferroni's ``alpha / K``, and the known ones share the rest of
    ``alpha`` by Holm. Testing a hypothesis at its returned level and rejecting when
    ``p < level`` reproduces Holm's decisions (after the first non-rejection every later
    hypothesis gets that same level, which its larger p-value cannot beat).

    ``min_p``: the smallest p-value each hypothesis's test could produce given the data's
    margins (exact count tests know it; default 0). Tarone: a hypothesis whose ``min_p`` exceeds
    the level it would get cannot be rejected, so it does not count in the family size ``K``
    (``K`` = the least k with at most k hypotheses having ``min_p <= alpha / k``), which leaves
    the others more of ``alpha``; at each Holm step ``K`` is recomputed over the hypotheses not
    yet rejected (Hommel and Krummenauer's step-down Tarone-Holm). Family-wise error stays at
    most ``alpha`` because ``min_p`` depends only on what the exact tests condition on.
    """
    if not p_worse:
        return {}
    floor = {name: float((min_p or {}).get(name, 0.0)) for name in p_worse}
    k_all = _tarone_k(floor.values(), alpha)
    unknown = [name for name, p in p_worse.items() if p is None]
    out = {name: alpha / k_all for name in unknown}
    budget = alpha - len(unknown) * alpha / k_all
    known = {name: float(p) for name, p in p_worse.items() if p is not None}
    stop: float | None = None
    for name, p, rest in holm_steps(known):
        if stop is None:
            # no budget left: every hypothesis that could use one has no p-value, and these (with
            # min_p > alpha / K) cannot reach alpha / K, which they may therefore keep
            k = _tarone_k([floor[n] for n in rest], budget) if budget > 0 else k_all
            level = budget / k if budget > 0 else alpha / k_all
            if p >= level:
                stop = level
        out[name] = level if stop is None else stop
    return out


def tarone_family(min_p: Mapping[str, float], alpha: float) -> list[str]:
    """The hypotheses that take a share of ``alpha`` (their test can reach ``alpha / K``)."""
    k = _tarone_k(min_p.values(), alpha)
    return [name for name, m in min_p.items() if m <= alpha / k]


def _tarone_k(min_ps: Iterable[float], alpha: float) -> int:
    floors = list(min_ps)
    for k in range(1, len(floors) + 1):
        if sum(m <= alpha / k for m in floors) <= k:
            return k
    return max(1, len(floors))


# --------------------------------------------------------------------------------------------
# One paired decision: the gate, compare and the checkpoint recommendation


#: the tests a metric may declare (``metrics.Metric.test``)
PAIRED_TESTS = ("paired_t", "exact_count")


@dataclass(frozen=True)
class PairedDecision:
    """Run B against run A on one metric, over the cases both scored, by the metric's own test.

    ``comparison``: the paired difference ``b - a`` and its bootstrap interval (its ``p_value``
    is the two-sided p of the declared test, its ``test`` which one ran). ``p_worse`` /
    ``p_better``: one-sided p-values that B is worse / better than A; ``min_p_worse`` /
    ``min_p_better``: the smallest values they could take (Tarone; 0 when unbounded, 1 when the
    data cannot show anything). A family of decisions is adjusted with :func:`holm_alphas`.
    """

    metric: str
    test: str
    higher_is_better: bool
    comparison: PairedComparison
    p_worse: float
    p_better: float
    min_p_worse: float
    min_p_better: float
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "comparison": self.comparison.to_dict()}


def decide_paired(
    a: Mapping[str, tuple[float, int]],
    b: Mapping[str, tuple[float, int]],
    weights: Mapping[str, float] | None = None,
    *,
    metric: str,
    higher_is_better: bool,
    test: str,
    seed: int = 0,
) -> PairedDecision:
    """The one paired decision: is B worse (or better) than A on ``metric``?

    ``a`` / ``b``: case id -> (the case's value, its scored samples); the cases both have are
    compared. ``test`` is the metric's declared test (``metrics.Metric.test``), never chosen by
    the data:

    - ``paired_t``: the paired t-test over the per-case values (``paired_compare``), halved to
      one side; when every case scored the same in both runs nothing can be rejected (min p 1);
    - ``exact_count``: the exact stratified count test (``exact_count_test``) on the per-case
      event counts (value x samples, exact for rates rounded to 4 decimals up to 5,000 samples
      per case); "worse" is fewer events for a higher-is-better metric.

    The difference and its interval always come from the paired bootstrap over cases.
    """
    if test not in PAIRED_TESTS:
        raise ValueError(f"unknown test {test!r} (known: {', '.join(PAIRED_TESTS)})")
    common = sorted(set(a) & set(b))
    pc = paired_compare(
        {c: float(a[c][0]) for c in common},
        {c: float(b[c][0]) for c in common},
        weights=None if weights is None else {c: float(weights[c]) for c in common},
        metric=metric,
        seed=seed,
    )
    worse_sign = -1.0 if higher_is_better else 1.0
    if test == "paired_t":
        half = pc.p_value / 2
        p_worse = half if worse_sign * pc.diff > 0 else 1 - half
        p_better = half if worse_sign * pc.diff < 0 else 1 - half
        flat = 1.0 if pc.diff == 0 and pc.p_value >= 1.0 and pc.low == pc.high == 0 else 0.0
        return PairedDecision(metric, test, higher_is_better, pc, p_worse, p_better, flat, flat)
    ct = exact_count_test(
        {c: (round(float(a[c][0]) * int(a[c][1])), int(a[c][1])) for c in common},
        {c: (round(float(b[c][0]) * int(b[c][1])), int(b[c][1])) for c in common},
    )
    if higher_is_better:
        p_worse, p_better, min_worse, min_better = ct.p_less, ct.p_more, ct.min_p_less, ct.min_p_more
    else:
        p_worse, p_better, min_worse, min_better = ct.p_more, ct.p_less, ct.min_p_more, ct.min_p_less
    tail = p_worse if worse_sign * pc.diff > 0 else p_better if pc.diff != 0 else 1.0
    approx = " (normal approximation: too many counts to enumerate)" if ct.method != "exact" else ""
    note = (
        f"exact stratified count test{approx}: {ct.events_b} events in {ct.samples_b} samples vs "
        f"{ct.events_a} in {ct.samples_a} ({ct.expected_b:.2g} expected)"
    )
    pc = PairedComparison(**{**pc.to_dict(), "p_value": min(1.0, 2 * tail), "test": "exact_count"})
    return PairedDecision(metric, test, higher_is_better, pc, p_worse, p_better, min_worse, min_better, note)


# --------------------------------------------------------------------------------------------
# One simulation of the gate statistic (plan, the power guard, adaptive sampling's figures)


def _t_cdf_array(t: np.ndarray, df: int) -> np.ndarray:
    """:func:`_t_cdf` elementwise over an array (the same closed-form series)."""
    theta = np.arctan2(t, math.sqrt(df))
    s, c = np.sin(theta), np.cos(theta)
    c2 = c * c
    if df % 2 == 1:
        term = c.copy()
        total = c.copy() if df > 1 else np.zeros_like(c)
        for j in range(1, (df - 1) // 2):
            term = term * c2 * (2 * j) / (2 * j + 1)
            total = total + term
        return np.asarray(0.5 + (theta + s * total) / math.pi)
    term = np.ones_like(c)
    total = np.ones_like(c)
    for j in range(1, df // 2):
        term = term * c2 * (2 * j - 1) / (2 * j)
        total = total + term
    return np.asarray(0.5 + s * total / 2)


#: most multiply-adds one simulated batch of exact count tests may cost before the simulation
#: refers the same statistic to its normal approximation (2,000 draws of 22 cases at 3 and 6
#: samples per case stay exact; a plan's search at 10 samples per case uses the approximation)
SIM_EXACT_WORK = 8_000_000
#: most distinct per-case null distributions one simulated batch computes exactly
SIM_DISTINCT_PMFS = 5_000


def _count_tails_batch(
    a_counts: np.ndarray, n_a: np.ndarray, b_counts: np.ndarray, n_b: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(p_more, p_less) of :func:`exact_count_test` for each row (replicate) of count arrays.

    Rows are replicates, columns cases; ``n_a`` / ``n_b`` the cases' samples (one per column).
    The null distribution of each row is built by dynamic programming over the cases, all rows
    at once; beyond ``SIM_EXACT_WORK`` (or where the test itself would approximate) the normal
    approximation the test uses answers instead.
    """
    reps, n_cases = a_counts.shape
    n_a = np.broadcast_to(np.asarray(n_a, dtype=np.int64), (n_cases,))
    n_b = np.broadcast_to(np.asarray(n_b, dtype=np.int64), (n_cases,))
    total = n_a + n_b
    t = a_counts + b_counts
    observed = b_counts.sum(axis=1)
    length = int(n_b.sum()) + 1
    work_one = int(np.sum((np.cumsum(n_b) + 1) * (n_b + 1)))
    # distinct case totals, each one pmf to compute (a golden of huge sample counts has thousands)
    distinct = sum(int(np.unique(t[:, i]).size) for i in range(n_cases))
    exact = work_one <= EXACT_COUNT_WORK and length <= MAX_COUNT_SUPPORT and reps * work_one <= SIM_EXACT_WORK
    if exact and distinct <= SIM_DISTINCT_PMFS:
        dist = np.zeros((reps, length))
        dist[:, 0] = 1.0
        top = 0
        pmfs: dict[tuple[int, int, int], np.ndarray] = {}
        for i in range(n_cases):
            nb, big = int(n_b[i]), int(total[i])
            # one pmf per case total that occurs (never a table over every total a huge golden allows)
            seen, where = np.unique(t[:, i], return_inverse=True)
            by_total = np.zeros((seen.size, nb + 1))
            for k, events in enumerate(seen.tolist()):
                key = (big, int(events), nb)
                if key not in pmfs:
                    lo, pmf = _hypergeom_pmf(big, int(events), nb)
                    pmfs[key] = np.zeros(nb + 1)
                    pmfs[key][lo : lo + pmf.size] = pmf
                by_total[k] = pmfs[key]
            pm = by_total[where.reshape(-1)]
            new = np.zeros((reps, top + nb + 1))
            for x in range(nb + 1):
                new[:, x : x + top + 1] += pm[:, x : x + 1] * dist[:, : top + 1]
            top += nb
            dist[:, : top + 1] = new
        rows = np.arange(reps)
        cdf = np.cumsum(dist[:, : top + 1], axis=1)
        sf = np.cumsum(dist[:, : top + 1][:, ::-1], axis=1)[:, ::-1]
        return np.minimum(1.0, sf[rows, observed]), np.minimum(1.0, cdf[rows, observed])
    mean, var = _hypergeom_moments(total[None, :], t, n_b[None, :])
    return _normal_tails(observed.astype(float), mean.sum(axis=1), var.sum(axis=1))


@dataclass(frozen=True)
class GateStatistic:
    """The gate's statistic for a batch of simulated (A, B) pairs: one entry per replicate.

    ``diff``: weighted mean of B minus A (the metric's units); ``se``: its linearised standard
    error over cases; ``p_worse`` / ``p_better``: the declared test's one-sided p-values."""

    diff: np.ndarray
    se: np.ndarray
    p_worse: np.ndarray
    p_better: np.ndarray


def gate_statistic(
    a_counts: npt.ArrayLike,
    n_a: npt.ArrayLike,
    b_counts: npt.ArrayLike,
    n_b: npt.ArrayLike,
    weights: npt.ArrayLike | None = None,
    *,
    test: str,
    higher_is_better: bool = True,
) -> GateStatistic:
    """The gate's decision statistic for simulated runs, vectorised over replicates.

    The one simulation of it: ``plan``, the gate's power guard and adaptive sampling's operating
    figures all call it, so what they report is the test :func:`decide_paired` runs. Rows of
    ``a_counts`` / ``b_counts`` are replicates, columns cases (event counts); ``n_a`` / ``n_b``
    the samples per case (scalars or one per column). ``test``: ``paired_t`` (weighted paired
    t-test over per-case rates, the exact sign-flip answer when every difference is equal) or
    ``exact_count`` (the exact stratified count test).
    """
    if test not in PAIRED_TESTS:
        raise ValueError(f"unknown test {test!r} (known: {', '.join(PAIRED_TESTS)})")
    ac = np.atleast_2d(np.asarray(a_counts, dtype=np.int64))
    bc = np.atleast_2d(np.asarray(b_counts, dtype=np.int64))
    n_cases = ac.shape[1]
    na = np.broadcast_to(np.asarray(n_a, dtype=float), (n_cases,))
    nb = np.broadcast_to(np.asarray(n_b, dtype=float), (n_cases,))
    w = np.ones(n_cases) if weights is None else np.asarray(weights, dtype=float)
    d = bc / nb - ac / na
    sw = float(w.sum())
    diff = (d * w).sum(axis=1) / sw
    resid = w * (d - diff[:, None]) / sw
    se = np.sqrt(n_cases / max(1, n_cases - 1) * (resid * resid).sum(axis=1))
    worse = -diff if higher_is_better else diff
    if test == "exact_count":
        more, less = _count_tails_batch(ac, na.astype(np.int64), bc, nb.astype(np.int64))
        p_worse, p_better = (less, more) if higher_is_better else (more, less)
        return GateStatistic(diff, se, p_worse, p_better)
    spread = se > 1e-12 * np.maximum(1.0, np.abs(diff))
    with np.errstate(divide="ignore", invalid="ignore"):
        tstat = np.where(spread, worse / np.where(spread, se, 1.0), 0.0)
    cdf = _t_cdf_array(tstat, max(1, n_cases - 1)) if n_cases > 1 else np.full_like(tstat, 0.5)
    # every difference equal: the exact sign-flip test over the non-zero ones (2^-m one-sided)
    nonzero = np.count_nonzero(d, axis=1)
    flat_worse = np.where(worse > 0, 0.5**nonzero, 1.0)
    flat_better = np.where(worse < 0, 0.5**nonzero, 1.0)
    p_worse = np.where(spread, 1.0 - cdf, flat_worse)
    p_better = np.where(spread, cdf, flat_better)
    if n_cases < 2:
        p_worse = p_better = np.ones_like(diff)
    return GateStatistic(diff, se, p_worse, p_better)


def worsened_rates(p: npt.ArrayLike, weights: npt.ArrayLike, drop: float, *, higher_is_better: bool) -> np.ndarray:
    """Per-case rates moved so the weighted mean gets worse by ``drop`` (absolute).

    A higher-is-better metric scales every case's rate by ``(m - drop) / m`` (a case at 0 stays
    at 0; below 0 means every rate falls to 0); a lower-is-better one scales every case's
    complement ``1 - p`` the same way, so a metric at 0 (no hard fail) rises by ``drop`` in
    every case."""
    x = np.asarray(p, dtype=float)
    w = np.asarray(weights, dtype=float)
    if not higher_is_better:
        return 1.0 - worsened_rates(1.0 - x, w, drop, higher_is_better=True)
    m = float(np.sum(w * x) / np.sum(w))
    if m <= 0:
        return x.copy()
    return np.clip(x * max(0.0, m - drop) / m, 0.0, 1.0)


def simulated_power(
    p: npt.ArrayLike,
    n_golden: npt.ArrayLike,
    n_run: int,
    *,
    drop: float,
    level: float,
    tolerance: float,
    test: str,
    higher_is_better: bool = True,
    weights: npt.ArrayLike | None = None,
    n_sim: int = 2000,
    seed: int | Sequence[int] = 0,
) -> float:
    """Share of simulated (golden, run) pairs in which the gate fails one metric.

    Per draw: a golden with ``n_golden`` samples per case drawn from the per-case rates ``p``,
    and a run with ``n_run`` samples per case from the rates worsened by ``drop``
    (:func:`worsened_rates`); the gate fails the metric when the declared test's one-sided p is
    below ``level`` and the run is worse than the golden by more than ``tolerance``."""
    rates = np.asarray(p, dtype=float)
    w = np.ones_like(rates) if weights is None else np.asarray(weights, dtype=float)
    ng = np.broadcast_to(np.asarray(n_golden, dtype=np.int64), rates.shape)
    q = worsened_rates(rates, w, drop, higher_is_better=higher_is_better)
    rng = np.random.default_rng(seed)
    g = rng.binomial(ng, rates, size=(n_sim, rates.size))
    c = rng.binomial(int(n_run), q, size=(n_sim, rates.size))
    stat = gate_statistic(g, ng, c, int(n_run), w, test=test, higher_is_better=higher_is_better)
    worse_by = -stat.diff if higher_is_better else stat.diff
    return float(np.mean((stat.p_worse < level) & (worse_by > tolerance)))
