from __future__ import annotations

from dataclasses import fields

import pytest

from slicecount.config import (
    BLOCKS_PRECISIONS,
    DEFAULT_LAYOUT,
    DEFAULT_PRECISIONS,
    Settings,
    environment,
)
from slicecount.config.request_limits import Limits
from slicecount.errors import ConfigurationError


def test_the_default_is_the_blocks_layout_and_its_ladder() -> None:
    settings = Settings()
    assert settings.layout == DEFAULT_LAYOUT == "blocks"
    assert settings.precisions == BLOCKS_PRECISIONS
    assert settings.prefix == "" and settings.shards == 1 and settings.token is None


def test_the_books_layout_follows_the_book() -> None:
    settings = Settings.from_env({"SLICECOUNT_LAYOUT": "book"})
    assert settings.precisions == DEFAULT_PRECISIONS == (1, 5, 60, 300, 3600, 18000, 86400)
    assert all(settings.retention_for(p) == 120 for p in settings.precisions)


def test_environment_is_read_and_keywords_win() -> None:
    env = {
        "SLICECOUNT_REDIS_URL": "unix:///run/redis.sock",
        "SLICECOUNT_PREFIX": "app:",
        "SLICECOUNT_PRECISIONS": "60, 1,5",
        "SLICECOUNT_RETENTION": "1=300,60=1440",
        "SLICECOUNT_FLUSH_INTERVAL": "0.5",
        "SLICECOUNT_TOKEN": "s3cret",
        "SLICECOUNT_SHARDS": "4",
    }
    settings = Settings.from_env(env, prefix="other:")
    assert settings.redis_url == "unix:///run/redis.sock"
    assert settings.prefix == "other:"
    assert settings.precisions == (1, 5, 60)
    assert [settings.retention_for(p) for p in (1, 5, 60)] == [300, 120, 1440]
    assert settings.flush_interval == 0.5
    assert settings.token == "s3cret"
    assert settings.shards == 4


def test_retention_default_can_be_changed_beside_overrides() -> None:
    settings = Settings(precisions=(1, 60), retention="200,60=10")
    assert (settings.retention_for(1), settings.retention_for(60)) == (200, 10)
    assert Settings(retention=50).retention == 50


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"precisions": "1,5,x"}, "'x'"),
        ({"precisions": "1,5,5"}, "duplicate precision 5"),
        ({"precisions": (1, 2.5)}, "2.5"),
        ({"precisions": "0,5"}, "0"),
        ({"precisions": ""}, "must not be empty"),
        ({"retention": 0}, "retention must be >= 1"),
        ({"retention": "60=0"}, "retention for 60"),
        ({"retention": {7: 10}}, "precision 7"),
        ({"redis_url": "http://localhost:6379"}, "'http'"),
        ({"redis_url": "redis+sentinel://a:1"}, "names its service"),
        ({"redis_url": "redis+cluster://a:1/2"}, "only database 0"),
        ({"redis_url": ""}, "''"),
        ({"flush_interval": "soon"}, "'soon'"),
        ({"flush_interval": -1}, "-1"),
        ({"shards": -1}, "shards"),
        (
            {"shards": 1, "redis_url": "redis+cluster://a:1"},
            "shards must be > 1 on a Redis Cluster",
        ),
        ({"max_pending": "lots"}, "'lots'"),
        ({"layout": "blcoks"}, "layout must be one of book, blocks, got 'blcoks'"),
        ({"layout": "blocks", "precisions": "2,5"}, "a multiple of the finest"),
    ],
)
def test_bad_values_raise_value_errors_naming_them(
    kwargs: dict[str, object], fragment: str
) -> None:
    with pytest.raises(ValueError) as info:
        Settings(**kwargs)  # type: ignore[arg-type]
    assert isinstance(info.value, ConfigurationError)
    assert fragment in str(info.value)


def test_unknown_setting_names_are_rejected() -> None:
    with pytest.raises(ConfigurationError, match="precision_list"):
        Settings.from_env({}, precision_list="1")


def test_unknown_precision_is_named() -> None:
    with pytest.raises(ConfigurationError, match="unknown precision 7"):
        Settings().retention_for(7)


def test_with_changes_revalidates_and_keeps_retention() -> None:
    settings = Settings(precisions=(1, 60), retention="1=10")
    changed = settings.with_changes(precisions=(60, 300))
    assert changed.precisions == (60, 300)
    assert changed.retention_for(60) == 120
    with pytest.raises(ConfigurationError):
        settings.with_changes(shards="many")


def test_the_blocks_layout_brings_its_ladder_unless_one_is_given() -> None:
    blocks = Settings.from_env({})
    assert blocks.layout == "blocks"
    assert blocks.precisions == BLOCKS_PRECISIONS == (1, 5, 60, 3600, 86400)
    assert [blocks.retention_for(p) for p in blocks.precisions] == [600, 34560, 44640, 9600, 1830]
    assert blocks.unique_precisions == (60, 3600, 86400)
    partly = Settings(layout="blocks", retention="5=100")  # the ladder's, one changed
    assert [partly.retention_for(p) for p in partly.precisions] == [600, 100, 44640, 9600, 1830]
    given = Settings(layout="blocks", precisions=(1, 60))  # a ladder of one's own: 120 each
    assert given.precisions == (1, 60) and given.retention == 120
    # a change of layout changes a ladder left to it, and only such a one
    assert Settings(layout="book").with_changes(layout="blocks").precisions == BLOCKS_PRECISIONS
    back = blocks.with_changes(layout="book")
    assert back.precisions == DEFAULT_PRECISIONS and back.retention == 120
    assert back.unique_precisions == (60, 300, 3600, 18000, 86400)
    assert given.with_changes(layout="book").precisions == (1, 60)


