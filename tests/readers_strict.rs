//! Readers that refuse what they cannot verify (docs/reliability.md, "Inputs"): LIME
//! files without their checksum record or with inconsistent record flags (exit 4 unless
//! --accept-unchecked), header values stated as whole numbers, ambiguous npy headers,
//! configs that are not UTF-8 or hold huge bad values; and the checks each input passed,
//! listed by `info` and in the report.

mod safety_common;
use safety_common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

/// (offset of the header, flags, data length, type) of each LIME record.
fn lime_records(b: &[u8]) -> Vec<(usize, u16, u64, String)> {
    let mut out = Vec::new();
    let mut off = 0;
    while off + 144 <= b.len() {
        let flags = u16::from_be_bytes([b[off + 6], b[off + 7]]);
        let len = u64::from_be_bytes(b[off + 8..off + 16].try_into().unwrap());
        let name = &b[off + 16..off + 144];
        let end = name.iter().position(|&c| c == 0).unwrap_or(128);
        out.push((
            off,
            flags,
            len,
            String::from_utf8_lossy(&name[..end]).into(),
        ));
        off += 144 + (len as usize).div_ceil(8) * 8;
    }
    out
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

/// The cut-off or damaged copies of a LIME file the audit read with exit 0, each refused
/// (exit 4) with the words that say what is wrong, and read (exit 0) with
/// --accept-unchecked, which `info` then lists.
#[test]
fn lime_files_without_their_checksum_or_with_bad_flags_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let mut cases: Vec<(PathBuf, &str)> = Vec::new();
    // tmLQCD's file: the binary record does not end its message; cut right after it.
    let ahm = std::fs::read(shared("ahmidas_conf.48")).unwrap();
    let recs = lime_records(&ahm);
    let bin_rec = recs.iter().position(|r| r.3 == "ildg-binary-data").unwrap();
    let cut = recs[bin_rec + 1].0;
    cases.push((
        write(d.path(), "cut.lime", &ahm[..cut]),
        "does not end its message",
    ));
    // One bit flipped in the checksum record's type name: no checksum record left.
    let ck = recs.iter().find(|r| r.3 == "scidac-checksum").unwrap().0;
    let mut flipped = ahm.clone();
    flipped[ck + 16 + 14] ^= 0x01; // "scidac-checksum" -> "scidac-checksul"
    cases.push((
        write(d.path(), "flipped.lime", &flipped),
        "no scidac-checksum record",
    ));
    // The ATB file's records each form a message: cut after the binary record, the
    // framing is whole but the checksum is gone.
    let atb = std::fs::read(shared("ATB_ildg.l8t4b3360")).unwrap();
    let arecs = lime_records(&atb);
    let abin = arecs
        .iter()
        .position(|r| r.3 == "ildg-binary-data")
        .unwrap();
    cases.push((
        write(d.path(), "atb-cut.lime", &atb[..arecs[abin + 1].0]),
        "no scidac-checksum record",
    ));
    // The first record's message-begin flag cleared.
    let mut no_mb = atb.clone();
    no_mb[arecs[0].0 + 6] &= !0x80;
    cases.push((
        write(d.path(), "no-mb.lime", &no_mb),
        "does not begin a message",
    ));
    // The last record's message-end flag cleared, where the last record is the binary
    // data's scidac-checksum (as tmLQCD 5.1 writes its files): nothing the reader needs
    // is missing, the checksums verify, and the file is taken without --accept-unchecked.
    assert_eq!(arecs.last().unwrap().3, "scidac-checksum");
    let mut no_me = atb.clone();
    no_me[arecs.last().unwrap().0 + 6] &= !0x40;
    let (code, err) = run(Command::new(env!("CARGO_BIN_EXE_qcd-solve"))
        .arg("info")
        .arg(write(d.path(), "no-me.lime", &no_me)));
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("does not end its message") && err.contains("accepted"),
        "{err}"
    );
    for (file, said) in &cases {
        let (code, err) = run(bin().arg("info").arg(file));
        assert_eq!(code, 4, "{file:?}: {err}");
        assert!(
            err.contains(said) && err.contains("--accept-unchecked"),
            "{err}"
        );
        let out = bin()
            .arg("info")
            .arg(file)
            .arg("--accept-unchecked")
            .output()
            .unwrap();
        let (code, err) = code_and_err(&out);
        assert_eq!(code, 0, "{file:?}: {err}");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("accepted unchecked"), "{text}");
    }
}

