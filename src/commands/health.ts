import { Flags } from '@oclif/core';
import { setTimeout as sleep } from 'node:timers/promises';
import { GazctlCommand, shardsBaseFlags, shardsOptions, journalsOptions, UsageError, type ServiceOptions } from '../cli/base.js';
import { selector } from '../cli/flags.js';
import { checkHealth, problemKey, renderJson, renderText, type HealthProbes, type HealthReport } from '../cli/health.js';
import {
  booleanOption,
  choiceOption,
  durationOption,
  listOption,
  oclifFlags,
  optionalStringOption,
  options,
  resolveOptions,
  OptionValueError,
  type OptionSpec,
  type OptionSet,
  type Sources,
} from '../cli/options.js';
import { findIniFile, loadIni } from '../lib/config/ini.js';
import { JournalClient } from '../lib/client/journal-client.js';
import { ShardClient } from '../lib/client/shard-client.js';
import { etcdMemberStatus } from '../lib/keyspace/status.js';
import { EtcdTlsError, loadEtcdTls, type EtcdTls } from '../lib/keyspace/tls.js';
import { formatGoDuration } from '../lib/protocol/duration.js';
import { GazctlError } from '../lib/protocol/errors.js';
import { Status } from '../lib/protocol/gen/broker/protocol.js';
import { parseEndpoint } from '../lib/protocol/route.js';
import { parseLabelSelector } from '../lib/protocol/selector.js';

const OPTIONS = options({
  selector: selector(false, { field: 'Selector' }, 'journals and shards'),
  format: choiceOption({ char: 'o', choices: ['text', 'json'], default: 'text', showDefault: true, description: 'Output format: text, json.', ini: { field: 'Format' } }),
  verbose: booleanOption({ char: 'v', description: 'Also list the checks that passed and those not made.', ini: { field: 'Verbose' } }),
  watch: booleanOption({ description: 'Check again every --interval and print the report whenever the set of problems changes, until interrupted (Ctrl-C exits 0).', ini: null }),
  interval: durationOption({ description: 'Time between checks with --watch or --exit-when-healthy (Go duration).', default: '5s', showDefault: true, ini: { field: 'Interval' } }),
  'exit-when-healthy': booleanOption({ description: 'Check again every --interval until the cluster is healthy, then exit 0; exit 1 when --timeout (default then 5m) passes first.', ini: null }),
});

/** etcd endpoints: repeatable, or a comma-separated list; ETCD_ADDRESS; gazctl.ini [etcd] Address. */
const ETCD_OPTIONS = options({
  'etcd.address': {
    ...listOption({ description: 'etcd client endpoint to check (repeatable, or comma separated); not checked when absent.', env: 'ETCD_ADDRESS', helpGroup: 'ETCD', ini: { field: 'Address' } }),
    endpoint: true,
    parse: (text: string) => {
      const eps = text.split(',').map((s) => s.trim()).filter((s) => s !== '');
      for (const ep of eps) {
        try {
          parseEndpoint(ep);
        } catch (e) {
          throw new OptionValueError((e as Error).message);
        }
      }
      return eps;
    },
  } as OptionSpec<string[]>,
  // As the daemons' --etcd.* options (and etcdctl's): used for https:// endpoints.
  'etcd.cert-file': optionalStringOption({ description: 'Client TLS certificate presented to etcd (one that runs with --client-cert-auth).', env: 'ETCD_CERT_FILE', helpGroup: 'ETCD', ini: { field: 'CertFile' } }),
  'etcd.cert-key-file': optionalStringOption({ description: 'Private key of --etcd.cert-file.', env: 'ETCD_CERT_KEY_FILE', helpGroup: 'ETCD', ini: { field: 'CertKeyFile' } }),
  'etcd.trusted-ca-file': optionalStringOption({ description: "CA certificate used to verify etcd's server certificate (default: the system roots).", env: 'ETCD_TRUSTED_CA_FILE', helpGroup: 'ETCD', ini: { field: 'TrustedCAFile' } }),
});

