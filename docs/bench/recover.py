#!/usr/bin/env python3
"""Build keyed state to a size, kill -9 the run, restart it and time until
records flow through the stateful operator again.
usage: recover.py BINARY YAML STATE_BYTES [OPERATOR]"""
import subprocess, sys, time, urllib.request, os, signal
binary, yaml, target = sys.argv[1], sys.argv[2], float(sys.argv[3])
op = sys.argv[4] if len(sys.argv) > 4 else "w"
port = 8898
def metrics():
    try:
        return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read().decode()
    except Exception:
        return ""
def value(m, prefix):
    n = None
    for l in m.splitlines():
        if l.startswith(prefix):
            n = (n or 0) + float(l.split()[-1])
    return n
def start(logname):
    return subprocess.Popen([binary, "run", yaml, "--http", f"127.0.0.1:{port}"],
                            stdout=open(logname, "w"), stderr=subprocess.STDOUT)
p = start("rec-build.log")
t = time.time()
while True:
    time.sleep(0.5)
    full = value(metrics(), 'ingest_checkpoint_state_size_bytes{kind="full"') or 0
    if full >= target:
        last = value(metrics(), "ingest_checkpoint_last_completed_id")
        while value(metrics(), "ingest_checkpoint_last_completed_id") == last:
            time.sleep(0.05)
        break
    if p.poll() is not None:
        sys.exit("the build run ended")
os.kill(p.pid, signal.SIGKILL); p.wait()
print(f"built {full/2**30:.2f} GiB of checkpointed state in {time.time()-t:.0f} s; killed -9")
time.sleep(1)
t0 = time.time()
p = start("rec-restart.log")
perf = None
if os.environ.get("PERF"):
    perf = subprocess.Popen(["perf", "record", "-F", "999", "-g", "-p", str(p.pid), "-o", "perf.data"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
first_http = None
while True:
    m = metrics()
    now = time.time()
    if m and first_http is None:
        first_http = now
    n = value(m, f'ingest_records_in_total{{operator="{op}"')
    if n:
        break
    if now - t0 > 600:
        sys.exit("nothing flowed in 600 s")
    time.sleep(0.01)
t1 = time.time()
if perf:
    perf.send_signal(signal.SIGINT); perf.wait()
os.kill(p.pid, signal.SIGKILL); p.wait()
print(f"restart → HTTP up {first_http - t0:.2f} s → records into {op} {t1 - t0:.2f} s")
