#!/usr/bin/env python3
# Where a sandbox start's CPU goes, per process kind, from a perf recording
# of `warren bench` (docs/benchmarks.md, "issue 30"):
#
#   perf record -F 1999 -g -o perf.data -- ./bin/warren bench --quick --creates 40
#   perf script -i perf.data -F comm,pid,tid,ip,sym,dso > perf.txt
#   (cd agent && go build -trimpath -o /tmp/agent-sym ./cmd/warren-agent)   # the agent with symbols
#   scripts/perf-start-breakdown.py perf.txt bin/warren /tmp/agent-sym 'runc:[2:INIT]' warren-agent
#
# The init runs from a sealed copy of bin/warren (perf cannot name its
# symbols), so its addresses are resolved against bin/warren with
# `go tool addr2line`; at -F 1999 on cpu-clock a sample is 0.5 ms of CPU.
import re, subprocess, sys, collections
BIN = sys.argv[2]
AGENT = sys.argv[3]
samples = []  # (comm, pid, frames[(addr,sym,dso)])
cur = None
for line in open(sys.argv[1]):
    if not line.strip():
        if cur: samples.append(cur); cur = None
        continue
    if not line.startswith('\t') and not line.startswith(' '):
        parts = line.split()
        pid = parts[-1].split('/')[0]
        comm = ' '.join(parts[:-1])
        cur = (comm, pid, [])
        continue
    m = re.match(r'\s*([0-9a-f]+) (.*) \((.*)\)\s*$', line)
    if m and cur: cur[2].append((int(m.group(1), 16), m.group(2), m.group(3)))
if cur: samples.append(cur)
# resolve unknown warren addresses (memfd copy) with addr2line
addrs = set()
for comm, pid, fr in samples:
    for a, s, d in fr:
        if s == '[unknown]' and d.endswith('/warren'): addrs.add(a + 0x400000)
addrs = sorted(addrs)
out = subprocess.run(['go', 'tool', 'addr2line', BIN], input='\n'.join(hex(a) for a in addrs)+'\n', capture_output=True, text=True).stdout.split('\n')
names = {a: out[2*i] for i, a in enumerate(addrs)}
aaddrs = sorted({a + 0x400000 for c, p, fr in samples for a, s, d in fr if s == '[unknown]' and d.endswith('/warren-agent')})
out = subprocess.run(['go', 'tool', 'addr2line', AGENT], input='\n'.join(hex(a) for a in aaddrs)+'\n', capture_output=True, text=True).stdout.split('\n')
anames = {a: out[2*i] for i, a in enumerate(aaddrs)}
def syms(fr):
    r = []
    for a, s, d in fr:
        if s == '[unknown]' and d.endswith('/warren'): s = names.get(a + 0x400000, s)
        elif s == '[unknown]' and d.endswith('/warren-agent'): s = anames.get(a + 0x400000, s)
        r.append(s)
    return r
comms = collections.Counter(); pids = collections.defaultdict(set)
for comm, pid, fr in samples:
    comms[comm] += 1; pids[comm].add(pid)
print("samples by comm (distinct pids):")
for c, n in comms.most_common(12): print(f"  {c:20s} {n:6d} {len(pids[c]):5d}")
RULES = [
 ('seccomp (libseccomp compile + load)', lambda s, d: any('seccomp' in x.lower() for x in s) or any('libseccomp' in x for x in d)),
 ('config read (JSON from the parent)', lambda s, d: any(x in ('encoding/json.(*Decoder).Decode',) for x in s) and any('startInitialization' in x or 'containerInit' in x or 'libcontainer.Init' in x for x in s)),
 ('mounts + pivot_root (prepareRootfs)', lambda s, d: any('prepareRootfs' in x or 'pivotRoot' in x or 'finalizeRootfs' in x or 'maskPath' in x or 'readonlyPath' in x for x in s)),
 ('boot id hook (createContainer)', lambda s, d: any('runHook' in x or 'Hook' in x for x in s)),
 ('rest of libcontainer init (caps, exec of the agent)', lambda s, d: any('libcontainer' in x for x in s)),
 ('agent: serving RPCs (Connect, HTTP/2, exec of commands)', lambda s, d: any('connect' in x or 'http2' in x or 'net/http' in x for x in s) and not any('doInit' in x for x in s)),
 ('Go package initialisers (before libcontainer runs)', lambda s, d: any('doInit' in x for x in s) and not any('libcontainer' in x for x in s)),
 ('Go runtime start (schedinit, heap)', lambda s, d: any(x in ('runtime.rt0_go', 'runtime.schedinit', 'runtime.rt0_go.abi0') for x in s)),
 ('Go runtime: GC, scheduler, sysmon', lambda s, d: any(x.startswith('runtime.') for x in s)),
 ('dynamic loader (ld.so: libc, libseccomp)', lambda s, d: any('ld-linux' in x for x in d)),
 ('execve / ELF load / exit (kernel)', lambda s, d: any(x in ('load_elf_binary','begin_new_exec','do_exit','exit_mmap','__mmput','do_execveat_common.isra.0','bprm_execve') for x in s)),
]
def classify(comm):
    cats = collections.Counter(); total = 0
    for c, pid, fr in samples:
        if c != comm: continue
        total += 1
        s = syms(fr); d = [x[2] for x in fr]
        for name, f in RULES:
            if f(s, d): cats[name] += 1; break
        else: cats['other (kernel: page faults, scheduling, ...)'] += 1
    return total, cats
for comm in sys.argv[4:]:
    total, cats = classify(comm)
    n = len(pids[comm]) or 1
    print(f"\n{comm}: {total} samples, {n} processes, {total/n:.1f} samples each")
    for k, v in cats.most_common(): print(f"  {k:50s} {v:6d} {100*v/total:5.1f}%  {v/n:5.2f}/proc")

if True:  # the package initialisers that run in the init child
    c = collections.Counter()
    tot = 0
    for comm, pid, fr in samples:
        if comm != 'runc:[2:INIT]': continue
        s = syms(fr)
        if not any('doInit' in x for x in s) or any('libcontainer' in x for x in s): continue
        tot += 1
        # the frame just below doInit1: the package's init
        for i, x in enumerate(s):
            if 'doInit1' in x and i > 0:
                c[s[i-1].rsplit('.init', 1)[0] if '.init' in s[i-1] else s[i-1]] += 1; break
    print("\npackage initialisers in the init child (samples):", tot)
    for k, v in c.most_common(25): print(f"  {v:5d} {k}")
for comm in ('runc:[2:INIT]', 'warren-agent'):
    c = collections.Counter()
    for cm, pid, fr in samples:
        if cm != comm: continue
        s = syms(fr)
        if any('doInit' in x or 'libcontainer' in x or 'connect' in x or 'http2' in x or 'net/http' in x for x in s): continue
        if not any(x.startswith('runtime.') for x in s): continue
        top = [x for x in s if x.startswith('runtime.')]
        c[top[-1]] += 1
    print("\nruntime roots in", comm)
    for k, v in c.most_common(10): print(f"  {v:5d} {k}")
