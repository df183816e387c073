// Base classes for gazctl commands: the shared `journals` / `shards` option groups, their
// resolution with upstream's precedence (command line > gazctl.ini > environment > default, a
// context in effect ranking between the command line and gazctl.ini: src/cli/contexts.ts),
// logging, and one-line error reporting with trustworthy exit codes (src/cli/exit.ts).
import { Command, Flags } from '@oclif/core';
import { activeContext, type ActiveContext } from './contexts.js';
import { BrokerStatusError, TransportError } from '../lib/protocol/errors.js';
import { Status } from '../lib/protocol/gen/broker/protocol.js';
import { findIniFile, loadIni } from '../lib/config/ini.js';
import { formatGoDuration } from '../lib/protocol/duration.js';
import { JournalClient } from '../lib/client/journal-client.js';
import { ShardClient } from '../lib/client/shard-client.js';
import type { CallDefaults } from '../lib/client/call.js';
import { isUnavailable } from '../lib/client/retry.js';
import { cleanGrpcDetails } from '../lib/client/rpc.js';
import { formatSocksServer, latestSocksFailure, setSocksServer, socksServer } from '../lib/socks.js';
import { Logger, LOG_FORMATS, LOG_LEVELS } from './log.js';
import { installFastIsIPv6 } from './fast-ipv6.js';
import { EXIT, UsageError, exitCodeFor } from './exit.js';
import {
  choiceOption,
  durationOption,
  endpointOption,
  intOption,
  oclifFlags,
  optionalStringOption,
  options,
  parseDurationText,
  OptionValueError,
  resolveOptions,
  resolveWithOrigin,
  socksServerOption,
  stringOption,
  type OptionOrigin,
  type OptionSet,
  type OptionValues,
} from './options.js';

installFastIsIPv6();

export { EXIT, UsageError };

/**
 * Default service addresses: the Kubernetes Service names of upstream's deployment manifests
 * (`gazette` for brokers, `consumer` for a consumer group, both on port 8080), so that gazctl
 * run in a pod of the cluster's namespace needs no configuration. A Service name resolves
 * through cluster DNS in any namespace (`gazette.<ns>.svc`) and for ExternalName Services,
 * where the `*_SERVICE_HOST` variables Kubernetes injects do not exist. Upstream defaults to
 * http://localhost:8080 (docs/divergences.md D79). Where the name does not resolve, the error
 * says so at once and names the flag, the variable and `gazctl print-config`.
 */
export const DEFAULT_ADDRESSES = { broker: 'http://gazette:8080', consumer: 'http://consumer:8080' } as const;

function serviceOptions<P extends 'broker' | 'consumer'>(prefix: P, title: 'Broker' | 'Consumer') {
  const up = prefix.toUpperCase();
  const helpGroup = title.toUpperCase();
  const ini = (field: string) => ({ field, section: title });
  return {
    [`${prefix}.address`]: endpointOption({ description: `${title} service endpoint (http://, https:// or unix://); default ${DEFAULT_ADDRESSES[prefix]}, the Kubernetes Service.`, helpGroup, env: `${up}_ADDRESS`, ini: ini('Address'), default: DEFAULT_ADDRESSES[prefix] }),
    [`${prefix}.cert-file`]: optionalStringOption({ description: `Client TLS certificate file.`, helpGroup, env: `${up}_CERT_FILE`, ini: ini('CertFile') }),
    [`${prefix}.cert-key-file`]: optionalStringOption({ description: `Client TLS private key file.`, helpGroup, env: `${up}_CERT_KEY_FILE`, ini: ini('CertKeyFile') }),
    [`${prefix}.trusted-ca-file`]: optionalStringOption({ description: `CA certificate used to verify the server.`, helpGroup, env: `${up}_TRUSTED_CA_FILE`, ini: ini('TrustedCAFile') }),
    [`${prefix}.auth-keys`]: optionalStringOption({ description: `Whitespace or comma separated base64 keys; the first signs request tokens.`, helpGroup, env: `${up}_AUTH_KEYS`, ini: ini('AuthKeys') }),
    [`${prefix}.auth-token`]: optionalStringOption({ description: `Static bearer token, used when no auth keys are set.`, helpGroup, env: `${up}_AUTH_TOKEN`, ini: ini('AuthToken') }),
    [`${prefix}.cache.size`]: intOption({ description: `Route cache entries; > 0 dispatches straight to route members.`, helpGroup, env: `${up}_CACHE_SIZE`, ini: ini('Size'), default: 0 }),
    [`${prefix}.cache.ttl`]: durationOption({ description: `Route cache entry lifetime (Go duration).`, helpGroup, env: `${up}_CACHE_TTL`, ini: ini('TTL'), default: '1m' }),
  } as ServiceOptionSet<P>;
}

