"""``shaper circuit run`` takes a circuit file or the name of a circuit bundled with shaper."""

from shaper.cli import main

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
