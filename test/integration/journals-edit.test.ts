// `journals edit` end to end: our gazctl
// runs against a real broker with GAZ_EDITOR pointing at a scripted "editor" (a small node
// program) that records every buffer it is shown and then edits, breaks, fixes, empties or
// leaves the file as told. Each test owns its journals (prefix eN/), so none depends on another.

import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { peerBinary, runGoGazctl, startCluster, waitForJournalsAssigned, type Cluster } from '../../src/testing/index.js';
import { describeResult, runGazctl, type GazctlResult } from '../helpers/cli.js';

const GEAR = '#\u2699';
const WARN = '#\u26a0';
const PREFIXES = ['e1/', 'e2/', 'e3/', 'e4/', 'e5/', 'e6/', 'e7/'];

function specs(): string {
  const dirs = PREFIXES.map(
    (p) => `- name: ${p}
  children:
  - name: ${p}a
  - name: ${p}b
    labels:
    - name: tier
      value: hot
`,
  ).join('');
  return `name: ""
replication: 1
labels:
- name: app
  value: edit-test
fragment:
  length: 1048576
  compression_codec: SNAPPY
  stores:
  - file:///
  refresh_interval: 1m0s
children:
${dirs}`;
}

/** The scripted editor: `node editor.mjs <file>`; its steps and records live in $EDIT_STATE. */
const EDITOR = `
import { execSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
const file = process.argv[2];
const state = process.env.EDIT_STATE;
const steps = JSON.parse(readFileSync(join(state, 'steps.json'), 'utf8'));
const countFile = join(state, 'count');
const n = existsSync(countFile) ? Number(readFileSync(countFile, 'utf8')) : 0;
writeFileSync(countFile, String(n + 1));
const text = readFileSync(file, 'utf8');
writeFileSync(join(state, 'open-' + n + '.txt'), text);
writeFileSync(join(state, 'path-' + n + '.txt'), file);
const step = steps[n];
if (!step) { writeFileSync(join(state, 'error.txt'), 'unexpected open #' + n); process.exit(3); }
if (step.shell) execSync(step.shell, { stdio: 'ignore' });
let out = text;
for (const [from, to] of step.replace ?? []) {
  if (!out.includes(from)) { writeFileSync(join(state, 'error.txt'), 'open #' + n + ': ' + JSON.stringify(from) + ' not found'); process.exit(4); }
  out = out.replace(from, to);
}
if (step.write !== undefined) out = step.write;
writeFileSync(file, out);
process.exit(step.exit ?? 0);
`;

interface Step {
  /** [from, to] string replacements, in order; a missing `from` fails the editor. */
  replace?: [string, string][];
  /** Replace the whole file. */
  write?: string;
  /** Shell command run first (e.g. a concurrent change with the Go gazctl). */
  shell?: string;
  /** Editor exit status (default 0). */
  exit?: number;
}

interface EditRun {
  r: GazctlResult;
  /** The buffers the editor was shown, in order. */
  opens: string[];
  /** The file paths it was given. */
  paths: string[];
  what: string;
}

let cluster: Cluster | undefined;
let work = '';
let editorPath = '';

async function goGazctl(args: string[], input?: string): Promise<string> {
  const r = await runGoGazctl(args, { brokerAddress: cluster!.brokerAddress, input, cwd: work, timeoutMs: 20_000 });
  assert.equal(r.code, 0, `Go gazctl ${args.join(' ')} failed (code ${r.code}):\n${r.stderr}`);
  return r.stdout.toString('utf8');
}

const listYaml = (prefix: string) => goGazctl(['journals', 'list', '-l', `prefix=${prefix}`, '-o', 'yaml']);
const listJson = (prefix: string) => goGazctl(['journals', 'list', '-l', `prefix=${prefix}`, '-o', 'json']);

let runs = 0;
async function edit(prefix: string, steps: Step[], extraArgs: string[] = []): Promise<EditRun> {
  const state = join(work, `state-${++runs}`);
  mkdirSync(state);
  writeFileSync(join(state, 'steps.json'), JSON.stringify(steps));
  const args = ['journals', 'edit', '-l', `prefix=${prefix}`, ...extraArgs];
  const r = await runGazctl(args, {
    env: {
      BROKER_ADDRESS: cluster!.brokerAddress,
      GAZ_EDITOR: `"${process.execPath}" "${editorPath}"`,
      EDITOR: 'false',
      EDIT_STATE: state,
    },
    timeoutMs: 60_000,
  });
  const opens: string[] = [];
  const paths: string[] = [];
  for (let i = 0; existsSync(join(state, `open-${i}.txt`)); i++) {
    opens.push(readFileSync(join(state, `open-${i}.txt`), 'utf8'));
    paths.push(readFileSync(join(state, `path-${i}.txt`), 'utf8'));
  }
  const err = existsSync(join(state, 'error.txt')) ? `\neditor script: ${readFileSync(join(state, 'error.txt'), 'utf8')}` : '';
  return { r, opens, paths, what: describeResult(args, r) + err };
}

