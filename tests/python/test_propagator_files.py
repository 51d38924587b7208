#!/usr/bin/env python3
"""Reads the files of `qcd-solve propagator` with other codes: the .npy with numpy, the
.h5 with h5py and the .lime with lyncs-io, and checks that they hold the same
propagator bit for bit, that the HDF5 attributes record the run's parameters, that the
SciDAC checksum is the one zlib's CRC-32 gives, and that the pion dataset is the
correlator of the stored propagator.

Usage: test_propagator_files.py [QCD_SOLVE_BINARY]
(default: $QCD_SOLVE_BIN, else target/release/qcd-solve). Needs numpy, h5py and lyncs-io
(.ci/run installs them into .pydeps). Exits non-zero on any failure.
"""

import json
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
import zlib

import h5py
import lyncs_io
import lyncs_io.lime
import numpy as np

DIMS = (4, 4, 4, 8)  # X, Y, Z, T
SOURCE = (1, 0, 2, 3)  # x, y, z, t
KAPPA, CSW, MU, TOL = 0.12, 1.0, 0.05, 1e-10
BOUNDARY = ("periodic", "periodic", "periodic", "antiperiodic")

CONFIG = f"""[lattice]
LX = {DIMS[0]}
LY = {DIMS[1]}
LZ = {DIMS[2]}
LT = {DIMS[3]}
boundary = {json.dumps(list(BOUNDARY))}

[gauge]
type = "random"
seed = 7

[dirac]
kappa = {KAPPA}
csw = {CSW}
mu = {MU}

[source]
type = "point"
site = {json.dumps(list(SOURCE))}

[solver]
method = "bicgstab"
tolerance = {TOL}

[backend]
device = "cpu"
"""


def binary():
    if len(sys.argv) > 1:
        return sys.argv[1]
    return os.environ.get("QCD_SOLVE_BIN", "target/release/qcd-solve")