/// `info` on a whole file lists every check it made and its result.
#[test]
fn info_lists_the_checks_made() {
    let out = bin()
        .arg("info")
        .arg(shared("ATB_ildg.l8t4b3360"))
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for line in [
        "LIME record flags",
        "checksum suma",
        "ok: stored 10d0ea1a = computed",
        "checksum sumb",
        "SU(3) as stored",
        "finite values",
    ] {
        assert!(text.contains(line), "{line} not in {text}");
    }
}

/// The report lists every input's checks: the config and the gauge file here.
#[test]
fn the_report_lists_each_inputs_checks() {
    let d = tempfile::tempdir().unwrap();
    let rep = d.path().join("r.json");
    let body = format!(
        "[lattice]\nLX = 4\nLY = 4\nLZ = 4\nLT = 8\n\n[gauge]\ntype = \"file\"\npath = \"{}\"\n\n\
         [dirac]\nkappa = 0.12\n\n[backend]\ndevice = \"cpu\"\n\n[output]\nreport = \"{}\"\n",
        shared("ahmidas_conf.48").display(),
        rep.display()
    );
    let cfg = write_config(d.path(), &body);
    let (code, err) = run(bin().arg(&cfg));
    assert_eq!(code, 0, "{err}");
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&rep).unwrap()).unwrap();
    let inputs = r["input_checks"].as_array().unwrap();
    let names: Vec<&str> = inputs
        .iter()
        .map(|i| i["input"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["config", "gauge file"]);
    let gauge = inputs[1]["checks"].as_array().unwrap();
    assert!(gauge.iter().any(|c| c["check"] == "checksum suma"));
}

/// A header PLAQUETTE of "1" or "0" states the value exactly: checked to the stored
/// precision's 1e-10, not to the 2 (two units of the last digit) that let any
/// plaquette pass before.
#[test]
fn whole_number_header_plaquettes_get_the_precision_tolerance() {
    let d = tempfile::tempdir().unwrap();
    let orig = std::fs::read(shared("ATB_nersc.l8t4b3360")).unwrap();
    for v in ["0", "1"] {
        let mut b = orig.clone();
        let from = b"PLAQUETTE = 0.5038664469";
        let at = b.windows(from.len()).position(|w| w == from).unwrap();
        b.splice(at..at + from.len(), format!("PLAQUETTE = {v}").bytes());
        let f = write(d.path(), "p.nersc", &b);
        let (code, err) = run(bin().arg("info").arg(&f));
        assert_eq!(code, 4, "{v}: {err}");
        assert!(
            err.contains("PLAQUETTE mismatch") && err.contains("tolerance 1.0e-10"),
            "{err}"
        );
    }
}

/// An npy source whose header names 'descr' twice is refused (exit 4): numpy takes the
/// last, a first-match reader the first, so the file means two things.
#[test]
fn an_npy_header_with_a_key_twice_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let b = npy_bytes(
        "{'descr': '<c16', 'descr': '<f8', 'fortran_order': False, \
         'shape': (4, 4, 4, 4, 4, 3), }",
        256 * 12 * 16,
    );
    let src = write(d.path(), "s.npy", &b);
    let cfg = write_config(
        d.path(),
        &small(&format!(
            "[source]\ntype = \"file\"\npath = \"{}\"\n",
            src.display()
        )),
    );
    let (code, err) = run(bin().arg(&cfg));
    assert_eq!(code, 4, "{err}");
    assert!(err.contains("names 'descr' 2 times"), "{err}");
}

/// A config that is not UTF-8 is a config error (exit 2, not 3), naming the offset.
#[test]
fn a_non_utf8_config_is_a_config_error() {
    let d = tempfile::tempdir().unwrap();
    let mut b = small("").into_bytes();
    b.extend_from_slice(b"# \xff\xfe\n");
    let cfg = write(d.path(), "run.toml", &b);
    let (code, err) = run(bin().arg(&cfg));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("not UTF-8") && err.contains("offset"), "{err}");
}

/// A bad 900 KB string value gives an error message of at most about 4 KiB (the
/// message bound), where a 50 MB value once gave a 150 MB message.
#[test]
fn a_huge_bad_value_gives_a_bounded_message() {
    let d = tempfile::tempdir().unwrap();
    let body = small("").replace(
        "device = \"cpu\"",
        &format!("device = \"{}\"", "x".repeat(900_000)),
    );
    let cfg = write_config(d.path(), &body);
    let (code, err) = run(bin().arg(&cfg));
    assert_eq!(code, 2, "{err:.200}");
    assert!(err.len() < 5000, "{} bytes", err.len());
    assert!(err.contains("bytes of the message cut"), "{err:.200}");
}
