"""Summarise an nsys cuda_gpu_trace CSV (run 154): per device-0 kernel name, the count,
total and mean time inside the solve (from the first CR graph kernel on), and device 0's
idle time there (the window less the union of its kernels and copies)."""
import csv, sys, collections
rows = list(csv.DictReader(open(sys.argv[1])))
def col(r, *names):
    for n in names:
        if n in r and r[n] not in ("", None):
            return r[n]
    return None
ev = []
for r in rows:
    dev = col(r, "Device", "GPU", "DevId")
    start = col(r, "Start (ns)", "Start")
    dur = col(r, "Duration (ns)", "Duration")
    name = col(r, "Name", "Kernel Name") or "?"
    if start is None or dur is None:
        continue
    ev.append((str(dev), int(float(start)), int(float(dur)), name, col(r, "Strm", "Stream") or "?"))
devs = sorted({e[0] for e in ev})
d0 = [e for e in ev if e[0] == devs[0]]
first = min((e[1] for e in d0 if "cr_xr" in e[3] or "cr_p" in e[3]), default=min(e[1] for e in d0))
last = max(e[1] + e[2] for e in d0)
w = [e for e in d0 if e[1] >= first]
by = collections.defaultdict(lambda: [0, 0])
for e in w:
    short = e[3].split("(")[0][:60]
    by[short][0] += 1
    by[short][1] += e[2]
span = last - first
iv = sorted((e[1], e[1] + e[2]) for e in w)
busy, cur_s, cur_e = 0, None, None
for s, t in iv:
    if cur_e is None or s > cur_e:
        if cur_e is not None:
            busy += cur_e - cur_s
        cur_s, cur_e = s, t
    else:
        cur_e = max(cur_e, t)
if cur_e is not None:
    busy += cur_e - cur_s
print(f"== {sys.argv[2]}: devices {devs}; device {devs[0]} from the first CR pass: {span/1e6:.2f} ms, busy {busy/1e6:.2f} ms, idle {(span-busy)/1e6:.2f} ms")
print(f"{'kernel':60s} {'count':>6s} {'total ms':>9s} {'mean us':>8s}")
for k, (n, t) in sorted(by.items(), key=lambda x: -x[1][1])[:22]:
    print(f"{k:60s} {n:6d} {t/1e6:9.3f} {t/n/1e3:8.2f}")