def run_propagator(bin_path, folder):
    """Runs the propagator on CONFIG; returns the output stem's path."""
    cfg = os.path.join(folder, "prop.toml")
    with open(cfg, "w") as f:
        f.write(CONFIG)
    out = os.path.join(folder, "out")
    r = subprocess.run(
        [bin_path, "--quiet", "propagator", cfg, "--out", out],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, f"propagator exited {r.returncode}:\n{r.stdout}\n{r.stderr}"
    return os.path.join(out, "prop")


def text(v):
    """An HDF5 string attribute as str (h5py gives fixed-length strings as bytes)."""
    return v.decode() if isinstance(v, (bytes, np.bytes_)) else str(v)


def check_h5(stem, npy, report, version):
    with h5py.File(stem + ".propagator.h5", "r") as f:
        d = f["propagator"]
        assert d.dtype == np.complex128, d.dtype
        assert d.shape == npy.shape, d.shape
        h5 = d[...]
        # The same doubles: the formats are lossless.
        assert np.array_equal(h5, npy), f"max |h5 - npy| = {np.abs(h5 - npy).max()}"
        for attrs in (f.attrs, d.attrs):
            assert list(attrs["lattice"]) == list(DIMS), attrs["lattice"]
            assert text(attrs["boundary"]) == ",".join(BOUNDARY)
            assert attrs["kappa"] == KAPPA and attrs["csw"] == CSW and attrs["mu"] == MU
            assert list(attrs["source_site"]) == list(SOURCE)
            assert attrs["tolerance"] == TOL
            assert text(attrs["method"]) == "bicgstab"
            assert text(attrs["program"]) == "qcd-solve"
            assert text(attrs["version"]) == version, (attrs["version"], version)
            # The gauge field and plaquette as the JSON report states them.
            assert text(attrs["gauge"]) == report["gauge"]
            assert attrs["plaquette"] == report["plaquette"]
            assert text(attrs["backend"]) == report["backend"]
        assert "[t, z, y, x, s, c, s', c']" in text(d.attrs["layout"])
        pion = f["pion"][...]
        assert pion.dtype == np.float64
        assert list(pion) == report["pion"]
        assert text(f["pion"].attrs["source_gamma"]) == "G5"
    return pion


def check_pion(npy, pion):
    """C(t) = sum over timeslice (t0 + t) of sum |S|^2, from the array itself; the
    summation order differs from the program's, hence the 1e-12 relative tolerance."""
    lt, t0 = DIMS[3], SOURCE[3]
    per_slice = (np.abs(npy) ** 2).reshape(lt, -1).sum(axis=1)
    want = np.array([per_slice[(t0 + t) % lt] for t in range(lt)])
    rel = np.abs(pion - want) / want
    assert rel.max() <= 1e-12, rel


def check_lyncs(stem, npy):
    arr = lyncs_io.load(stem + ".propagator.lime")
    lt, lz, ly, lx = DIMS[3], DIMS[2], DIMS[1], DIMS[0]
    assert arr.shape == (lt, lz, ly, lx, 3, 4, 3, 4), arr.shape
    assert arr.dtype == np.dtype(">c16"), arr.dtype
    # The file's sites are [c][s][c'][s']; the npy's [s][c][s'][c'].
    back = arr.transpose(0, 1, 2, 3, 5, 4, 7, 6)
    assert np.array_equal(back, npy), f"max |lime - npy| = {np.abs(back - npy).max()}"


def xml_record(path, rec):
    with open(path, "rb") as f:
        f.seek(rec["offset"])
        raw = f.read(rec["nbytes"])
    return ET.fromstring(raw.rstrip(b"\0").decode())


def check_scidac(stem):
    """The SciDAC records read with lyncs-io's LIME record scanner and ElementTree; the
    checksum recomputed with zlib: the CRC-32 of each site's 2304 bytes rotated left by
    (site mod 29) and (site mod 31), XORed."""
    path = stem + ".propagator.lime"
    recs = {r["lime_type"]: r for r in lyncs_io.lime.read_records(path)}
    private = xml_record(path, recs["scidac-private-record-xml"])
    assert private.findtext("datatype") == "QDP_D3_DiracPropagator"
    assert private.findtext("precision") == "D"
    assert (private.findtext("colors"), private.findtext("spins")) == ("3", "4")
    assert private.findtext("typesize") == "2304"
    assert private.findtext("datacount") == "1"
    dims = xml_record(path, recs["scidac-private-file-xml"]).findtext("dims").split()
    assert [int(n) for n in dims] == list(DIMS), dims
    info = xml_record(path, recs["scidac-file-xml"])
    assert info.tag == "usqcdPropFile" and info.findtext("type") == "LHPC_DiracPropagator"
    assert f"kappa = {KAPPA}" in info.findtext("info")

    rotl = lambda w, k: ((w << k) | (w >> (32 - k))) & 0xFFFFFFFF if k else w
    suma = sumb = 0
    binrec = recs["ildg-binary-data"]
    with open(path, "rb") as f:
        f.seek(binrec["offset"])
        data = f.read(binrec["nbytes"])
    volume = DIMS[0] * DIMS[1] * DIMS[2] * DIMS[3]
    assert len(data) == volume * 2304
    for site in range(volume):
        crc = zlib.crc32(data[site * 2304 : (site + 1) * 2304])
        suma ^= rotl(crc, site % 29)
        sumb ^= rotl(crc, site % 31)
    ck = xml_record(path, recs["scidac-checksum"])
    assert int(ck.findtext("suma"), 16) == suma, (ck.findtext("suma"), hex(suma))
    assert int(ck.findtext("sumb"), 16) == sumb, (ck.findtext("sumb"), hex(sumb))


def main():
    bin_path = binary()
    assert os.path.isfile(bin_path), f"no qcd-solve binary at {bin_path}"
    version = subprocess.run(
        [bin_path, "--version"], capture_output=True, text=True, check=True
    ).stdout.split()[-1]
    passed, failed = 0, 0
    with tempfile.TemporaryDirectory() as folder:
        stem = run_propagator(bin_path, folder)
        npy = np.load(stem + ".propagator.npy")
        assert npy.shape == (DIMS[3], DIMS[2], DIMS[1], DIMS[0], 4, 3, 4, 3)
        assert npy.dtype == np.complex128
        with open(stem + ".propagator.json") as f:
            report = json.load(f)
        checks = [
            ("hdf5 (h5py)", lambda: check_pion(npy, check_h5(stem, npy, report, version))),
            ("lime (lyncs_io.load)", lambda: check_lyncs(stem, npy)),
            ("scidac records and checksum", lambda: check_scidac(stem)),
        ]
        for name, check in checks:
            try:
                check()
                print(f"ok      {name}")
                passed += 1
            except Exception as e:  # report every check, then fail
                print(f"FAILED  {name}: {type(e).__name__}: {e}")
                failed += 1
    print(f"propagator files: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