def test_shards_default_to_one_and_to_many_on_a_cluster() -> None:
    assert Settings().shards == 1
    assert Settings(redis_url="redis+cluster://a:7000").shards == 64
    assert Settings(redis_url="redis+cluster://a:7000", shards=12).shards == 12


@pytest.fixture
def fresh_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Warnings of unknown variables are once per process: start this test with none."""
    monkeypatch.setattr(environment, "_warned", set())


def test_an_unknown_variable_is_warned_once_naming_the_closest(
    fresh_warnings: None, caplog: pytest.LogCaptureFixture
) -> None:
    env = {"SLICECOUNT_PRECISION": "1,60", "SLICECOUNT_REDIS_ULR": "redis://h", "SLICECOUNT_X": "1"}
    settings = Settings.from_env(env)
    assert settings.precisions == BLOCKS_PRECISIONS  # ignored, as before, but said
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warned == [
        "SLICECOUNT_PRECISION is not a slicecount setting and is ignored: did you mean "
        "SLICECOUNT_PRECISIONS?",
        "SLICECOUNT_REDIS_ULR is not a slicecount setting and is ignored: did you mean "
        "SLICECOUNT_REDIS_URL?",
        "SLICECOUNT_X is not a slicecount setting and is ignored: no setting is named so",
    ]
    caplog.clear()
    Settings.from_env(env)
    assert caplog.records == []  # once per process


def test_every_variable_slicecount_reads_is_known(
    fresh_warnings: None, caplog: pytest.LogCaptureFixture
) -> None:
    # the datasource's limits, the test suite's own and every setting: none is warned
    env = {"SLICECOUNT_" + f.name.upper(): "1" for f in fields(Limits)}
    env |= {"SLICECOUNT_TEST_CLUSTER_URL": "x", "SLICECOUNT_README_SCREENSHOT": "x"}
    env |= {"SLICECOUNT_" + f.name.upper(): "" for f in fields(Settings) if f.init}
    env |= {"OTHER_PRECISION": "1"}
    assert environment.warn_unknown(env, [f.name for f in fields(Settings)]) == []
    Settings.from_env(env)
    assert caplog.records == []


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("localhost:6379", "redis URL 'localhost:6379' has no scheme: write e.g. "
         "redis://localhost:6379"),
        ("/run/redis.sock", "write e.g. unix:///run/redis.sock"),
    ],
)  # fmt: skip
def test_a_url_without_a_scheme_says_how_to_write_it(url: str, message: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        Settings(redis_url=url)
    assert message in str(raised.value)


def test_the_cleaners_sweep_period() -> None:
    assert Settings().sweep_period == 3600
    assert Settings.from_env({"SLICECOUNT_SWEEP_PERIOD": "600"}).sweep_period == 600
    for bad in ("0", "-5", "soon", "nan"):
        with pytest.raises(ConfigurationError, match="sweep_period"):
            Settings.from_env({"SLICECOUNT_SWEEP_PERIOD": bad})


def test_unique_slices_are_kept_as_the_books_unless_told() -> None:
    # a HyperLogLog per slice costs up to 12 kB: the blocks ladder's 31 days of minutes would
    # be 44 640 of them a series
    blocks = Settings(layout="blocks")
    assert blocks.retention_for(60) == 44_640
    assert [blocks.unique_retention_for(p) for p in blocks.unique_precisions] == [120] * 3
    longer = Settings.from_env({"SLICECOUNT_UNIQUE_RETENTION": "1440"}, layout="blocks")
    assert longer.unique_retention_for(3600) == 1440
    book = Settings(layout="book", retention=60)
    assert book.unique_retention_for(60) == 60  # never longer than the counters'
    with pytest.raises(ConfigurationError, match="unique_retention must be >= 1, got 0"):
        Settings(unique_retention=0)


def test_the_exemplar_settings() -> None:
    settings = Settings()
    assert settings.max_exemplars == 100_000 and settings.exemplar_retention == 14 * 86_400
    assert settings.trace_url is None
    env = {
        "SLICECOUNT_MAX_EXEMPLARS": "0",
        "SLICECOUNT_EXEMPLAR_RETENTION": "3600",
        "SLICECOUNT_TRACE_URL": "http://jaeger:16686/trace/${__value.raw}",
    }
    chosen = Settings.from_env(env)
    assert (chosen.max_exemplars, chosen.exemplar_retention) == (0, 3600)
    assert chosen.trace_url == "http://jaeger:16686/trace/${__value.raw}"
    assert Settings(trace_url="").trace_url is None
    for name, bad in (
        ("max_exemplars", "-1"), ("max_exemplars", "many"), ("exemplar_retention", "0"),
        ("trace_url", "http://jaeger:16686/trace/"),  # where would the id go?
    ):  # fmt: skip
        with pytest.raises(ConfigurationError, match=name):
            Settings.from_env({f"SLICECOUNT_{name.upper()}": bad})
