//! Pieces of JSON written straight into a `Vec<u8>`, byte for byte as serde_json writes them:
//! strings escaped as its `format_escaped_str` escapes them, integers, `null`. The JSON report's
//! checkpoints (`json.rs`) are written with these rather than through serde's `Serializer`
//! (issue 42: serde's escaping and map entries were most of what the JSON report cost over the
//! text report).

/// Every byte of a `u64` set to `b`.
const fn splat(b: u8) -> u64 {
    u64::from_ne_bytes([b; 8])
}

const LOW7: u64 = splat(0x7f);
const HIGH: u64 = splat(0x80);

/// Bytes of `w` that are zero: their top bit set in the result, the others clear (exact, no
/// carry between bytes).
fn zero_bytes(w: u64) -> u64 {
    !(((w & LOW7) + LOW7) | w | LOW7)
}

/// Whether any of the 8 bytes of `w` must be escaped in a JSON string: a control character
/// (below 0x20), `"` or `\`.
fn needs_escape(w: u64) -> bool {
    // Bytes below 0x20 are those whose top three bits are clear.
    let control = zero_bytes(w & splat(0xe0));
    (control | zero_bytes(w ^ splat(b'"')) | zero_bytes(w ^ splat(b'\\'))) & HIGH != 0
}

/// The escape of one byte, as serde_json writes it: `None` for a byte written as it is.
fn escape(b: u8) -> Option<&'static [u8]> {
    Some(match b {
        b'"' => b"\\\"",
        b'\\' => b"\\\\",
        b'\n' => b"\\n",
        b'\r' => b"\\r",
        b'\t' => b"\\t",
        0x08 => b"\\b",
        0x0c => b"\\f",
        0x00..=0x1f => return Some(&CONTROL[usize::from(b)]),
        _ => return None,
    })
}

/// `\u00XX` (lower-case hex, as serde_json writes it) for each control character.
static CONTROL: [[u8; 6]; 32] = {
    let hex = b"0123456789abcdef";
    let mut table = [[0u8; 6]; 32];
    let mut i = 0;
    while i < 32 {
        table[i] = [b'\\', b'u', b'0', b'0', hex[i >> 4], hex[i & 0xf]];
        i += 1;
    }
    table
};

/// `s` as a JSON string: quoted, escaped. Runs that need no escape (nearly every string) are
/// found 8 bytes at a time and copied whole.
pub(super) fn string(out: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        if let Some(word) = bytes.get(i..i + 8) {
            let word =
                u64::from_ne_bytes([word[0], word[1], word[2], word[3], word[4], word[5], word[6], word[7]]);
            if !needs_escape(word) {
                i += 8;
                continue;
            }
        }
        // A byte to escape within the next 8 (or the tail): byte by byte up to the next word.
        let end = (i + 8).min(bytes.len());
        while i < end {
            if let Some(esc) = escape(bytes[i]) {
                out.extend_from_slice(&bytes[start..i]);
                out.extend_from_slice(esc);
                start = i + 1;
            }
            i += 1;
        }
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

/// `s` as a JSON string, or `null`.
pub(super) fn opt_string(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        Some(s) => string(out, s),
        None => out.extend_from_slice(b"null"),
    }
}

/// An integer as serde_json writes it.
pub(super) fn int(out: &mut Vec<u8>, n: impl itoa::Integer) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

/// An integer, or `null`.
pub(super) fn opt_int(out: &mut Vec<u8>, n: Option<impl itoa::Integer>) {
    match n {
        Some(n) => int(out, n),
        None => out.extend_from_slice(b"null"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ours(s: &str) -> String {
        let mut out = Vec::new();
        string(&mut out, s);
        String::from_utf8(out).unwrap()
    }

    /// Every character serde_json escapes or not, alone and at every position of a word (the
    /// fast path reads 8 bytes at a time), is written as serde_json writes it.
    #[test]
    fn strings_are_escaped_as_serde_json_escapes_them() {
        let mut chars: Vec<char> = (0u32..0x80).filter_map(char::from_u32).collect();
        chars.extend(['\u{80}', 'é', 'ß', '€', '\u{2028}', '\u{2029}', '\u{fffd}', '😀', '\u{10ffff}']);
        for c in &chars {
            for pad in 0..17 {
                for tail in [0, 1, 7, 8, 9] {
                    let s = format!("{}{c}{}", "a".repeat(pad), "z".repeat(tail));
                    assert_eq!(ours(&s), serde_json::to_string(&s).unwrap(), "{s:?}");
                }
            }
        }
        let every: String = chars.iter().collect();
        let tricky = [
            String::new(),
            every.clone(),
            every.chars().rev().collect(),
            "\"quoted\" \\path\\ \t tab \u{1} \u{1f} \u{7f} \r\n".repeat(3),
            "java.io.IOException: \"C:\\tmp\\x\" \u{0}\u{8}\u{c} naïve \u{65e5}\u{672c} �".into(),
            String::from_utf8_lossy(b"invalid \xff\xfe utf-8 \xc3( end").into_owned(),
            "\\".repeat(17),
            "\"".repeat(9),
        ];
        for s in tricky {
            assert_eq!(ours(&s), serde_json::to_string(&s).unwrap(), "{s:?}");
        }
    }

    /// The word test against the byte test, for every byte at every position of a word whose
    /// other bytes are harmless or themselves any byte.
    #[test]
    fn the_word_test_finds_exactly_the_bytes_to_escape() {
        for b in 0..=255u8 {
            for at in 0..8 {
                for fill in [b'a', 0x20, 0x7f, 0x80, 0xff, b'!', b'#', b'[', b']', 0x21] {
                    let mut word = [fill; 8];
                    word[at] = b;
                    let want = word.iter().any(|&x| escape(x).is_some());
                    assert_eq!(needs_escape(u64::from_ne_bytes(word)), want, "{word:?}");
                }
            }
        }
    }

    #[test]
    fn integers_and_nulls_as_serde_json_writes_them() {
        let mut out = Vec::new();
        int(&mut out, u64::MAX);
        out.push(b' ');
        opt_int(&mut out, Some(-1_795_965_690_656i64));
        out.push(b' ');
        opt_int(&mut out, None::<u32>);
        out.push(b' ');
        opt_string(&mut out, None);
        assert_eq!(out, format!("{} -1795965690656 null null", u64::MAX).into_bytes());
    }
}