type ServiceOptionSet<P extends string> = {
  [K in `${P}.address` | `${P}.cert-file` | `${P}.cert-key-file` | `${P}.trusted-ca-file` | `${P}.auth-keys` | `${P}.auth-token`]: K extends `${P}.address`
    ? ReturnType<typeof endpointOption>
    : ReturnType<typeof optionalStringOption>;
} & { [K in `${P}.cache.size`]: ReturnType<typeof intOption> } & { [K in `${P}.cache.ttl`]: ReturnType<typeof durationOption> };

const commonOptions = {
  zone: stringOption({ description: 'Availability zone of this client, preferred when dispatching directly.', env: 'ZONE', helpGroup: 'GLOBAL', ini: { field: 'Zone', section: '' }, default: 'local' }),
  'log.level': choiceOption({ choices: LOG_LEVELS, description: 'Log level (default warn).', env: 'LOG_LEVEL', helpGroup: 'GLOBAL', ini: { field: 'Level', section: 'Logging' }, default: 'warn' }),
  'log.format': choiceOption({ choices: LOG_FORMATS, description: 'Log format (default text).', env: 'LOG_FORMAT', helpGroup: 'GLOBAL', ini: { field: 'Format', section: 'Logging' }, default: 'text' }),
  // Ours (upstream waits forever, see docs/divergences.md D2).
  timeout: durationOption({ description: 'Give up on an unreachable service after this long (Go duration; 0 waits forever).', env: 'GAZCTL_TIMEOUT', helpGroup: 'GLOBAL', ini: { field: 'Timeout', section: '' }, default: '30s' }),
  // Ours (upstream has no SOCKS support, see docs/divergences.md D73 and docs/networking.md).
  'socks-server': socksServerOption({
    description:
      'SOCKS5 proxy (host:port) carrying every connection: gRPC to brokers, consumers and etcd, and HTTP to fragment stores; host names are resolved by the proxy. Default: $SOCKS_SERVER_SERVICE_HOST:$SOCKS_SERVER_SERVICE_PORT when both are set; "" for none.',
    helpGroup: 'GLOBAL',
    ini: { field: 'SocksServer', section: '' },
  }),
};

/** The options of the `journals` group, inherited by every journals sub-command. */
export const journalsOptions = options({ ...commonOptions, ...serviceOptions('broker', 'Broker') });
/** The options of the `shards` group. */
export const shardsOptions = options({ ...commonOptions, ...serviceOptions('consumer', 'Consumer'), ...serviceOptions('broker', 'Broker') });

/** --context: the named settings (src/cli/contexts.ts) to run with; not an option of gazctl.ini. */
export const contextFlag = {
  context: Flags.string({ description: 'Run with the settings of this context (gazctl context list); default $GAZCTL_CONTEXT, else the current context.', helpGroup: 'GLOBAL' }),
};

export const journalsBaseFlags = { ...oclifFlags(journalsOptions), ...contextFlag };
export const shardsBaseFlags = { ...oclifFlags(shardsOptions), ...contextFlag };

export interface ServiceOptions {
  address: string;
  certFile?: string;
  certKeyFile?: string;
  trustedCAFile?: string;
  authKeys?: string;
  authToken?: string;
  cacheSize: number;
  cacheTTLms: number;
  zone: string;
  timeoutMs: number;
}

type GroupValues = OptionValues<typeof journalsOptions> & Partial<OptionValues<typeof shardsOptions>>;

