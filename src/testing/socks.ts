// A real SOCKS5 proxy for tests of --socks-server: `socks5-server`, our small Go program on
// github.com/armon/go-socks5 (scripts/peers/socks5-server, built by scripts/install-peers.sh).
// It logs every CONNECT it carries, so a test can tell which targets went through it, and can
// resolve made-up host names (`hosts`) that nothing else resolves. `startRelay` runs the same
// binary as a plain byte relay, e.g. inside a network namespace whose only way out is the
// proxy's Unix socket.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { peerBinary } from './peers.js';
import { PollAbort, pollUntil, registerExitCleanup, spawnManaged, type ManagedProcess } from './process.js';

export interface StartSocksOptions {
  /** Addresses to serve SOCKS5 on: `127.0.0.1:0` (default), `unix:<path>`. */
  listen?: string[];
  /** Names resolved by the proxy (and nowhere else), name → IP. */
  hosts?: Record<string, string>;
  /** Resolve only `hosts` (default false: also the system's names). */
  onlyHosts?: boolean;
  /** Command prefix to run it under (e.g. `['nsenter', '--net=/proc/<pid>/ns/net', '--']`). */
  wrap?: string[];
}

export interface SocksProcess {
  /** The bound addresses, in the order of `listen`: `127.0.0.1:<port>` or `unix:<path>`. */
  readonly addresses: string[];
  readonly process: ManagedProcess;
  readonly logFile: string;
  /** Targets of the CONNECTs carried so far: `<name or -> <ip:port>`, oldest first. */
  connects(): string[];
  /** SIGKILL, at once (a crash, as far as its clients can tell). */
  kill(): Promise<void>;
  stop(): Promise<void>;
}

let seq = 0;

function spawnPeer(name: string, args: string[], wrap: string[] | undefined): { proc: ManagedProcess; logFile: string; dir: string; cleanup: () => void } {
  const dir = mkdtempSync(join(tmpdir(), `gazctl-${name}-`));
  const unregister = registerExitCleanup(() => rmSync(dir, { recursive: true, force: true }));
  const logFile = join(dir, `${name}.log`);
  const bin = peerBinary('socks5-server');
  const [command, ...pre] = wrap && wrap.length > 0 ? [...wrap, bin] : [bin];
  const proc = spawnManaged({ name: `${name} ${++seq}`, command: command!, args: [...pre, ...args], logFile });
  return {
    proc,
    logFile,
    dir,
    cleanup: () => {
      rmSync(dir, { recursive: true, force: true });
      unregister();
    },
  };
}

/** The bound addresses the program prints (one per line of the log, before anything else). */
async function boundAddresses(proc: ManagedProcess, logFile: string, n: number): Promise<string[]> {
  return pollUntil(
    `${proc.name} to listen`,
    async () => {
      if (!proc.running) throw new PollAbort(`${proc.name} exited`);
      const lines = readFileSync(logFile, 'utf8').split('\n');
      const addrs = lines.filter((l) => /^(unix:\S+|\S+:\d+)$/.test(l));
      return addrs.length >= n ? addrs.slice(0, n) : false;
    },
    { timeoutMs: 10_000, intervalMs: 20, describe: () => proc.describe() },
  );
}

/** Starts a SOCKS5 proxy; resolves once it listens on every address. */
export async function startSocksServer(o: StartSocksOptions = {}): Promise<SocksProcess> {
  const listen = o.listen ?? ['127.0.0.1:0'];
  const args = [...listen.flatMap((l) => ['-listen', l]), ...Object.entries(o.hosts ?? {}).flatMap(([n, ip]) => ['-host', `${n}=${ip}`]), ...(o.onlyHosts ? ['-only-hosts'] : [])];
  const { proc, logFile, cleanup } = spawnPeer('socks5-server', args, o.wrap);
  try {
    const addresses = await boundAddresses(proc, logFile, listen.length);
    return {
      addresses,
      process: proc,
      logFile,
      connects: () =>
        readFileSync(logFile, 'utf8')
          .split('\n')
          .flatMap((l) => {
            const m = / CONNECT (\S+ \S+)$/.exec(l);
            return m ? [m[1]!] : [];
          }),
      kill: async () => {
        await proc.stop('SIGKILL');
      },
      stop: async () => {
        await proc.stop('SIGTERM', 5000);
        cleanup();
      },
    };
  } catch (e) {
    await proc.stop('SIGKILL');
    cleanup();
    throw e;
  }
}

export interface RelayProcess {
  readonly process: ManagedProcess;
  /** The bound address of each relay, in the order given. */
  readonly addresses: string[];
  stop(): Promise<void>;
}

/** Relays TCP connections: each `[listen, dial]` (addresses as for startSocksServer). */
export async function startRelay(forwards: [string, string][], wrap?: string[]): Promise<RelayProcess> {
  const { proc, logFile, cleanup } = spawnPeer('relay', forwards.flatMap(([l, d]) => ['-forward', `${l}=${d}`]), wrap);
  try {
    const addresses = await boundAddresses(proc, logFile, forwards.length);
    return {
      process: proc,
      addresses,
      stop: async () => {
        await proc.stop('SIGTERM', 5000);
        cleanup();
      },
    };
  } catch (e) {
    await proc.stop('SIGKILL');
    cleanup();
    throw e;
  }
}
