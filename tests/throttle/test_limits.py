"""The limit grammar: the ``limits`` library's notation, and every refusal naming its text."""

from __future__ import annotations

import pytest

from slicecount.errors import ConfigurationError
from slicecount.throttle.limits import MAX_AMOUNT, MAX_WINDOW, Limit, parse_limit, parse_limits


@pytest.mark.parametrize(
    ("text", "amount", "seconds", "canonical"),
    [
        ("100/minute", 100, 60, "100/minute"),
        ("10 per second", 10, 1, "10/second"),
        ("10per second", 10, 1, "10/second"),
        ("5/2 minutes", 5, 120, "5/2 minutes"),
        ("5 per 2 minutes", 5, 120, "5/2 minutes"),
        ("5/2minutes", 5, 120, "5/2 minutes"),
        ("1 / hour", 1, 3600, "1/hour"),
        ("7/day", 7, 86_400, "7/day"),
        ("7/days", 7, 86_400, "7/day"),
        ("3 PER 10 Seconds", 3, 10, "3/10 seconds"),
        ("  20/Minute  ", 20, 60, "20/minute"),
        ("1/1 second", 1, 1, "1/second"),
        ("1/366 days", 1, MAX_WINDOW, "1/366 days"),
        (f"{MAX_AMOUNT}/second", MAX_AMOUNT, 1, f"{MAX_AMOUNT}/second"),
        ("007/minute", 7, 60, "7/minute"),
    ],
)
def test_one_limit_in_every_spelling(text: str, amount: int, seconds: int, canonical: str) -> None:
    assert parse_limit(text) == Limit(amount, seconds, canonical)
    assert parse_limits(text) == (Limit(amount, seconds, canonical),)
    assert str(parse_limit(text)) == canonical


@pytest.mark.parametrize("separator", [";", ",", "|", " ; ", ";  "])
def test_several_limits_in_order(separator: str) -> None:
    text = separator.join(["1000/hour", "50/minute", "5 per second"])
    assert parse_limits(text) == (
        Limit(1000, 3600, "1000/hour"),
        Limit(50, 60, "50/minute"),
        Limit(5, 1, "5/second"),
    )


def test_the_same_window_with_other_amounts_is_allowed() -> None:
    assert [lim.amount for lim in parse_limits("10/minute; 20/minute")] == [10, 20]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", r"no rate limit in ''"),
        ("   ", r"no rate limit in '   '"),
        ("10", r"cannot read the rate limit '10'"),
        ("/minute", r"cannot read the rate limit '/minute'"),
        ("ten/minute", r"cannot read the rate limit 'ten/minute'"),
        ("10/", r"cannot read the rate limit '10/'"),
        ("10 minute", r"cannot read the rate limit '10 minute'"),
        ("10//minute", r"cannot read the rate limit '10//minute'"),
        ("10/2/minute", r"cannot read the rate limit '10/2/minute'"),
        ("-1/minute", r"cannot read the rate limit '-1/minute'"),
        ("1.5/minute", r"cannot read the rate limit '1.5/minute'"),
        ("10/1.5 minutes", r"cannot read the rate limit '10/1.5 minutes'"),
        ("10/minute extra", r"cannot read the rate limit '10/minute extra'"),
        ("10 persecond", r"cannot read the rate limit '10 persecond'"),
        ("\u0661\u0660/minute", r"cannot read the rate limit '\u0661\u0660/minute'"),  # not ASCII
        ("10/month", r"'month' in the rate limit '10/month' is refused: windows are aligned"),
        ("10 per 2 months", r"'months' in the rate limit '10 per 2 months' is refused"),
        ("10/year", r"'year' .* refused.* write a number of days"),
        ("10/fortnight", r"unknown unit 'fortnight' in the rate limit '10/fortnight'"),
        ("10/s", r"unknown unit 's' in the rate limit '10/s'"),
        ("10/sec", r"unknown unit 'sec'"),
        ("10/ss", r"unknown unit 'ss'"),
        ("0/minute", r"the amount of the rate limit '0/minute' must be 1 \.\. "),
        ("9007199254740992/second", r"amount of the rate limit '9007199254740992/second'"),
        ("1" * 5000 + "/second", r"the amount of the rate limit '1111"),
        ("10/0 seconds", r"the window of the rate limit '10/0 seconds' must last 1 second"),
        ("10/367 days", r"the window of the rate limit '10/367 days' must last .* 366 days"),
        ("10/" + "9" * 5000 + " seconds", r"the window of the rate limit '10/9999"),
        ("10/second;", r"an empty rate limit in '10/second;'"),
        ("; 10/second", r"an empty rate limit in '; 10/second'"),
        ("10/second;;5/minute", r"an empty rate limit in '10/second;;5/minute'"),
        ("10/second; bad", r"cannot read the rate limit 'bad' in '10/second; bad': expected"),
        ("1/hour, 10/month", r"'month' in the rate limit '10/month' in '1/hour, 10/month' is"),
        ("1/hour,0/hour", r"amount of the rate limit '0/hour' in '1/hour,0/hour' must be"),
        ("10/minute; 10/60 seconds", r"'10/60 seconds' is given twice .* \(as '10/minute'\)"),
        ("5/second|5 per second", r"'5 per second' is given twice"),
    ],
)
def test_bad_text_is_a_value_error_naming_it(text: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message) as raised:
        parse_limits(text)
    assert isinstance(raised.value, ValueError)


@pytest.mark.parametrize("value", [None, 10, b"10/second", ["10/second"]])
def test_limits_must_be_text(value: object) -> None:
    with pytest.raises(ValueError, match="rate limits must be text such as '100/minute'"):
        parse_limits(value)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("amount", "seconds", "message"),
    [
        (0, 1, "amount must be an integer 1"),
        (MAX_AMOUNT + 1, 1, "amount must be an integer 1"),
        (True, 1, "amount must be an integer"),
        (1.0, 1, "amount must be an integer"),
        (1, 0, "window must be a whole number of seconds 1 .. 31622400, got 0"),
        (1, MAX_WINDOW + 1, "window must be a whole number"),
        (1, 0.5, "got 0.5"),
    ],
)
def test_a_limit_built_by_hand_is_checked(amount: object, seconds: object, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        Limit(amount, seconds, "x")  # type: ignore[arg-type]
