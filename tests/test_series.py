from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slicecount.core import series
from slicecount.errors import ConfigurationError

names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_.:-]{0,30}", fullmatch=True)
label_names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,15}", fullmatch=True)
tricky = st.sampled_from(['"', "\\", "\n", "{", "}", ":", ",", "=", "é", "日本", "\\n", '\\"'])
label_values = (
    st.lists(st.one_of(tricky, st.text(max_size=8)), max_size=12)
    .map("".join)
    .filter(lambda v: len(v) <= series.MAX_LABEL_VALUE_LENGTH)
)


@pytest.mark.slow
@given(names, st.dictionaries(label_names, label_values, max_size=5))
def test_encode_parse_round_trip(name: str, labels: dict[str, str]) -> None:
    encoded = series.encode(name, labels)
    assert series.parse(encoded) == (name, labels)
    assert series.metric_name(encoded) == name
    # canonical: the order labels were given in does not matter
    assert series.encode(name, dict(reversed(list(labels.items())))) == encoded


def test_canonical_form_matches_the_design() -> None:
    labels = {"status": "200", "route": "/users/{id}", "method": "GET"}
    assert (
        series.encode("http.requests", labels)
        == 'http.requests{method="GET",route="/users/{id}",status="200"}'
    )
    assert series.encode("hits") == "hits"
    assert series.encode("hits", {}) == "hits"
    assert series.encode("q", {"v": 'a"b\\c\nd'}) == 'q{v="a\\"b\\\\c\\nd"}'
    assert series.encode("q", {"code": 404}) == 'q{code="404"}'


@pytest.mark.parametrize("name", ["", "1abc", "a b", "a{b", "ünï", "a/b", None, 3])
def test_bad_names_are_rejected_naming_them(name: object) -> None:
    with pytest.raises(ValueError, match=repr(name).replace("{", r"\{")):
        series.encode(name)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("labels", "fragment"),
    [
        ({"1x": "a"}, "'1x'"),
        ({"a-b": "a"}, "'a-b'"),
        ({"ok": "x" * 257}, "257 characters"),
        ({"ok": 1.5}, "1.5"),
        ({"ok": True}, "True"),
        ({"ok": None}, "None"),
    ],
)
def test_bad_labels_are_rejected_naming_them(labels: dict[str, object], fragment: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        series.encode("m", labels)  # type: ignore[arg-type]
    assert fragment in str(info.value)


def test_longest_label_value_is_accepted() -> None:
    value = "x" * series.MAX_LABEL_VALUE_LENGTH
    assert series.parse(series.encode("m", {"k": value})) == ("m", {"k": value})


@pytest.mark.parametrize(
    "bad",
    [
        'm{a="1"',
        "m{a=1}",
        'm{a="1",}',
        'm{a="1"b="2"}',
        'm{a="\\x"}',
        'm{a="1",a="2"}',
        "m{}",
        'm{1a="x"}',
        'm{a="unterminated}',
    ],
)
def test_malformed_ids_do_not_parse(bad: str) -> None:
    with pytest.raises(ConfigurationError, match="malformed series id"):
        series.parse(bad)
