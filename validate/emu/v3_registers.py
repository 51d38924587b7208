#!/usr/bin/env python3
"""Registers and stack frame per kernel of stencil_v3.cu and halo.cu (every define set),
from a CUBIN that NVRTC compiles for sm_90 (no GPU, no ptxas: libnvrtc only; read from
the .nv.info attributes EIATTR_REGCOUNT 0x2f and EIATTR_FRAME_SIZE 0x11), for the
working tree and for a git revision (default HEAD) side by side, so a kernel change can
show it costs no registers.

Usage: LD_LIBRARY_PATH=.nvrtc/nvidia/cu13/lib python3 validate/emu/v3_registers.py [REV]
(EMU_DEFINES="NAME=VALUE ..." adds defines to the working tree's builds: this script's own
knob, as for validate/emu/common.sh; qcd-solve does not read it.)
"""
import ctypes, glob, os, struct, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LIB = (glob.glob(os.path.join(ROOT, ".nvrtc/nvidia/cu13/lib/libnvrtc.so*")) + ["libnvrtc.so.13"])[0]
nvrtc = ctypes.CDLL(LIB)


def cubin(path, incdir, defines):
    src = open(path).read().encode()
    prog = ctypes.c_void_p()
    assert nvrtc.nvrtcCreateProgram(ctypes.byref(prog), src, path.encode(), 0, None, None) == 0
    opts = [b"--gpu-architecture=sm_90", b"-default-device", b"--std=c++17", b"-I" + incdir.encode()]
    opts += [("-D%s=%s" % d).encode() for d in defines]
    if nvrtc.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts)) != 0:
        n = ctypes.c_size_t()
        nvrtc.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
        log = ctypes.create_string_buffer(n.value)
        nvrtc.nvrtcGetProgramLog(prog, log)
        sys.exit(log.value.decode())
    n = ctypes.c_size_t()
    nvrtc.nvrtcGetCUBINSize(prog, ctypes.byref(n))
    b = ctypes.create_string_buffer(n.value)
    nvrtc.nvrtcGetCUBIN(prog, b)
    return b.raw


def attributes(elf):
    """{kernel: (registers, frame bytes)} from the ELF's symbols and .nv.info sections."""
    shoff, = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 0x3A)
    secs = [struct.unpack_from("<IIQQQQIIQQ", elf, shoff + i * shentsize) for i in range(shnum)]
    name = lambda off, base: elf[base + off:].split(b"\0")[0].decode()
    shstr = secs[shstrndx][4]
    symtab = next(s for s in secs if s[1] == 2)
    strtab = secs[symtab[6]][4]
    syms = [name(struct.unpack_from("<I", elf, symtab[4] + k * 24)[0], strtab) for k in range(symtab[5] // 24)]
    out = {}
    for s in secs:
        if not name(s[0], shstr).startswith(".nv.info"):
            continue
        data, i = elf[s[4]:s[4] + s[5]], 0
        while i < len(data):
            fmt, attr = data[i], data[i + 1]
            i += 2
            if fmt == 1:
                continue
            if fmt in (2, 3):
                i += fmt - 1
                continue
            size, = struct.unpack_from("<H", data, i)
            i += 2
            if attr in (0x2F, 0x11):
                sym, val = struct.unpack_from("<II", data, i)
                regs, frame = out.get(syms[sym], (None, None))
                out[syms[sym]] = (val, frame) if attr == 0x2F else (regs, val)
            i += size
    return out


def main():
    rev = sys.argv[1] if len(sys.argv) > 1 else "HEAD"
    # EMU_DEFINES (the emulation's own knob, as in common.sh) applies to the working tree's column.
    extra = [tuple(x.split("=", 1)) for x in os.environ.get("EMU_DEFINES", "").split()]
    with tempfile.TemporaryDirectory() as old:
        names = subprocess.run(["git", "-C", ROOT, "ls-tree", "--name-only", rev, "kernels/"],
                               capture_output=True, text=True, check=True).stdout.split()
        for f in names:
            with open(os.path.join(old, os.path.basename(f)), "wb") as o:
                o.write(subprocess.run(["git", "-C", ROOT, "show", f"{rev}:{f}"], capture_output=True, check=True).stdout)
        print(f"{'kernel':<14} {'defines':<28} {rev + ' regs/frame':>18} {'tree regs/frame':>18}")
        for src in ("stencil_v3.cu", "halo.cu"):
            for r12, r8 in (("0", "0"), ("1", "0"), ("0", "1")):
                for single in "01":
                    # (A revision before reconstruct 8 ignores RECONSTRUCT_8: its column
                    # then shows its 18-real kernel.)
                    d = [("RECONSTRUCT_12", r12), ("RECONSTRUCT_8", r8), ("V3_SINGLE", single)]
                    new = attributes(cubin(os.path.join(ROOT, "kernels", src), os.path.join(ROOT, "kernels"), d + extra))
                    was = {}
                    if os.path.exists(os.path.join(old, src)):
                        was = attributes(cubin(os.path.join(old, src), old, d))
                    for k, (r, f) in sorted(i for i in new.items() if not i[0].startswith("$")):
                        o = was.get(k)
                        print(f"{k:<14} {'r12=' + r12 + ' r8=' + r8 + ' single=' + single:<28} "
                              f"{(f'{o[0]}/{o[1]}' if o else '-'):>18} {f'{r}/{f}':>18}")


main()
