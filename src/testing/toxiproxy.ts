// toxiproxy (scripts/install-peers.sh builds its server) between test processes, to cut links
// between them on demand: the net-split tests (docs/net-splits.md).
//
// A link is one toxiproxy proxy: a listener on 127.0.0.1 that forwards every connection to one
// upstream. `cut()` black-holes it in both directions without closing anything: a "latency"
// toxic of an hour on each direction holds every byte (connections stay open, nothing is
// refused, new connections are accepted and then hear nothing), as on a network that drops
// packets. `heal()` removes the toxics; toxiproxy then delivers what it held, in order, as TCP
// would once the network is back. (toxiproxy's "timeout" toxic would drop the bytes instead,
// corrupting any stream that outlives the cut, and closes connections when removed.) A link
// buffers what it holds: once its buffers and the sockets' are full, writers block, as they do
// on a real partition once the TCP window is full.

import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { peerBinary } from './peers.js';
import { freePort } from './ports.js';
import { pollUntil, PollAbort, spawnManaged, type ManagedProcess } from './process.js';

/** How long a cut link holds data: longer than any test runs. */
const HOLD_MS = 3_600_000;

export interface ToxiLink {
  readonly name: string;
  /** `127.0.0.1:<port>` the link listens on. */
  readonly listen: string;
  /** `http://127.0.0.1:<port>`: the endpoint to dial through the link. */
  readonly endpoint: string;
  /** `host:port` connections are forwarded to. */
  readonly upstream: string;
  /** Whether the link is cut now. */
  readonly isCut: boolean;
  /** Black-hole the link both ways (idempotent). */
  cut(): Promise<void>;
  /** Let data through again, delivering what was held (idempotent). */
  heal(): Promise<void>;
}

export interface Toxiproxy {
  readonly api: string;
  readonly process: ManagedProcess;
  /**
   * A new link to `upstream` (`host:port`, or an `http://host:port` endpoint), listening on a
   * free port of `o.host` (default 127.0.0.1; any address of this host, e.g. `Netns.hostAddress`
   * for a link that a network namespace dials).
   */
  link(name: string, upstream: string, o?: { host?: string }): Promise<ToxiLink>;
  /** Heal every link that is cut. */
  healAll(): Promise<void>;
  stop(): Promise<void>;
}

async function call(api: string, method: string, path: string, body?: unknown): Promise<unknown> {
  const res = await fetch(`${api}${path}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(10_000),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`toxiproxy ${method} ${path}: HTTP ${res.status}: ${text.trim()}`);
  return text && (res.headers.get('content-type') ?? '').includes('json') ? JSON.parse(text) : text;
}

class Link implements ToxiLink {
  isCut = false;
  constructor(
    private readonly api: string,
    readonly name: string,
    readonly listen: string,
    readonly upstream: string,
  ) {}
  get endpoint(): string {
    return `http://${this.listen}`;
  }
  async cut(): Promise<void> {
    if (this.isCut) return;
    for (const stream of ['upstream', 'downstream']) {
      await call(this.api, 'POST', `/proxies/${this.name}/toxics`, {
        name: `cut-${stream}`,
        type: 'latency',
        stream,
        toxicity: 1,
        attributes: { latency: HOLD_MS, jitter: 0 },
      });
    }
    this.isCut = true;
  }
  async heal(): Promise<void> {
    if (!this.isCut) return;
    for (const stream of ['upstream', 'downstream']) {
      await call(this.api, 'DELETE', `/proxies/${this.name}/toxics/cut-${stream}`);
    }
    this.isCut = false;
  }
}

/** Start a toxiproxy server (API on a free 127.0.0.1 port), logging into `logDir`. */
export async function startToxiproxy(o: { logDir: string }): Promise<Toxiproxy> {
  await mkdir(o.logDir, { recursive: true });
  const port = await freePort();
  const api = `http://127.0.0.1:${port}`;
  const proc = spawnManaged({
    name: 'toxiproxy',
    command: peerBinary('toxiproxy-server'),
    args: ['-host', '127.0.0.1', '-port', String(port)],
    logFile: join(o.logDir, 'toxiproxy.log'),
    env: { ...process.env, LOG_LEVEL: 'warn' },
  });
  try {
    await pollUntil(
      `toxiproxy at ${api}`,
      async () => {
        if (!proc.running) throw new PollAbort('toxiproxy exited');
        await call(api, 'GET', '/version');
        return true;
      },
      { timeoutMs: 10_000, intervalMs: 50, describe: () => proc.describe() },
    );
  } catch (e) {
    await proc.stop('SIGKILL');
    throw e;
  }
  const links: Link[] = [];
  return {
    api,
    process: proc,
    async link(name: string, upstream: string, lo: { host?: string } = {}): Promise<ToxiLink> {
      const up = upstream.replace(/^https?:\/\//, '');
      // Port 0: toxiproxy binds a free port and answers with the address it listens on.
      const r = (await call(api, 'POST', '/proxies', { name, listen: `${lo.host ?? '127.0.0.1'}:0`, upstream: up, enabled: true })) as { listen: string };
      const l = new Link(api, name, r.listen, up);
      links.push(l);
      return l;
    },
    async healAll(): Promise<void> {
      for (const l of links) await l.heal();
    },
    async stop(): Promise<void> {
      await proc.stop('SIGKILL');
    },
  };
}
