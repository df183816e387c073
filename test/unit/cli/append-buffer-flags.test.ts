// journals append's buffering flags: bad values end in one line and the right exit code before any
// input is read or a broker is dialled (the broker address is a closed port).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { runGazctl } from '../../helpers/cli.js';
import { parseSizeText } from '../../../src/cli/options.js';

const base = ['journals', 'append', '-l', 'app=x', '--broker.address', 'http://127.0.0.1:1', '--timeout', '1s'];

async function expectOneLine(extra: string[], code: number, line: string): Promise<void> {
  const r = await runGazctl([...base, ...extra], { input: 'x\n' });
  assert.equal(r.stderr, `gazctl: ${line}\n`, extra.join(' '));
  assert.equal(r.code, code, extra.join(' '));
}

test('--buffer-dir must be a writable directory, and only with record framing', async () => {
  await expectOneLine(['--framing', 'lines', '--buffer-dir', '/nonexistent/abuf'], 1, '--buffer-dir /nonexistent/abuf: no such directory');
  await expectOneLine(['--framing', 'lines', '--buffer-dir', '/etc/hostname'], 1, '--buffer-dir /etc/hostname: not a directory');
  await expectOneLine(['--buffer-dir', '/tmp'], 2, '--buffer-dir buffers records: use it with --framing lines or fixed');
});

test('--buffer-disk-limit takes sizes with binary units', async () => {
  assert.equal(parseSizeText('1048576'), 1048576);
  assert.equal(parseSizeText('512KiB'), 512 * 1024);
  assert.equal(parseSizeText('64M'), 64 * 1024 ** 2);
  assert.equal(parseSizeText('1.5GiB'), 1.5 * 1024 ** 3);
  assert.equal(parseSizeText('20gb'), 20 * 1024 ** 3);
  await expectOneLine(['--framing', 'lines', '--buffer-dir', '/tmp', '--buffer-disk-limit', '12QB'], 2, '--buffer-disk-limit: expected a size such as 1048576, 512KiB, 64MiB or 1GiB, got "12QB"');
});

test('--metrics-addr is HOST:PORT, and a port in use is one clear line', async () => {
  await expectOneLine(['--framing', 'lines', '--metrics-addr', 'nope'], 2, '--metrics-addr: expected HOST:PORT (or :PORT), got "nope"');
  await expectOneLine(['--framing', 'lines', '--metrics-addr', '127.0.0.1:99999'], 2, '--metrics-addr: expected HOST:PORT (or :PORT), got "127.0.0.1:99999"');
  const busy = createServer();
  await new Promise<void>((r) => busy.listen(0, '127.0.0.1', r));
  try {
    const port = (busy.address() as { port: number }).port;
    await expectOneLine(['--framing', 'lines', '--metrics-addr', `127.0.0.1:${port}`], 1, `cannot serve metrics at 127.0.0.1:${port}: listen EADDRINUSE: address already in use 127.0.0.1:${port}`);
  } finally {
    busy.close();
  }
});