/** Common machinery for every gazctl command. */
export abstract class GazctlCommand extends Command {
  /** `journals` or `shards`: names the option group and the gazctl.ini sections. */
  static group: 'journals' | 'shards' = 'journals';
  /**
   * The gazctl.ini section of the command's own options, where it is not `<group>.<sub-command>`
   * (a command whose upstream name is its alias, e.g. `shards prune-log` reads `[shards.prune]`).
   */
  static iniSection?: string;
  /**
   * The command's own options (print-config lists them). A method, not a property: oclif copies a
   * command's own static properties into its manifest, and option defaults include bigints.
   */
  static optionSet(): OptionSet {
    return {};
  }

  protected log_!: Logger;
  protected global!: GroupValues;
  /** Where the service addresses came from (the hint of a name that does not resolve names it). */
  protected addressOrigins: Partial<Record<'broker' | 'consumer', OptionOrigin>> = {};
  /** The context in effect (--context, $GAZCTL_CONTEXT or the current one), if any. */
  protected context: ActiveContext | undefined;

  protected get groupName(): 'journals' | 'shards' {
    return (this.constructor as typeof GazctlCommand).group;
  }

  /**
   * Parses argv, then resolves the group options and the command's own `opts` from the command
   * line, gazctl.ini ([<group>.<sub-command>]), the environment and the defaults.
   */
  protected async resolve<S extends OptionSet>(opts: S): Promise<OptionValues<S>> {
    const ctor = this.constructor as typeof GazctlCommand;
    const { flags, raw } = await this.parse(ctor);
    const given = new Set(raw.flatMap((r) => (r.type === 'flag' ? [r.flag] : [])));
    const ini = loadIni(findIniFile());
    const group = this.groupName;
    const argv = flags as Record<string, unknown>;
    const groupSet = group === 'journals' ? journalsOptions : shardsOptions;
    this.context = await activeContext(argv.context as string | undefined);
    const groupSources = { argv, given, ini, env: process.env, group, context: this.context };
    this.global = resolveOptions(groupSet, groupSources) as GroupValues;
    this.log_ = new Logger(this.global['log.level'], this.global['log.format']);
    if (this.context) warnShadowedVariables(groupSet, this.context, given, process.env);
    for (const svc of ['broker', 'consumer'] as const) {
      const spec = (groupSet as OptionSet)[`${svc}.address`];
      if (spec) this.addressOrigins[svc] = resolveWithOrigin(spec, groupSources).origin;
    }
    // Every connection the command makes from here on goes through the proxy, if one is set.
    setSocksServer(this.global['socks-server']);
    if (this.global['socks-server']) this.log_.debug('connecting through a SOCKS5 proxy', { socksServer: formatSocksServer(this.global['socks-server']) });
    const section = ctor.iniSection ?? `${group}.${String(ctor.id ?? '').split(/[: ]/).slice(1).join('.')}`;
    return resolveOptions(opts, { argv, given, ini, env: process.env, group, section });
  }

  protected serviceOptions(prefix: 'broker' | 'consumer'): ServiceOptions {
    const g = this.global as OptionValues<typeof shardsOptions>;
    const opt = (v: string | undefined) => (v === '' ? undefined : v);
    return {
      address: g[`${prefix}.address`],
      certFile: opt(g[`${prefix}.cert-file`]),
      certKeyFile: opt(g[`${prefix}.cert-key-file`]),
      trustedCAFile: opt(g[`${prefix}.trusted-ca-file`]),
      authKeys: opt(g[`${prefix}.auth-keys`]),
      authToken: opt(g[`${prefix}.auth-token`]),
      cacheSize: g[`${prefix}.cache.size`],
      cacheTTLms: Number(g[`${prefix}.cache.ttl`] / 1_000_000n),
      zone: g.zone,
      timeoutMs: Number(g.timeout / 1_000_000n),
    };
  }

  /** Every failure becomes one line on stderr and exit code 1 or 2 (src/cli/exit.ts). */
  /**
   * A JournalClient for the resolved broker options, with --timeout as its default time budget.
   * RPCs that wait for a service retry until the budget runs out: quietly, as upstream, except
   * for one notice on a terminal (unreachableNote); --log.level=debug shows every retry.
   */
  protected journalClient(svc: ServiceOptions = this.serviceOptions('broker')): JournalClient {
    return new JournalClient(svc, this.clientDefaults(svc, 'broker'));
  }

