// NO_COLOR (issue #29): any non-empty value means no colour escape codes on any path: the `color`
// log format, the progress bar, oclif's help. The real binary runs in a pseudo-terminal
// (util-linux `script`), where colour is otherwise on, so each check can fail.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, it } from 'node:test';

import { Logger } from '../../../src/cli/log.js';
import { Progress } from '../../../src/cli/progress.js';
import { GAZCTL_BIN, gazctlEnv } from '../../helpers/cli.js';

const ESC = '\x1b[';
/** SGR (colour and style) sequences only: cursor movement and erasing are not colour. */
const SGR = /\x1b\[[\d;]*m/;

const hasScript = spawnSync('script', ['--version'], { encoding: 'utf8' }).status === 0;

/** `gazctl <args>` in a pseudo-terminal; its output (stdout and stderr together, as a terminal shows them). */
function inPty(args: string[], env: Record<string, string | undefined>): string {
  const e = gazctlEnv();
  delete e.NO_COLOR;
  delete e.FORCE_COLOR;
  // Colour detection (supports-color, used by oclif's help) turns colour off under a CI variable
  // or a dumb terminal; this test is about NO_COLOR alone, so it runs as an interactive terminal.
  delete e.CI;
  delete e.CONTINUOUS_INTEGRATION;
  e.TERM = 'xterm-256color';
  for (const [k, v] of Object.entries(env)) {
    if (v === undefined) delete e[k];
    else e[k] = v;
  }
  const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
  const cmd = [process.execPath, GAZCTL_BIN, ...args].map(quote).join(' ');
  const r = spawnSync('script', ['-qec', cmd, '/dev/null'], { env: e, encoding: 'utf8', timeout: 60_000 });
  return r.stdout;
}

function withEnv<T>(vars: Record<string, string | undefined>, fn: () => T): T {
  const saved = Object.fromEntries(Object.keys(vars).map((k) => [k, process.env[k]]));
  for (const [k, v] of Object.entries(vars)) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
  try {
    return fn();
  } finally {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
}

describe('NO_COLOR', () => {
  it('the color log format: coloured tags, none with NO_COLOR; an empty NO_COLOR does not count', () => {
    const lines = (noColor: string | undefined) =>
      withEnv({ NO_COLOR: noColor }, () => {
        const out: string[] = [];
        new Logger('info', 'color', (l) => out.push(l)).warn('careful', { n: 1 });
        return out.join('\n');
      });
    assert.match(lines(undefined), SGR);
    assert.match(lines(''), SGR);
    const plain = lines('1');
    assert.ok(!plain.includes(ESC), JSON.stringify(plain));
    assert.match(plain, /^WARN\[.*\] careful +n=1$/);
    assert.ok(!lines('false').includes(ESC), 'any non-empty value');
  });

  it('the progress bar on a terminal: coloured, not with NO_COLOR', () => {
    const draw = (noColor: string | undefined) =>
      withEnv({ NO_COLOR: noColor }, () => {
        let text = '';
        const stream = { write: (s: string) => ((text += s), true), isTTY: true } as unknown as NodeJS.WriteStream;
        const p = new Progress({ label: 'deleted', total: 2, stream, isTTY: true });
        p.tick(2);
        p.finish();
        return text;
      });
    assert.match(draw(undefined), SGR);
    const plain = draw('1');
    assert.ok(!SGR.test(plain), JSON.stringify(plain));
    assert.match(plain, /\[#{30}\] 2\/2 deleted/);
  });

  it('the real binary in a pseudo-terminal: help and colour logs have escapes, none with NO_COLOR=1', (t) => {
    if (!hasScript) return t.skip('util-linux script(1) is not installed');
    const help = ['journals', 'prune', '--help'];
    assert.match(inPty(help, {}), SGR, 'help is coloured on a terminal');
    const plainHelp = inPty(help, { NO_COLOR: '1' });
    assert.match(plainHelp, /USAGE/);
    assert.ok(!SGR.test(plainHelp), JSON.stringify(plainHelp.slice(0, 300)));

    const logs = ['journals', 'list', '--log.format', 'color', '--log.level', 'debug', '--broker.address', 'http://127.0.0.1:1', '--timeout', '1s'];
    assert.match(inPty(logs, {}), SGR, 'color logs are coloured');
    const plainLogs = inPty(logs, { NO_COLOR: '1' });
    assert.match(plainLogs, /DEBU\[/, plainLogs);
    assert.ok(!SGR.test(plainLogs), JSON.stringify(plainLogs.slice(0, 300)));
  });
});
