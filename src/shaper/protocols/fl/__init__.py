"""Federated learning with Paillier (the seed of Yang et al.): coordinated vertical linear
models with an arbiter (:mod:`.hetero`), blind decryption (:mod:`.blind`), packed secure
aggregation for horizontal federated averaging (:mod:`.aggregate`), all on a pluggable Paillier
engine (:mod:`.backend`: shaper or python-paillier) with the time of every step split into
encryption, decryption, homomorphic work and waiting (:class:`shaper.net.phases.Phases`). ``docs/fl.md`` has the
roles, the messages and what each role learns."""
