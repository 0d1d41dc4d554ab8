"""``shaper circuit run`` takes a circuit file or the name of a circuit bundled with shaper, and
runs on this machine (``--local 3``) or on three hosts from a parties file."""

import pytest

from shaper.cli import main

pytestmark = pytest.mark.once  # end to end through the command line: kernel-independent, CI runs it in its first run only

KEY, PLAINTEXT = "000102030405060708090a0b0c0d0e0f", "00112233445566778899aabbccddeeff"
CIPHERTEXT = "69c4e0d86a7b0430d8cdb78070b4c55a"  # FIPS-197 appendix C.1


def test_bundled_circuit_by_name_in_the_clear_and_in_3pc(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # no aes_128.txt here: the name resolves to the bundled circuit
    assert main(["circuit", "run", "aes_128.txt", "--plain", "--inputs", KEY, PLAINTEXT]) == 0
    assert capsys.readouterr().out.split() == [CIPHERTEXT]
    assert main(["circuit", "run", "aes_128.txt", "--local", "3", "--inputs", KEY, PLAINTEXT]) == 0
    assert capsys.readouterr().out.split() == [CIPHERTEXT]


def test_unknown_circuit_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["circuit", "run", "aes_129.txt", "--plain", "--inputs", KEY]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("shaper circuit run: error: ") and "aes_129.txt" in err


def _three_hosts(root, connect_timeout="60s"):
    """Certificates and a parties file for three hosts on this machine: alice, bob, carol."""
    from shaper.net import make_certificates

    from .conftest import _free_port

    names = ["alice", "bob", "carol"]
    make_certificates(names, root / "certs")
    lines = ['session_id = "circuit-test"', "[network]", f'connect_timeout = "{connect_timeout}"', "[tls]",
             'ca = "certs/ca.pem"']
    for name in names:
        lines += ["[[party]]", f'name = "{name}"', 'host = "127.0.0.1"', f"port = {_free_port()}",
                  f'cert = "certs/{name}.pem"', f'key = "certs/{name}.key"']
    (root / "parties.toml").write_text("\n".join(lines) + "\n")
    return root / "parties.toml", names


def test_three_hosts_from_a_parties_file_each_give_their_own_input(tmp_path):
    """On real hosts input value k comes from party k mod 3: alice gives the AES key, bob the
    plaintext, carol nothing; all three print the ciphertext (FIPS-197)."""
    import subprocess
    import sys

    parties, names = _three_hosts(tmp_path)
    inputs = {"alice": [KEY], "bob": [PLAINTEXT], "carol": []}
    procs = [subprocess.Popen([sys.executable, "-m", "shaper", "circuit", "run", "aes_128.txt", "--parties", str(parties),
                               "--me", me, *(["--inputs", *inputs[me]] if inputs[me] else [])],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for me in names]
    outs = [p.communicate(timeout=180) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], outs
    assert [out.split() for out, _ in outs] == [[CIPHERTEXT]] * 3


def test_a_party_giving_the_wrong_inputs_is_told_which_it_gives(tmp_path, capsys):
    parties, _ = _three_hosts(tmp_path, connect_timeout="1s")  # nobody else runs: telling them ends soon
    assert main(["circuit", "run", "aes_128.txt", "--parties", str(parties), "--me", "carol", "--inputs", KEY]) == 2
    err = capsys.readouterr().err
    assert "shaper circuit run: error: party 3 of the parties file gives no input value of aes_128.txt" in err
    assert main(["circuit", "run", "aes_128.txt", "--parties", str(parties), "--me", "bob"]) == 2
    assert "gives input value 2 of 2 (widths 128 bits)" in capsys.readouterr().err
    assert main(["circuit", "run", "aes_128.txt", "--local", "3", "--parties", str(parties), "--me", "bob"]) == 2
    assert "not both" in capsys.readouterr().err
