//! ECDH-PSI points from a peer (`psi::blind`) and stored blinding keys
//! (`BlindingKey::from_canonical`): any bytes give Ok or Err, never a panic. An accepted batch
//! gives one valid, non-identity point per input point (re-blinding it succeeds).
#![no_main]
mod common;

use _native::psi::{self, BlindingKey, POINT};
use common::Input;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut r = Input::new(data);
    let stored: [u8; 32] = r.array();
    let key = match BlindingKey::from_canonical(&stored) {
        Ok(k) => {
            assert_eq!(k.to_bytes(), stored, "a canonical key round-trips");
            k
        }
        Err(_) => BlindingKey::from_wide(&[0x5a; 64]).expect("a fixed wide key is nonzero"),
    };
    let points = r.rest();
    match psi::blind(&key, points) {
        Ok(out) => {
            assert_eq!(out.len(), points.len());
            assert!(points.len() % POINT == 0);
            psi::blind(&key, &out).expect("a blinded point is a valid, non-identity point");
        }
        Err(e) => assert!(!e.is_empty()),
    }
});