/** --timeout when it is not set: one round's deadline, or the whole wait of --exit-when-healthy. */
const DEFAULT_TIMEOUT_MS = 10_000;
const DEFAULT_WAIT_TIMEOUT_MS = 5 * 60_000;
/** With --exit-when-healthy, each round's own deadline (within the overall one). */
const WAIT_ROUND_MS = 10_000;
/** What the probes' deadline leaves for printing the report before --timeout. */
const REPORT_MARGIN_MS = 250;

/** The most of the process's start-up counted against --timeout (a cold start takes ~0.3 s). */
const STARTUP_CREDIT_MS = 500;

/** A selector no journal or shard matches: a List of it proves only that the service answers. */
const PROBE_SELECTOR = parseLabelSelector('name=gazctl-health-probe,id=gazctl-health-probe');

export default class Health extends GazctlCommand {
  static override summary = 'Check that the brokers, consumers, etcd and fragment stores are healthy.';
  static override description = `One command for an operator or an alerting job: checks the cluster and exits 0 when it is healthy, 1 when it is not (or health cannot be determined), 2 on a usage error.

Checked, each problem one line naming the component:
  brokers    the broker at --broker.address answers a List of the selected journals, and so does every broker in their routes; journals without a primary, or with fewer brokers than their replication (suspended journals excepted), are counted and a few named;
  stores     the fragment stores of those journals (each once) are checked by the broker, as "journals store-health" does;
  consumers  when a consumer address is configured (--consumer.address, CONSUMER_ADDRESS, gazctl.ini [shards]), it answers a List of the selected shards, and so does every consumer in their routes; FAILED shards (with their errors), enabled shards without a serving primary (none assigned, or one still recovering), and serving primaries with unread input that read no further record before the deadline are problems;
  etcd       with --etcd.address (or ETCD_ADDRESS, gazctl.ini [etcd] Address), each member answers its status, and knows a leader; without it etcd is not checked, which is said (-v, -o json) and is no problem.

The output lists the problems first, then one summary line ("healthy: ..." or "unhealthy: N problems"). -v adds the checks that passed; -o json prints one document with every check.

--timeout is the deadline of the whole check (default 10s): whatever has not answered by then (a broker that accepts connections and never answers, say) is a problem, and the command never runs longer. With --watch it is the deadline of each round; with --exit-when-healthy it is how long to wait for health (default 5m), each round taking at most 10s of it.

See docs/health.md for alerting examples.`;
  static override examples = [
    { description: 'Check the brokers and stores (and etcd)', command: '<%= config.bin %> health --broker.address http://broker:8080 --etcd.address http://etcd:2379' },
    { description: 'Also the consumers of an application, every check listed', command: '<%= config.bin %> health --consumer.address http://consumer:8080 -l app=word-count -v' },
    { description: 'An alerting job: exit status and one JSON document', command: '<%= config.bin %> health -o json --timeout 20s > health.json || alert "gazette unhealthy"' },
    { description: 'Print whenever the set of problems changes', command: '<%= config.bin %> health --watch --interval 10s' },
    { description: 'Wait (up to 2 minutes) for the cluster to become healthy after a deploy', command: '<%= config.bin %> health --exit-when-healthy --timeout 2m' },
  ];
  static override group = 'journals' as const;
  static override iniSection = 'health';
  static override optionSet(): OptionSet {
    return OPTIONS;
  }
  /** The [etcd] section's options (print-config). */
  static etcdOptionSet(): OptionSet {
    return ETCD_OPTIONS;
  }
  static override baseFlags = shardsBaseFlags;
  static override flags = {
    ...oclifFlags(OPTIONS),
    ...oclifFlags(ETCD_OPTIONS),
    // The group's --timeout, described as this command uses it (its default differs too).
    timeout: Flags.string({
      description: 'Deadline of the whole check (Go duration; default 10s); with --watch, of each round; with --exit-when-healthy, of the wait (default 5m).',
      env: 'GAZCTL_TIMEOUT',
    }),
  };