/** Splits a buffer into its generated lines (#⚙ / #⚠) at the top and the YAML body after them. */
function parts(buffer: string): { header: string[]; body: string } {
  const lines = buffer.split('\n');
  let i = 0;
  while (i < lines.length && (lines[i]!.startsWith(GEAR) || lines[i]!.startsWith(WARN))) i++;
  return { header: lines.slice(0, i), body: lines.slice(i).join('\n') };
}

describe('journals edit with a scripted editor', { timeout: 240_000 }, () => {
  before(async () => {
    work = mkdtempSync(join(tmpdir(), 'gazctl-edit-'));
    editorPath = join(work, 'editor.mjs');
    writeFileSync(editorPath, EDITOR);
    cluster = await startCluster({ brokers: 1 });
    await goGazctl(['journals', 'apply'], specs());
    await waitForJournalsAssigned(
      cluster,
      PREFIXES.flatMap((p) => [`${p}a`, `${p}b`]),
      30_000,
    );
  });
  after(async () => {
    await cluster?.stop();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  test('shows the listing under a generated header and applies the edit', async () => {
    const p = 'e1/';
    const listed = await listYaml(p);
    const e = await edit(p, [{ replace: [['refresh_interval: 1m0s', 'refresh_interval: 2m0s']] }]);
    assert.equal(e.r.code, 0, e.what);
    assert.equal(e.opens.length, 1, e.what);
    const { header, body } = parts(e.opens[0]!);
    // The header: #⚙ lines only (no error block on the first pass), stating its own length.
    assert.ok(header.length >= 3 && header.every((l) => l.startsWith(GEAR)), e.opens[0]);
    assert.match(header.join('\n'), new RegExp(`\\(${header.length} lines\\)`), 'the header states its length');
    // The YAML is exactly what `journals list -o yaml` prints (here: the Go gazctl's).
    assert.equal(body, listed);
    assert.equal(e.r.stdout.length, 0, e.what);
    assert.match(e.r.stderr, /^applied 2 journal changes in 1 transaction \(etcd revision \d+\)\n$/, e.what); // D9
    assert.match(await listYaml(p), /refresh_interval: 2m0s/);
    assert.ok(!existsSync(e.paths[0]!), 'the temp file is removed after a successful edit');
  });

  test('invalid YAML reopens the editor with the error and the edits kept', async () => {
    const p = 'e2/';
    const e = await edit(p, [
      // Open 1: an unknown field (and a wanted change).
      { replace: [['refresh_interval: 1m0s', 'refresh_interval: 3m0s\n  bogus: 1']] },
      // Open 2: remove the mistake.
      { replace: [['\n  bogus: 1', '']] },
    ]);
    assert.equal(e.r.code, 0, e.what);
    assert.equal(e.opens.length, 2, e.what);
    const second = parts(e.opens[1]!);
    const warn = second.header.filter((l) => l.startsWith(WARN));
    assert.ok(warn.length >= 3, `an error block of #⚠ lines:\n${e.opens[1]}`);
    const m = /line (\d+)\b.*unknown field "bogus"/.exec(warn.join('\n'));
    assert.ok(m, `the error names the line and the field:\n${warn.join('\n')}`);
    // Line numbers count from the first line after the header.
    assert.equal(second.body.split('\n')[Number(m[1]) - 1], '  bogus: 1', `line ${m[1]} of the edited YAML`);
    assert.match(second.body, /refresh_interval: 3m0s/, 'the edits are kept');
    assert.match(second.header.join('\n'), new RegExp(`\\(${second.header.length} lines\\)`), 'the header states its length');
    assert.match(e.r.stderr, /unknown field "bogus".*reopening the editor/, e.what);
    const yaml = await listYaml(p);
    assert.match(yaml, /refresh_interval: 3m0s/);
    assert.doesNotMatch(yaml, /bogus/);
  });

  test('a failed apply (stale revision) reopens the editor too (D3); an empty file then cancels', async () => {
    const p = 'e3/';
    const goBin = peerBinary('gazctl');
    // While the editor is open, someone else changes e3/a (any revision).
    const concurrent = `name: ${p}a\nreplication: 1\nlabels:\n- name: app\n  value: edit-test\n- name: by\n  value: someone-else\nfragment:\n  length: 1048576\n  compression_codec: SNAPPY\n  stores:\n  - file:///\n  refresh_interval: 1m0s\nrevision: -1\n`;
    const specFile = join(work, 'concurrent.yaml');
    writeFileSync(specFile, concurrent);
    const e = await edit(p, [
      { shell: `"${goBin}" journals apply --specs "${specFile}"`, replace: [['compression_codec: SNAPPY', 'compression_codec: GZIP']] },
      { write: '' },
    ]);
    assert.equal(e.r.code, 0, e.what);
    assert.equal(e.opens.length, 2, e.what);
    const second = parts(e.opens[1]!);
    const warn = second.header.filter((l) => l.startsWith(WARN)).join('\n');
    assert.match(warn, /revision/, `the apply error is shown:\n${e.opens[1]}`);
    assert.match(warn, /e3\/a/, `the error names the journal that changed:\n${e.opens[1]}`);
    assert.match(second.body, /compression_codec: GZIP/, 'the edits are kept');
    assert.match(e.r.stderr, /Cancelled; empty file\.\n$/, e.what);
    const yaml = await listYaml(p);
    assert.match(yaml, /value: someone-else/, 'the concurrent change stands');
    assert.doesNotMatch(yaml, /GZIP/, 'the edit was not applied');
    assert.ok(!existsSync(e.paths[1]!), 'the temp file is removed on cancel');
  });

  test('an empty file cancels: exit 0, nothing applied', async () => {
    const p = 'e4/';
    const beforeJson = await listJson(p);
    const e = await edit(p, [{ write: '' }]);
    assert.equal(e.r.code, 0, e.what);
    assert.equal(e.opens.length, 1, e.what);
    assert.equal(e.r.stderr, 'Cancelled; empty file.\n', e.what);
    assert.equal(e.r.stdout.length, 0, e.what);
    assert.equal(await listJson(p), beforeJson);
  });

  test('a file of only the generated lines counts as empty', async () => {
    const p = 'e5/';
    const beforeJson = await listJson(p);
    const e = await edit(p, [{ write: `${GEAR} kept only the header\n${WARN}\n\n   \n` }]);
    assert.equal(e.r.code, 0, e.what);
    assert.equal(e.r.stderr, 'Cancelled; empty file.\n', e.what);
    assert.equal(await listJson(p), beforeJson);
  });

  test('an unchanged file cancels: exit 0, nothing applied', async () => {
    const p = 'e6/';
    const beforeJson = await listJson(p);
    const e = await edit(p, [{}]);
    assert.equal(e.r.code, 0, e.what);
    assert.equal(e.r.stderr, 'Cancelled; nothing to do.\n', e.what);
    assert.equal(await listJson(p), beforeJson);
    assert.ok(!existsSync(e.paths[0]!), 'the temp file is removed');
  });

  test('an invalid file saved unchanged on reopen cancels and keeps the edits', async () => {
    const p = 'e7/';
    const beforeJson = await listJson(p);
    const e = await edit(p, [{ replace: [['value: hot', 'value: "not valid"']] }, {}]);
    assert.equal(e.r.code, 0, e.what);
    assert.equal(e.opens.length, 2, e.what);
    const m = /Cancelled; no changes to invalid file\. Last edits saved to (\S+)\.\n$/.exec(e.r.stderr);
    assert.ok(m, e.what);
    const saved = readFileSync(m[1]!, 'utf8');
    rmSync(m[1]!, { force: true });
    assert.match(saved, /value: "not valid"/);
    assert.equal(await listJson(p), beforeJson, 'nothing was applied');
  });

  test('an editor that fails ends the command: exit 1, one line, nothing applied', async () => {
    const p = 'e4/';
    const beforeJson = await listJson(p);
    const e = await edit(p, [{ replace: [['value: hot', 'value: cold']], exit: 7 }]);
    assert.equal(e.r.code, 1, e.what);
    assert.match(e.r.stderr, /^gazctl: [^\n]*editor[^\n]*\b7\b[^\n]*\n$/, e.what);
    assert.equal(await listJson(p), beforeJson);
  });
});
