#!/usr/bin/env python3
"""Run a pipeline for a while and report checkpoint durations from the HTTP API.
usage: ckpt.py BINARY YAML SECONDS WARMUP_SECONDS"""
import json, subprocess, sys, time, urllib.request, os, signal, resource
binary, yaml, secs, warm = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
port = 8899
log = open("ckpt-run.log", "w")
t0 = time.time()
p = subprocess.Popen([binary, "run", yaml, "--http", f"127.0.0.1:{port}"], stdout=log, stderr=log)
seen = {}
def poll():
    try:
        d = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/checkpoints", timeout=5))
    except Exception:
        return
    for c in d.get("checkpoints", []):
        if c["status"] == "completed":
            seen[c["id"]] = c
def records():
    try:
        m = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    except Exception:
        return None
    n = 0
    for l in m.splitlines():
        if l.startswith('ingest_records_in_total{operator="events"'):
            n += float(l.split()[-1])
    return n
r_warm = None
while time.time() - t0 < secs:
    time.sleep(2)
    poll()
    if r_warm is None and time.time() - t0 >= warm:
        r_warm, t_warm = records(), time.time()
poll()
r_end, t_end = records(), time.time()
os.kill(p.pid, signal.SIGKILL); p.wait()
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
cs = [c for i, c in sorted(seen.items()) if time.strptime(c["trigger_time"][:19], "%Y-%m-%dT%H:%M:%S") and
      (time.mktime(time.strptime(c["trigger_time"][:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone) >= t_warm]
ds = sorted(c["duration_ms"] for c in cs)
def pct(q): return ds[min(len(ds) - 1, int(q * len(ds)))]
inc = sorted(c["incremental_size_bytes"] for c in cs)
print(f"steady checkpoints {len(ds)}: duration ms p50 {pct(0.5):.0f} p99 {pct(0.99):.0f} max {ds[-1]:.0f}; "
      f"async max p99 {sorted(c['async_ms'] for c in cs)[min(len(cs)-1,int(0.99*len(cs)))]:.0f}; "
      f"incremental MB p50 {inc[len(inc)//2]/1e6:.1f} max {inc[-1]/1e6:.1f}; full MB {cs[-1]['state_size_bytes']/1e6:.1f}; "
      f"steady rate {(r_end - r_warm)/(t_end - t_warm)/1e6:.2f} M records/s; peak RSS {rss/1024:.0f} MB")