  async run(): Promise<void> {
    const flags = await this.resolve(OPTIONS);
    // The broker resolves as every journals command does (done by resolve), the consumer as
    // `shards list` does, and etcd from its own section; --timeout has this command's defaults.
    const { flags: argv, raw } = await this.parse(Health);
    const src: Sources = {
      argv: argv as Record<string, unknown>,
      given: new Set(raw.flatMap((r) => (r.type === 'flag' ? [r.flag] : []))),
      ini: loadIni(findIniFile()),
      env: process.env,
      group: 'shards',
      context: this.context,
    };
    const consumerSet = options({
      ...Object.fromEntries(Object.entries(shardsOptions).filter(([k]) => k.startsWith('consumer.'))),
      // No default: an unconfigured consumer address means consumers are not checked.
      'consumer.address': { ...shardsOptions['consumer.address'], fallback: { value: undefined } } as OptionSpec<string | undefined>,
    });
    const consumerValues = resolveOptions(consumerSet, src) as Record<string, unknown>;
    const etcdValues = resolveOptions(ETCD_OPTIONS, { ...src, group: 'journals', section: 'etcd' });
    const etcd = etcdValues['etcd.address'];
    let etcdTls: EtcdTls | undefined;
    try {
      etcdTls = loadEtcdTls({ certFile: etcdValues['etcd.cert-file'], certKeyFile: etcdValues['etcd.cert-key-file'], trustedCAFile: etcdValues['etcd.trusted-ca-file'] });
    } catch (e) {
      if (e instanceof EtcdTlsError) throw new UsageError(`--etcd.${e.option}: ${e.message}`);
      throw e;
    }
    const timeoutSpec = { ...journalsOptions.timeout, fallback: { value: undefined } } as OptionSpec<bigint | undefined>;
    const timeoutNs = resolveOptions({ timeout: timeoutSpec }, { ...src, group: 'journals' }).timeout;

    if (flags.watch && flags['exit-when-healthy']) throw new UsageError('--watch and --exit-when-healthy do not go together');
    if (timeoutNs === 0n) throw new UsageError('--timeout must be more than 0 (health always has a deadline)');
    if (flags.interval === 0n) throw new UsageError('--interval must be more than 0');
    const timeoutMs = timeoutNs !== undefined ? Number(timeoutNs / 1_000_000n) : flags['exit-when-healthy'] ? DEFAULT_WAIT_TIMEOUT_MS : DEFAULT_TIMEOUT_MS;
    const intervalMs = Number(flags.interval / 1_000_000n);

    const broker = this.serviceOptions('broker');
    const consumerAddress = consumerValues['consumer.address'] as string | undefined;
    const consumer: ServiceOptions | undefined =
      consumerAddress === undefined
        ? undefined
        : {
            ...broker,
            address: consumerAddress,
            certFile: opt(consumerValues['consumer.cert-file']),
            certKeyFile: opt(consumerValues['consumer.cert-key-file']),
            trustedCAFile: opt(consumerValues['consumer.trusted-ca-file']),
            authKeys: opt(consumerValues['consumer.auth-keys']),
            authToken: opt(consumerValues['consumer.auth-token']),
            cacheSize: 0,
          };
    const probes = new ClientProbes(broker, consumer, etcd, flags.selector, etcdTls);

    const ac = new AbortController();
    const stop = () => ac.abort();
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
    try {
      const write = (r: HealthReport, compact: boolean) =>
        process.stdout.write(flags.format === 'json' ? renderJson(r, compact) : renderText(r, flags.verbose));
      if (flags.watch) {
        let last: string | undefined;
        while (!ac.signal.aborted) {
          const r = await checkHealth(probes, Date.now() + Math.max(1, timeoutMs - REPORT_MARGIN_MS), ac.signal);
          if (ac.signal.aborted) break;
          const key = problemKey(r);
          if (key !== last) {
            last = key;
            if (flags.format === 'text') process.stdout.write(`--- ${new Date().toISOString()}\n`);
            write(r, true);
          }
          await sleep(intervalMs, undefined, { signal: ac.signal }).catch(() => undefined);
        }
        return; // Ctrl-C: 0
      }
      // --timeout counts from the start of the process (Node's start-up included, up to
      // STARTUP_CREDIT_MS), so a job that wraps gazctl in `timeout 10s` with --timeout 10s gets
      // the report, not the kill.
      const started = Date.now() - Math.min(STARTUP_CREDIT_MS, process.uptime() * 1000);
      if (flags['exit-when-healthy']) {
        const end = started + timeoutMs - REPORT_MARGIN_MS;
        let last: string | undefined;
        for (;;) {
          const r = await checkHealth(probes, Math.min(end, Date.now() + WAIT_ROUND_MS), ac.signal);
          if (ac.signal.aborted) throw new GazctlError('interrupted before the cluster was healthy');
          const key = problemKey(r);
          if (r.healthy || key !== last) {
            last = key;
            write(r, true);
          }
          if (r.healthy) return;
          if (Date.now() + intervalMs >= end) {
            throw new GazctlError(`still unhealthy after ${formatGoDuration(BigInt(timeoutMs) * 1_000_000n)} (--timeout)`);
          }
          await sleep(intervalMs, undefined, { signal: ac.signal }).catch(() => undefined);
        }
      }
      const r = await checkHealth(probes, Math.max(Date.now() + 1, started + timeoutMs - REPORT_MARGIN_MS), ac.signal);
      write(r, false);
      if (!r.healthy) process.exitCode = 1;
    } finally {
      process.removeListener('SIGINT', stop);
      process.removeListener('SIGTERM', stop);
      probes.close();
    }
  }
}

