import pytest

from orchestrator.specs.units import format_size, parse_duration, parse_percent, parse_size


@pytest.mark.parametrize("text, expected", [
    (2048, 2048), ("2KiB", 2048), ("2kib", 2048), ("2KB", 2000), ("1.5MiB", 1572864),
    ("20K", 20480), ("200B", 200), ("  4 MiB ", 4 * 1024**2),
])
def test_sizes(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("bad", ["2XB", "lots", "", True, -1, "1..5KiB"])
def test_bad_sizes_say_what_was_expected(bad):
    with pytest.raises(ValueError, match="size|negative"):
        parse_size(bad)


@pytest.mark.parametrize("text, expected", [
    (30, 30.0), ("30s", 30.0), ("250ms", 0.25), ("5m", 300.0), ("1h", 3600.0), ("1.5", 1.5),
])
def test_durations(text, expected):
    assert parse_duration(text) == pytest.approx(expected)


@pytest.mark.parametrize("bad", ["30 parsecs", "soon", "-5s"])
def test_bad_durations(bad):
    with pytest.raises(ValueError, match="duration"):
        parse_duration(bad)


def test_percent_and_format():
    assert parse_percent("3%") == pytest.approx(0.03)
    assert parse_percent(90) == pytest.approx(0.9)
    with pytest.raises(ValueError):
        parse_percent("three")
    assert format_size(2048) == "2KiB"
    assert format_size(1000) == "1000B"
