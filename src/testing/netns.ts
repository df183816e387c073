// A network namespace of its own for a test process (e.g. one broker), joined to the host by a
// veth pair with addresses of its own, that a test can cut off from the host at the IP level:
// the net-split tests (docs/net-splits.md). Linux only, and root only (creating namespaces,
// links and firewall rules).
//
// The namespace lives as long as a holder process (`unshare --net sleep`), started first; the
// processes to isolate join it with `wrap` (`nsenter --net=/proc/<holder>/ns/net --`, which
// execs the command: its pid is the command's). The host end of the veth pair has
// `hostAddress`, the namespace end `address`, on a /30 of 198.18.0.0/15 (a range reserved for
// network tests, RFC 2544) picked from this process's pid. A process in the namespace reaches
// only what listens on `hostAddress` (the host's loopback is not its loopback); host processes
// reach it at `address`. Once the holder and every process in the namespace have exited, the
// kernel removes the namespace and with it both ends of the veth pair.
//
// `cut()` drops every IP packet crossing the pair in either direction, except TCP to or from
// the given ports of `hostAddress` (e.g. a link to etcd): iptables DROP rules on the receiving
// side of each end (INPUT of the namespace for what the host sends, INPUT of the host for what
// the namespace sends, limited to the host end's interface). Nothing is refused or reset and no
// sender is told anything: the packets vanish, as on a partitioned network, and TCP retransmits
// them until the cut heals (`heal()` removes the rules) or its own timeouts give up. Dropping on
// the receiving side keeps the senders' kernels out of it (a DROP in OUTPUT makes the sender's
// send fail locally instead). The host's own rules are in a chain of their own, jumped to only
// for the host end's interface, and removed by `stop()` (or at exit).

