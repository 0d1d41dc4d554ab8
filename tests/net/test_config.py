"""Configuration parsing and parties-file validation."""

import pytest

from shaper.errors import ConfigError
from shaper.net import NetConfig, load_parties, parse_duration, parse_rate, parse_size


def test_units():
    assert parse_duration("40ms") == pytest.approx(0.04)
    assert parse_duration("2m") == 120 and parse_duration(1.5) == 1.5 and parse_duration("300s") == 300
    assert parse_rate("40mbit") == 40e6 and parse_rate("1gbit") == 1e9 and parse_rate("100kbps") == 1e5
    assert parse_size("4MiB") == 4 << 20 and parse_size("1MB") == 10**6 and parse_size(512) == 512
    for bad, fn in (("fast", parse_rate), ("-1s", parse_duration), ("0", parse_size), (True, parse_duration)):
        with pytest.raises(ConfigError):
            fn(bad)


def test_config_validation():
    with pytest.raises(ConfigError, match="timeout"):
        NetConfig(timeout=0)
    with pytest.raises(ConfigError, match="max_frame"):
        NetConfig(max_frame=10)
    with pytest.raises(ConfigError, match="latency"):
        NetConfig(latency=-1)
    cfg = NetConfig.from_mapping({"bandwidth": "40mbit", "latency": "40ms", "timeout": "5s"})
    assert cfg.bandwidth == 40e6 and cfg.latency == pytest.approx(0.04) and cfg.timeout == 5 and cfg.shaped
    with pytest.raises(ConfigError, match="unknown"):
        NetConfig.from_mapping({"bandwith": "1mbit"})


def _write(tmp_path, text):
    path = tmp_path / "parties.toml"
    path.write_text(text)
    return path


GOOD = """
session_id = "job-1"
[network]
latency = "10ms"
[tls]
ca = "certs/ca.pem"
[[party]]
name = "bank"
host = "127.0.0.1"
port = 7000
cert = "certs/bank.pem"
key = "certs/bank.key"
[[party]]
name = "shop"
host = "10.0.0.2"
port = 7001
cert = "/abs/shop.pem"
"""


def test_parties_file(tmp_path):
    pf = load_parties(_write(tmp_path, GOOD))
    assert [p.name for p in pf.parties] == ["bank", "shop"]
    assert pf.config.session_id == "job-1" and pf.config.latency == pytest.approx(0.01)
    assert pf.ca == tmp_path / "certs/ca.pem" and pf.parties[0].key == tmp_path / "certs/bank.key"
    assert str(pf.parties[1].cert) == "/abs/shop.pem" and pf.parties[1].key is None
    assert pf.index("shop") == 1
    with pytest.raises(ConfigError, match="not in the parties file"):
        pf.index("mallory")


@pytest.mark.parametrize("mutation, message", [
    (lambda s: s.replace('name = "shop"', 'name = "bank"'), "duplicate"),
    (lambda s: s.replace('ca = "certs/ca.pem"', ""), "no fingerprint for 'bank', 'shop'"),
    (lambda s: s.replace("port = 7001", "port = 70001"), "port"),
    (lambda s: s.replace('name = "shop"', 'name = "sh op"'), "invalid"),
    (lambda s: s + "\n[[party]]\nname = 'x'\nhost = 'h'\n", "lacks 'port'"),
    (lambda s: s.replace("[network]", "[network]\ncolour = 'red'"), "unknown"),
    (lambda s: s + "\nbogus = 1\n" if False else s.replace("session_id", "sessionid"), "unknown top-level"),
    (lambda s: "not toml ===", "not valid TOML"),
])
def test_parties_file_errors(tmp_path, mutation, message):
    with pytest.raises(ConfigError, match=message):
        load_parties(_write(tmp_path, mutation(GOOD)))


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_parties(tmp_path / "nope.toml")
