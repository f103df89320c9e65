//! The contract between the target and the host: the dump format and the run configuration block.
//!
//! This module is compiled on every target, so `cargo-sample` uses the very same constants and
//! checksum as the firmware. `docs/dump-format.md` in the repository draws every byte.
//!
//! All integers are little-endian. A dump is a 16-byte file header followed by records; every
//! record is an 8-byte record header (`kind: u16`, `flags: u16`, `len: u32`) and `len` payload
//! bytes, padded with zeros to a multiple of 4. The last record is [`REC_END`], whose payload is
//! the CRC-32 of every byte before it. Unknown record kinds are skipped by the host, so new kinds
//! can be added without a new format version.

mod config;
mod pmu;
mod records;
mod state;

pub use config::*;
pub use pmu::*;
pub use records::*;
pub use state::*;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc_matches_reference_value() {
        // The standard check value of CRC-32/ISO-HDLC.
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
    }

    #[test]
    fn chunks_end_at_the_ring_end_or_the_limit() {
        assert_eq!(next_chunk(0, Some(100), 0), (100, 0));
        assert_eq!(next_chunk(250, Some(100), 0), (50, 50));
        assert_eq!(next_chunk(250, Some(100), 270), (20, 50));
        assert_eq!(next_chunk(10, None, 0), (u32::MAX, 0));
        assert_eq!(next_chunk(10, None, 30), (20, 0));
    }

    #[test]
    fn the_remainder_by_shifts_is_the_remainder() {
        let mut x = 0x1234_5678u32;
        for _ in 0..10_000 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            let b = (x >> 7) % 100_000 + (x & 1);
            assert_eq!(
                rem_by_shifts(x, b),
                x.checked_rem(b).unwrap_or(x),
                "{x} % {b}"
            );
        }
        for (a, b) in [
            (0, 7),
            (u32::MAX, 1),
            (u32::MAX, 0x7FFF_FFFF),
            (5, 0),
            (6, 3),
        ] {
            assert_eq!(
                rem_by_shifts(a, b),
                a.checked_rem(b).unwrap_or(a),
                "{a} % {b}"
            );
        }
    }

    #[test]
    fn pmu_config_carries_events_flags_and_run_id() {
        let b = pmu_config_with(&[0x08, 0x03], PMU_FLAG_MEMORY, 0xDEAD_BEEF);
        let (e, n) = pmu_config_events(&b).unwrap();
        assert_eq!(&e[..n], &[0x08, 0x03]);
        assert_eq!(pmu_config_flags(&b), Some((PMU_FLAG_MEMORY, 0xDEAD_BEEF)));
        assert_eq!(pmu_config_flags(&pmu_config(&[1])), Some((0, 0)));
        // The firmware's own default (0xFF bytes) is no block.
        assert_eq!(pmu_config_flags(&[0xFF; PMU_CONFIG_LEN]), None);
        assert_eq!(pmu_config_flags(&b[..PMU_CONFIG_LEN - 1]), None);
    }

    #[test]
    fn config_round_trip_and_rejects_damage() {
        let c = Config {
            mode: MODE_RING,
            sink: SINK_SEMIHOSTING,
            priority: 0,
            timer: TIMER_SYSTICK,
            reload: 249,
            jitter_mask: 127,
            limit: 10_000,
            seed: 0x1234_5678,
            timer_base: 0,
            timer_irq: 0,
            hist_base: 0x0000_1000,
            hist_shift: 4,
            tag_kind: TAG_WORD,
            tag_addr: 0x2000_0100,
            stack_words: 48,
            frame_records: 20,
            stack_top: 0x2001_0000,
            late_ticks: 17,
            flags: CONFIG_MAIN_STACK_ONLY,
        };
        let b = c.encode();
        assert_eq!(Config::decode(&b), Some(c));
        for i in 0..CONFIG_LEN {
            let mut d = b;
            d[i] ^= 0x10;
            assert_eq!(Config::decode(&d), None, "flip in byte {i} went unnoticed");
        }
        assert_eq!(Config::decode(&[0u8; CONFIG_LEN]), None);
        // The placeholder the runtime is built with: no configuration, but its version.
        assert_eq!(Config::decode(&config_placeholder()), None);
        assert_eq!(
            runtime_config_version(&config_placeholder()),
            Some(CONFIG_VERSION)
        );
        assert_eq!(runtime_config_version(&[0u8; CONFIG_LEN]), None);
        assert_eq!(runtime_config_version(&Config::default().encode()), None);
    }

    #[test]
    fn info_round_trip() {
        let i = Info {
            mode: MODE_RING,
            timer: TIMER_CMSDK,
            stop: STOP_LIMIT,
            arch: 7,
            reload: 1,
            jitter_mask: 2,
            limit: 3,
            capacity: 4,
            taken: 5,
            lost: 6,
            code_start: 7,
            code_end: 8,
            code_crc: 9,
            config_addr: 10,
            config_found: 1,
            priority: 0x40,
            rt_version: 0x0102,
            tag_kind: TAG_XPSR,
            foreign: 0x0A0B_0C0D,
            timer_hz: 84_000_000,
        };
        assert_eq!(Info::decode(&i.encode()), Some(i));
        assert_eq!(Info::decode(&[0u8; 10]), None);
    }
}
