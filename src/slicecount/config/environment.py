"""The ``SLICECOUNT_*`` environment: every variable slicecount reads, in one place, and a
warning for any other (a typo would otherwise be ignored silently). Pure but for the log."""

from __future__ import annotations

import difflib
import logging
from collections.abc import Iterable, Mapping

ENV_PREFIX = "SLICECOUNT_"
READ_ELSEWHERE = frozenset(
    {
        # the datasource's limits (datasource.limits.Limits, one variable a field)
        "max_body_bytes",
        "max_targets",
        "max_series",
        "max_points",
        "max_range_seconds",
        "max_request_points",
        "max_computed_points",
        "max_answer_points",
        "max_inline_points",
        "heavy_requests",
        "sealed_frame_bytes",
        "repeated_answer_bytes",
        # the test suite's screenshot of the overview page
        "readme_screenshot",
    }
)
"""Variables read outside ``Settings`` (without the prefix, lower case): with its fields,
every name slicecount reads."""
FREE_PREFIXES = ("TEST_",)
"""``SLICECOUNT_TEST_*`` belongs to the test suite (its Redis Cluster, its Sentinel)."""

logger = logging.getLogger("slicecount")
_warned: set[str] = set()


def known_names(settings: Iterable[str]) -> frozenset[str]:
    """Every ``SLICECOUNT_*`` variable slicecount reads, given the Settings field names."""
    return frozenset(ENV_PREFIX + name.upper() for name in {*settings, *READ_ELSEWHERE})


def warn_unknown(environ: Mapping[str, str], settings: Iterable[str]) -> list[str]:
    """Log a warning, once per process and variable, for each ``SLICECOUNT_*`` variable that
    nothing reads, naming the closest known one; returns the variables warned about now."""
    known = known_names(settings)
    suffixes = sorted(name.removeprefix(ENV_PREFIX) for name in known)
    warned = []
    for variable in sorted(environ):
        suffix = variable.removeprefix(ENV_PREFIX)
        if (
            suffix == variable
            or variable in known
            or variable in _warned
            or suffix.startswith(FREE_PREFIXES)
        ):
            continue
        _warned.add(variable)
        warned.append(variable)
        close = difflib.get_close_matches(suffix, suffixes, n=1, cutoff=0.6)
        hint = f"did you mean {ENV_PREFIX}{close[0]}?" if close else "no setting is named so"
        logger.warning("%s is not a slicecount setting and is ignored: %s", variable, hint)
    return warned
