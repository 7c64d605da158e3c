#!/usr/bin/env python3
"""Live heap by part of the daemon, from a heaptrack profile (issue 31).

    cargo build --profile profiling --no-default-features   # glibc's malloc: heaptrack follows it
    benches/scale.py --jobs 10000 --minutes 12 --large-estate --heaptrack \
        --bin target/profiling/checkpoint-sentinel
    heaptrack_print -f WORK/heaptrack.zst --flamegraph-cost-type leaked -F leaked.stacks
    benches/heap_by_part.py leaked.stacks 10000

scale.py kills the daemon with SIGKILL under heaptrack, so what it still held shows as "leaked".
Each allocation goes to the first part (below) whose source file or function is on its stack,
walking from the allocation towards main: the innermost owner wins. The second argument (the
number of jobs) adds a per-job column.
"""
import sys, collections, re
cats=[('snapshot (persist)', r'\(persist\.rs\)'),
 ('/metrics render', r'render_body|\(families\.rs\)|\(sink\.rs\)|\(export'),
 ('alerts+rule history', r'\(context\.rs\)|\(text\.rs\)|evaluate \(daemon\.rs\)|\(builtin\.rs\)|\(subjects\.rs\)|\(expr\.rs\)'),
 ('shadow alignment', r'\(alignment\.rs\)'),
 ('shadow trigger', r'\(trigger\.rs\)'),
 ('histograms', r'\(stats\.rs\)'),
 ('p95 history', r'\(history\.rs\)'),
 ('records', r'record_from|build_record|\(record\.rs\)'),
 ('evidence', r'\(evidence\.rs\)'),
 ('log events', r'observe_log_event|\(logs\.rs\)|\(tail|\(parse|\(causes\.rs\)|\(patterns\.rs\)|\(records\.rs\)'),
 ('checkpoint ids', r'\(checkpoint_ids\.rs\)'),
 ('poller cache', r'\(poller\.rs\)|\(convert\.rs\)|\(dto\.rs\)'),
 ('JobState box + maps', r'apply \(mod\.rs\)|apply_poll \(job\.rs\)|observe_poll'),
]
by=collections.Counter(); tot=0; ex={}
for l in open(sys.argv[1]):
    stack,_,n=l.rstrip('\n').rpartition(' ')
    n=int(n); tot+=n
    frames=stack.split(';')
    hit=None
    for f in reversed(frames):
        for name,rx in cats:
            if re.search(rx,f): hit=name; break
        if hit: break
    by[hit or 'other']+=n
    if not hit: ex.setdefault('o',collections.Counter())[';'.join(frames[-12:])[:300]]+=n
print('total %.1f MB'%(tot/1e6))
for k,v in by.most_common(): print(f"{v/1e6:8.1f} MB  {v/float(sys.argv[2]) if len(sys.argv)>2 else 0:8.0f} B/job  {k}")
if len(sys.argv)>3:
  for k,v in ex['o'].most_common(6): print(v/1e6,k)
