// Summarises a V8 .cpuprofile (from `node --cpu-prof`): self time by function (with file:line),
// by package/area, and the inclusive time of our own source frames. Used to look at where a
// benchmarked command spends its time:
//
//   node --cpu-prof --cpu-prof-dir=/tmp/prof bin/run.js journals read -l name=x > /dev/null
//   node dist/bench/cpuprofile.js /tmp/prof/*.cpuprofile [--top 25]

import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
  columnNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

function where(cf: CallFrame): string {
  if (!cf.url) return '';
  let u = cf.url;
  try {
    if (u.startsWith('file://')) u = fileURLToPath(u);
  } catch {
    /* keep the url */
  }
  u = u.replace(/^.*\/node_modules\//, '~/').replace(/^.*\/work\/main\//, '');
  return `${u}:${cf.lineNumber + 1}`;
}

/** Coarse area of a frame: (gc), (idle), node internals, a package, or our own file. */
function area(cf: CallFrame): string {
  const u = cf.url;
  if (!u) return cf.functionName.startsWith('(') ? cf.functionName : '(native)';
  if (u.startsWith('node:')) return `node:${u.slice(5).split('/')[0]}`;
  const m = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(u);
  if (m) return m[1]!;
  const d = /\/work\/main\/(.*)$/.exec(u);
  return d ? d[1]!.replace(/\/[^/]+$/, '/') : u;
}

export function summarise(p: Profile, top = 25): string {
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const self = new Map<number, number>();
  for (let i = 0; i < p.samples.length; i++) {
    const dt = p.timeDeltas[i] ?? 0;
    self.set(p.samples[i]!, (self.get(p.samples[i]!) ?? 0) + dt);
  }
  const total = p.endTime - p.startTime;
  const fnSelf = new Map<string, number>();
  const areaSelf = new Map<string, number>();
  const ownInclusive = new Map<string, number>();
  const allInclusive = new Map<string, number>();
  const onBehalf = new Map<string, number>();
  for (const [id, us] of self) {
    const n = byId.get(id)!;
    const key = `${n.callFrame.functionName || '(anonymous)'}  ${where(n.callFrame)}`;
    fnSelf.set(key, (fnSelf.get(key) ?? 0) + us);
    const a = area(n.callFrame);
    areaSelf.set(a, (areaSelf.get(a) ?? 0) + us);
    // Inclusive time of our own frames (src/, bench/): each counted once per sample stack.
    const seen = new Set<string>();
    const seenAll = new Set<string>();
    let owner: string | undefined;
    for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
      const cf = byId.get(cur)!.callFrame;
      // "On behalf of": the innermost frame outside node itself (module loading counts for the
      // package whose code required the module).
      if (owner === undefined && cf.url && !cf.url.startsWith('node:')) owner = area(cf);
      if (cf.url) {
        const ka = `${cf.functionName || '(anonymous)'}  ${where(cf)}`;
        if (!seenAll.has(ka)) {
          seenAll.add(ka);
          allInclusive.set(ka, (allInclusive.get(ka) ?? 0) + us);
        }
      }
      if (!/\/work\/main\/(dist\/)?src\//.test(cf.url)) continue;
      const k = `${cf.functionName || '(anonymous)'}  ${where(cf)}`;
      if (seen.has(k)) continue;
      seen.add(k);
      ownInclusive.set(k, (ownInclusive.get(k) ?? 0) + us);
    }
    const o = owner ?? area(n.callFrame);
    onBehalf.set(o, (onBehalf.get(o) ?? 0) + us);
  }
  const pct = (us: number) => `${((100 * us) / total).toFixed(1).padStart(5)}%  ${(us / 1000).toFixed(0).padStart(6)} ms`;
  const sorted = (m: Map<string, number>, n: number) => [...m].sort((a, b) => b[1] - a[1]).slice(0, n);
  const out: string[] = [`profile: ${(total / 1000).toFixed(0)} ms, ${p.samples.length} samples`];
  out.push('', 'self time by area:');
  for (const [k, us] of sorted(areaSelf, 15)) out.push(`  ${pct(us)}  ${k}`);
  out.push('', 'time on behalf of (innermost non-node frame; module loading counts for the requirer):');
  for (const [k, us] of sorted(onBehalf, 15)) out.push(`  ${pct(us)}  ${k}`);
  out.push('', `top ${top} functions by self time:`);
  for (const [k, us] of sorted(fnSelf, top)) out.push(`  ${pct(us)}  ${k}`);
  out.push('', `top ${top} JS functions by inclusive time:`);
  for (const [k, us] of sorted(allInclusive, top)) out.push(`  ${pct(us)}  ${k}`);
  out.push('', `our frames (src/) by inclusive time:`);
  for (const [k, us] of sorted(ownInclusive, 15)) out.push(`  ${pct(us)}  ${k}`);
  return out.join('\n');
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const args = process.argv.slice(2);
  const ti = args.indexOf('--top');
  const top = ti >= 0 ? Number(args.splice(ti, 2)[1]) : 25;
  if (args.length === 0) {
    console.error('usage: node dist/bench/cpuprofile.js <file.cpuprofile>... [--top N]');
    process.exit(2);
  }
  for (const f of args) {
    console.log(`== ${f}`);
    console.log(summarise(JSON.parse(readFileSync(f, 'utf8')) as Profile, top));
  }
}
