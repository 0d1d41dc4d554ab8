//! Oblivious transfer, sans I/O: every step takes the peer's bytes and returns the bytes to send;
//! Python carries them over its own (TLS) channels and supplies all randomness (`os.urandom`).
//! Nothing here draws random numbers.
//!
//! Security model. The extension's *correlation* holds against a malicious receiver when the
//! consistency check ([`check`]: Keller–Orsini–Scholl 2015, Roy 2022 for SoftSpoken) is on
//! (`enable_check` on both objects; `protocols/ot.py` turns it on for every link): a message u
//! not made from one choice vector (per-column or per-group r, a wrong SoftSpoken setup
//! message) fails, except where the receiver guesses the Δ bits its deviation touches (each
//! guess halves its chance), and a sender that saw a failure refuses every later call, so no
//! receiver learns Δ and with it the sender's later OTs. The sender learns nothing of the
//! choice bits (the check's 256 random extra rows mask x). What stays semi-honest: the
//! consumers ([`cot`], the hashes' users) take choice bits and offsets as given, a sender may
//! send wrong corrections (additive errors; selective failure on the receiver's bits once an
//! output is opened), and nothing here sacrifices triples or carries MACs; the base OTs are
//! Chou–Orlandi, whose UC proof against active parties has a known gap (research note §4).
//! Without the check (the objects' default, kept for the fuzz targets and the
//! benchmark's comparison) the extension is semi-honest: a deviating receiver learns bits of Δ.
//! Research background: `shared/research/mpc-ot.md` §4, §5, §7.
//!
//! # Protocols
//! 1. [`base`]: 128 base OTs, Chou–Orlandi "simplest OT" on Ristretto255, keys =
//!    SHA-256(domain, session, i, A, B_i, point) truncated to 16 bytes.
//! 2. [`iknp`]: IKNP extension. The extension receiver was the base-OT sender (k0_i, k1_i); the
//!    extension sender was the base-OT receiver with choice bits Δ (k_{Δ_i}). Column PRGs are
//!    AES-128-CTR under each key, continuing across calls; one call covers `count` rounded up to
//!    a multiple of 128 (`index` counts rounded rows; both sides agree). Output: rows t_j
//!    (receiver) and q_j = t_j ⊕ b_j·Δ (sender). The message u is 16 bytes per rounded row.
//!    The same types run SoftSpoken (Roy 2022; semi-honest, repetition code) with groups of
//!    k = 2 or 4 base OTs ([`iknp::IknpReceiver::soft`]): the same rows, Δ (the base-OT choice
//!    bits) and consumers, a message of 128/k bits per rounded row, for 2^k/k (receiver) and
//!    (2^k − 1)/k (sender) PRG blocks per OT instead of 2 and 1.
//!    - [`pprf`]: SoftSpoken's GGM trees (depth k, one per group, roots from a caller's 16-byte
//!      seed) and their one-time setup message, 4096 bytes receiver → sender, which hands the
//!      sender every leaf but the one its choice bits name.
//! 3. [`transpose`]: the 128 × 128 bit-matrix transpose (AVX2, SSE2, portable; the AVX-512
//!    variant is not written since it cannot be tested on the development machine).
//! 4. [`tccr`]: the tweakable correlation-robust hash H(x, τ) = π(π(x) ⊕ τ) ⊕ π(x) of
//!    Guo–Katz–Wang–Yu, π = AES-128 under the fixed public key SHA-256("shaper/ot/tccr/v1")[..16].
//!    Tweak τ(j, c): low 64 bits the OT index j, high 64 bits `domain ⊕ c`, c < 256 the output
//!    column, `domain` chosen by the caller per purpose, pair and direction with its low byte 0.
//!    Random OT: the receiver gets H(t_j, τ), the sender H(q_j, τ) and H(q_j ⊕ Δ, τ).
//! 5. [`cot`]: correlated OT / Gilboa products mod q (odd, < 2^62) or 2^64 with several offsets
//!    per choice bit; pads are the full 128-bit hash reduced mod q (bias < 2^-66).
//!
//! # Bit layouts
//! Packed bits are LSB-first: bit j of a byte array is `(a[j >> 3] >> (j & 7)) & 1` (numpy
//! `packbits(bitorder="little")`); of a u64 array, `(w[j >> 6] >> (j & 63)) & 1`. A 16-byte row is
//! read as a little-endian u128, so row bit i (LSB-first) is bit i of the integer; bit i of Δ is
//! base choice i. For Gilboa, row e·ℓ + i carries bit i of the receiver's value e.
//!
//! # Single use
//! Base OT: one reply per receiver, one key derivation per sender (a second reply to a new A
//! would reveal the choices). IKNP rows are fresh per call (the streams continue). Each
//! (OT index, column, domain) may be hashed for one purpose only: a random-OT pad used twice,
//! or a Gilboa correction sent twice for one pad, leaks. Δ is fixed per IKNP sender, so rows of
//! one extension must not be exposed raw (only their hashes). A SoftSpoken receiver's seed must
//! be fresh random bytes per receiver: the leaves depend on the seed alone, so two receivers on
//! one seed would run the same PRG streams.
//!
//! # Speed
//! AES runs in batches (64 counter blocks per column, 240 rows per hash batch) through the crate's
//! AES-128 ([`crate::aes`]): its own 256-bit VAES code on CPUs with VAES and AVX2 (RustCrypto's
//! `aes` 0.9 only picks VAES where the OS enables AVX-512 state, and would run 8-way AES-NI at
//! about half the rate on Zen 3), RustCrypto's backends elsewhere.
//!
//! The extension and its consumer can run fused ([`iknp::IknpReceiver::extend_hash`],
//! `extend_bits`, [`iknp::IknpSender::extend_cot`], ...): each 8192-row chunk of t or q is
//! transposed into a scratch buffer kept in the extension object and hashed while still in L2,
//! so the rows are never written out; outputs are bit-identical to extend-then-kernel (tested).
//! The bindings allocate outputs through numpy (huge pages) and write them with the GIL
//! released, and the fused random-OT calls take `out=` arrays: for large batches the page faults
//! of fresh outputs otherwise cost a good part of the cryptography. Secrets are not zeroised on
//! drop.

pub mod base;
pub mod block;
pub mod check;
pub mod cot;
pub mod iknp;
pub mod pprf;
pub mod tccr;
pub mod transpose;