import { execFile, execFileSync } from 'node:child_process';
import { readlinkSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { pollUntil, PollAbort, registerExitCleanup, spawnManaged, type ManagedProcess } from './process.js';

const run = promisify(execFile);

export interface Netns {
  /** Address of the host end of the veth pair: what the namespace can reach on the host. */
  readonly hostAddress: string;
  /** Address of the namespace end: where host processes reach what listens in the namespace. */
  readonly address: string;
  /** Command prefix that runs a command in the namespace (the command keeps nsenter's pid). */
  readonly wrap: string[];
  /** Whether the namespace is cut off now. */
  readonly isCut: boolean;
  /**
   * Drop every packet between the namespace and the host except TCP to or from `ports` of
   * `hostAddress` (idempotent while cut; a second cut with other ports is refused).
   */
  cut(o?: { except?: number[] }): Promise<void>;
  /** Remove the cut (idempotent). */
  heal(): Promise<void>;
  /** Remove the host's rules and stop the holder (processes still in the namespace keep it). */
  stop(): Promise<void>;
}

/** iptables with the kernel's x_tables back end (the nf_tables one is not in every kernel). */
function iptablesBinary(): string {
  for (const b of ['iptables-legacy', 'iptables']) {
    try {
      execFileSync(b, ['--version'], { stdio: 'ignore' });
      return b;
    } catch {
      // try the next one
    }
  }
  throw new Error('netns: no iptables here (scripts/setup.sh installs it: apt-get install iptables)');
}

async function sh(cmd: string[], what: string): Promise<void> {
  try {
    await run(cmd[0]!, cmd.slice(1), { timeout: 20_000 });
  } catch (e) {
    const err = e as Error & { stderr?: string };
    throw new Error(`netns: ${what}: ${cmd.join(' ')}: ${(err.stderr ?? err.message).trim()}`);
  }
}

let created = 0;

/** A new network namespace joined to the host by a veth pair (root only). */
export async function startNetns(o: { logDir: string }): Promise<Netns> {
  if (process.getuid?.() !== 0) throw new Error('netns: needs root (network namespaces, veth pairs, iptables)');
  const ipt = iptablesBinary();
  const holder: ManagedProcess = spawnManaged({
    name: 'netns holder',
    command: 'unshare',
    args: ['--net', 'sleep', 'infinity'],
    logFile: join(o.logDir, 'netns-holder.log'),
  });
  const own = readlinkSync('/proc/self/ns/net');
  const nsPath = `/proc/${holder.pid}/ns/net`;
  const wrap = ['nsenter', `--net=${nsPath}`, '--'];
  let unregister = (): void => {};
  let removeNow = (): void => {};
  const removeHostRules = (chain: string, hostIf: string): void => {
    try {
      execFileSync(ipt, ['-w', '-D', 'INPUT', '-i', hostIf, '-j', chain], { stdio: 'ignore' });
    } catch {
      // not there
    }
    try {
      execFileSync(ipt, ['-w', '-F', chain], { stdio: 'ignore' });
      execFileSync(ipt, ['-w', '-X', chain], { stdio: 'ignore' });
    } catch {
      // not there
    }
  };
  try {
    await pollUntil(
      'the namespace holder to unshare',
      async () => {
        if (!holder.running) throw new PollAbort('unshare exited');
        try {
          return readlinkSync(nsPath) !== own;
        } catch {
          return false;
        }
      },
      { timeoutMs: 10_000, intervalMs: 20, describe: () => holder.describe() },
    );
    // A /30 of 198.18.0.0/15 (32768 of them) from the pid; the next one if taken (a link name
    // or an address already on this host).
    for (let k = 0; k < 64; k++) {
      const s = (process.pid * 4 + created + k) % 32768;
      const base = (198 << 24) | (18 << 16);
      const net = base + s * 4;
      const addr = (n: number) => [(n >>> 24) & 255, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.');
      const { stdout } = await run('ip', ['-o', 'addr', 'show', 'to', `${addr(net)}/30`]);
      if (stdout.trim() !== '') continue;
      const hostIf = `gzns${s}h`;
      const nsIf = `gzns${s}n`;
      try {
        await run('ip', ['link', 'add', hostIf, 'type', 'veth', 'peer', 'name', nsIf]);
      } catch {
        continue; // taken by a concurrent run
      }
      created++;
      const hostAddress = addr(net + 1);
      const address = addr(net + 2);
      const chain = `gzns${s}`;
      removeNow = () => removeHostRules(chain, hostIf);
      unregister = registerExitCleanup(removeNow);
      await sh(['ip', 'link', 'set', nsIf, 'netns', String(holder.pid)], 'move the veth end');
      await sh(['ip', 'addr', 'add', `${hostAddress}/30`, 'dev', hostIf], 'host address');
      await sh(['ip', 'link', 'set', hostIf, 'up'], 'host end up');
      await sh([...wrap, 'ip', 'link', 'set', 'lo', 'up'], 'loopback up');
      await sh([...wrap, 'ip', 'addr', 'add', `${address}/30`, 'dev', nsIf], 'namespace address');
      await sh([...wrap, 'ip', 'link', 'set', nsIf, 'up'], 'namespace end up');
      // Empty chains, jumped to for packets received over the pair: a cut fills them.
      await sh([ipt, '-w', '-N', chain], 'host chain');
      await sh([ipt, '-w', '-I', 'INPUT', '-i', hostIf, '-j', chain], 'host jump');
      await sh([...wrap, ipt, '-w', '-N', 'GZCUT'], 'namespace chain');
      await sh([...wrap, ipt, '-w', '-A', 'INPUT', '-i', nsIf, '-j', 'GZCUT'], 'namespace jump');

      let cutPorts: number[] | undefined;
      const fill = async (ports: number[]) => {
        // Host side: what the namespace sends; namespace side: what the host sends.
        for (const p of ports) {
          await sh([ipt, '-w', '-A', chain, '-p', 'tcp', '-d', hostAddress, '--dport', String(p), '-j', 'RETURN'], 'host exception');
          await sh([...wrap, ipt, '-w', '-A', 'GZCUT', '-p', 'tcp', '-s', hostAddress, '--sport', String(p), '-j', 'RETURN'], 'namespace exception');
        }
        await sh([ipt, '-w', '-A', chain, '-j', 'DROP'], 'host drop');
        await sh([...wrap, ipt, '-w', '-A', 'GZCUT', '-j', 'DROP'], 'namespace drop');
      };
      const ns: Netns = {
        hostAddress,
        address,
        wrap,
        get isCut() {
          return cutPorts !== undefined;
        },
        async cut(c: { except?: number[] } = {}) {
          const ports = [...(c.except ?? [])].sort((a, b) => a - b);
          if (cutPorts) {
            if (cutPorts.join() !== ports.join()) throw new Error(`netns: already cut, except ports ${cutPorts.join(', ') || 'none'}`);
            return;
          }
          cutPorts = ports;
          await fill(ports);
        },
        async heal() {
          if (!cutPorts) return;
          await sh([ipt, '-w', '-F', chain], 'host heal');
          await sh([...wrap, ipt, '-w', '-F', 'GZCUT'], 'namespace heal');
          cutPorts = undefined;
        },
        async stop() {
          removeHostRules(chain, hostIf);
          unregister();
          await holder.stop('SIGKILL');
        },
      };
      return ns;
    }
    throw new Error('netns: no free 198.18.0.0/15 slot or veth name');
  } catch (e) {
    removeNow();
    unregister();
    await holder.stop('SIGKILL');
    throw e;
  }
}

/**
 * What a TCP connection attempt to `host:port` meets within `timeoutMs`: `connected`, `refused`
 * (or another error), or `silent` (no answer at all: the packets are dropped). Run under `wrap`
 * (e.g. `Netns.wrap`) to try from inside a namespace.
 */
export async function probeTcp(host: string, port: number, o: { timeoutMs?: number; wrap?: string[] } = {}): Promise<'connected' | 'refused' | 'silent'> {
  const ms = o.timeoutMs ?? 2000;
  const script =
    `const s=require('net').connect(${port},${JSON.stringify(host)});` +
    `s.on('connect',()=>{console.log('connected');process.exit(0)});` +
    `s.on('error',()=>{console.log('refused');process.exit(0)});` +
    `setTimeout(()=>{console.log('silent');process.exit(0)},${ms})`;
  const cmd = [...(o.wrap ?? []), process.execPath, '-e', script];
  const { stdout } = await run(cmd[0]!, cmd.slice(1), { timeout: ms + 10_000 });
  const r = stdout.trim();
  if (r !== 'connected' && r !== 'refused' && r !== 'silent') throw new Error(`probeTcp: unexpected output ${JSON.stringify(r)}`);
  return r;
}