  /** A ShardClient for the resolved consumer options, with the same time budget and retry notes. */
  protected shardClient(svc: ServiceOptions = this.serviceOptions('consumer')): ShardClient {
    return new ShardClient(svc, this.clientDefaults(svc, 'consumer'));
  }

  private clientDefaults(svc: ServiceOptions, service: 'broker' | 'consumer'): CallDefaults {
    let told = false;
    return {
      timeoutMs: svc.timeoutMs,
      onRetry: ({ op, attempt, delayMs, error }) => {
        this.log_.debug(`${op} failed (will retry)`, { attempt, delayMs, err: (error as Error)?.message ?? String(error) });
        // An operator at a terminal hears at once why nothing happens; scripts keep one line.
        const note = told ? undefined : unreachableNote(svc, error, attempt, Boolean(process.stderr.isTTY), service);
        if (note !== undefined) {
          told = true;
          process.stderr.write(note);
        }
      },
    };
  }

  protected override async catch(err: Error & { oclif?: { exit?: number } }): Promise<void> {
    if (err.oclif?.exit === 0) return; // --help, --version
    const code = exitCodeFor(err);
    if (code === EXIT.PIPE) {
      // `gazctl journals read ... | head`: the reader has what it wanted; say nothing.
      this.log_?.debug('stdout was closed by its reader');
      process.exitCode = code;
      return;
    }
    // oclif spreads a parse error over lines ("Parsing --x", "<reason>", "See more help ...").
    const first = String(err.message ?? err)
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l !== '' && !/^See more help/.test(l))
      // A line that already ends in a colon ("Missing 1 required arg:") introduces the next, and
      // oclif lists an argument as "NAME  description".
      .map((l) => l.replace(/:$/, '').replace(/^(\S+) {2,}/, '$1: '))
      .join(': ')
      .replace(/^Error: /, '');
    process.stderr.write(`gazctl: ${first}${this.hint(err)}\n`);
    if (this.log_?.enabled('debug') && err.stack) process.stderr.write(err.stack + '\n');
    process.exitCode = code;
  }

  /** What the operator can do about a failure (a transport failure, a refused append), naming our flags and commands. */
  private hint(outer: unknown): string {
    for (let e: unknown = outer, i = 0; e && i < 5; e = (e as { cause?: unknown }).cause, i++) {
      if (e instanceof BrokerStatusError && e.status === Status.INDEX_HAS_GREATER_OFFSET) {
        // The stores hold offsets past the brokers' agreed write head (etcd or brokers were lost).
        return ' (the fragment index is ahead of the write head, as after losing etcd or brokers: once every old fragment is persisted, run `gazctl journals reset-head -l <selector>`)';
      }
    }
    // The transport failure may be wrapped (e.g. "apply failed: …"): look down the causes.
    let err: unknown = outer;
    for (let i = 0; i < 5 && err && !(err instanceof TransportError); i++) err = (err as { cause?: unknown }).cause;
    if (!(err instanceof TransportError)) return '';
    const svc = this.groupName === 'shards' && /consumer/i.test(err.message) ? 'consumer' : 'broker';
    if (err.code === 16) {
      // UNAUTHENTICATED: the service verifies tokens (--broker.auth-keys on its side).
      const svc = this.groupName === 'shards' && /shard/i.test(err.message) ? 'consumer' : 'broker';
      // A broker relaying a peer's refusal of its own token: the brokers' keys differ.
      if (/refused this broker's proxied call/.test(err.message)) return ' (the brokers do not accept each other\'s tokens: give every broker the same --broker.auth-keys; the keys given to gazctl were accepted)';
      const why = /missing or empty Authorization/.test(err.message) ? 'requires authorization' : 'refused the authorization sent';
      return ` (the ${svc} ${why}: pass the cluster's signing keys with --${svc}.auth-keys, or a bearer token with --${svc}.auth-token)`;
    }
    switch (err.reason) {
      case 'unresolved':
        return unresolvedHint(svc, this.addressOrigins[svc]);
      case 'untrusted-certificate':
        return ` (to trust the server's CA, pass it with --${svc}.trusted-ca-file)`;
      case 'tls-expected':
        return ` (the server expects TLS: use an https:// address in --${svc}.address)`;
      case 'no-answer':
        return ' (a broker that cannot reach etcd accepts connections but does not answer: check etcd, or raise --timeout)';
      default:
        return '';
    }
  }
}

/**
 * What to do about a service address whose host name does not resolve: the default (a Kubernetes
 * Service name) is to be replaced outside the cluster; a configured one is to be checked where
 * it was set. Either way, print-config shows the effective endpoints and their sources.
 */
export function unresolvedHint(svc: 'broker' | 'consumer', origin: OptionOrigin | undefined): string {
  const how = `--${svc}.address or ${svc.toUpperCase()}_ADDRESS`;
  if (origin === undefined || origin.from === 'default') {
    return ` (${DEFAULT_ADDRESSES[svc]} is the default ${svc} address, the Kubernetes Service name: outside the cluster set ${how}; \`gazctl print-config\` shows the effective endpoints)`;
  }
  if (origin.from === 'context') {
    return ` (the ${svc} address comes from context ${origin.name} (${origin.path}): check it with \`gazctl context show ${origin.name}\`, change it with \`gazctl context set ${origin.name} ${svc}.address=...\`, or pass --${svc}.address)`;
  }
  const where =
    origin.from === 'command line'
      ? `--${svc}.address`
      : origin.from === 'environment'
        ? `$${origin.variable}`
        : `${origin.path} [${origin.section}]`;
  return ` (the ${svc} address comes from ${where}: check it, or set ${how}; \`gazctl print-config\` shows the effective endpoints)`;
}

/**
 * One line on stderr for each environment variable that the context overrides with another
 * value (BROKER_ADDRESS exported for one cluster, a context chosen for another): the operator
 * learns which one wins before anything is sent.
 */
export function warnShadowedVariables(set: OptionSet, ctx: ActiveContext, given: ReadonlySet<string>, env: NodeJS.ProcessEnv, out: (line: string) => void = (l) => process.stderr.write(l)): void {
  for (const s of Object.values(set)) {
    const v = ctx.values.get(s.name);
    if (v === undefined || given.has(s.name) || s.env === undefined) continue;
    const e = env[s.env];
    if (e !== undefined && e !== v) out(`gazctl: warning: $${s.env} is ignored: context ${ctx.name} sets ${s.name} (the command line, --${s.name}, beats both)\n`);
  }
}

/** A Go duration flag value (e.g. `--url-ttl`), as nanoseconds; a usage error when malformed. */
export function parseDurationFlag(name: string, value: string): bigint {
  try {
    return parseDurationText(value);
  } catch (err) {
    if (err instanceof OptionValueError) throw new UsageError(`--${name}: ${err.message}`);
    throw err;
  }
}

/**
 * The one notice a terminal gets while an unreachable broker is retried (before the final error,
 * which only comes when --timeout runs out): from the second failed attempt on, once.
 */
export function unreachableNote(
  svc: Pick<ServiceOptions, 'address' | 'timeoutMs'>,
  error: unknown,
  attempt: number,
  tty: boolean,
  service: 'broker' | 'consumer' = 'broker',
): string | undefined {
  if (!tty || attempt < 1 || !isUnavailable(error)) return undefined;
  // Through a SOCKS proxy grpc-js only sees its tunnel drop: the proxy's reason says more.
  const detail = (socksServer() && latestSocksFailure(10_000)) || cleanGrpcDetails((error as { details?: string }).details) || (error as Error).message;
  const budget = svc.timeoutMs > 0 ? `for up to ${formatGoDuration(BigInt(svc.timeoutMs) * 1_000_000n)} (--timeout)` : 'until interrupted (--timeout 0)';
  return `gazctl: ${service} ${svc.address} is not answering (${detail}); retrying ${budget}, Ctrl-C to stop\n`;
}