const opt = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);

/** The probes on real clients: one client per service address, dialled once and kept for --watch. */
class ClientProbes implements HealthProbes {
  readonly brokerAddress: string;
  readonly consumerAddress: string | undefined;
  private readonly clients = new Map<string, JournalClient | ShardClient>();

  constructor(
    private readonly broker: ServiceOptions,
    private readonly consumer: ServiceOptions | undefined,
    readonly etcdEndpoints: readonly string[],
    private readonly selector: ReturnType<typeof parseLabelSelector>,
    private readonly etcdTls?: EtcdTls,
  ) {
    this.brokerAddress = broker.address;
    this.consumerAddress = consumer?.address;
  }

  private journals(address: string): JournalClient {
    const key = `broker ${address}`;
    let c = this.clients.get(key);
    if (!c) this.clients.set(key, (c = new JournalClient({ ...this.broker, address, cacheSize: 0 })));
    return c as JournalClient;
  }

  private shards(address: string): ShardClient {
    const key = `consumer ${address}`;
    let c = this.clients.get(key);
    if (!c) this.clients.set(key, (c = new ShardClient({ ...this.consumer!, address, cacheSize: 0 })));
    return c as ShardClient;
  }

  /** A health check retries a refused connection once, then reports it: the next round looks again. */
  private call(signal: AbortSignal) {
    return { signal, retry: { maxAttempts: 2 } };
  }

  async listJournals(signal: AbortSignal) {
    return (await this.journals(this.broker.address).list(this.selector, this.call(signal))).journals;
  }

  async pingBroker(endpoint: string, signal: AbortSignal) {
    await this.journals(endpoint).list(PROBE_SELECTOR, this.call(signal));
  }

  async listShards(signal: AbortSignal) {
    return (await this.shards(this.consumer!.address).list(this.selector, this.call(signal))).shards;
  }

  async pingConsumer(endpoint: string, signal: AbortSignal) {
    await this.shards(endpoint).list(PROBE_SELECTOR, this.call(signal));
  }

  etcdStatus(endpoint: string, signal: AbortSignal) {
    return etcdMemberStatus(endpoint, this.broker.timeoutMs > 0 ? this.broker.timeoutMs : DEFAULT_TIMEOUT_MS, signal, this.etcdTls);
  }

  async statShard(id: string, readThrough: Record<string, bigint>, signal: AbortSignal) {
    // No retries: a shard that does not read through in time is the finding.
    return (await this.shards(this.consumer!.address).stat(id, { readThrough, signal, retry: { maxAttempts: 1 } })).read_through;
  }

  async writeHead(journal: string, signal: AbortSignal) {
    const r = this.journals(this.broker.address).read({ journal, offset: 0n, metadata_only: true, block: false }, { directReads: false, signal });
    for await (const _ of r) {
      // metadata only: the write head is on the reader once the response arrived
    }
    return r.writeHead;
  }

  async storeHealth(store: string, signal: AbortSignal) {
    const res = await this.journals(this.broker.address).fragmentStoreHealth(store, undefined, this.call(signal));
    return res.status === Status.OK ? undefined : res.store_health_error || 'no reason given';
  }

  close(): void {
    for (const c of this.clients.values()) c.close();
  }
}
