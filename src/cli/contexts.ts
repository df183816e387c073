// Contexts: named sets of connection settings for several clusters (as `rpk profile` or the
// contexts of a kubeconfig), on top of gazctl.ini and the environment.
//
// One YAML file, `$XDG_CONFIG_HOME/gazctl/contexts.yaml` (`~/.config/gazctl/contexts.yaml` when
// XDG_CONFIG_HOME is unset; GAZCTL_CONTEXTS_FILE names another), holds every context and the
// current one:
//
//   current: prod
//   contexts:
//     prod:
//       broker.address: http://gazette.prod.example:8080
//       consumer.address: http://word-count.prod.example:8080
//       broker.auth-token: ...
//
// A context holds option values by their long names: the options of the `journals` and `shards`
// groups (service addresses, TLS files, auth, cache, zone, timeout, logging, and whatever option
// the group gains later) and the `etcd.*` options of gazctl health. A command uses the context `--context NAME` names,
// else the one GAZCTL_CONTEXT names, else the file's current one, else none.
//
// Precedence: command line > context > gazctl.ini > environment > default. A context is chosen
// deliberately (by flag, variable or `gazctl context use`), so it wins over the settings that
// apply implicitly (a gazctl.ini in the working directory, variables exported long ago); only
// the command line beats it, as in kubectl, where the chosen context, not the shell, decides the
// cluster. When the context shadows a variable set to something else, gazctl says so on stderr.
//
// The file holds tokens: it is written with mode 0600 (its directory 0700), atomically (a
// temporary file in the same directory, flushed, then renamed over it), and `context show` and
// `context list` mask secrets.
import { closeSync, fsyncSync, mkdirSync, openSync, readFileSync, renameSync, unlinkSync, writeSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { homedir } from 'node:os';
import { GazctlError } from '../lib/protocol/errors.js';
import { UsageError } from './exit.js';
import type { OptionSet } from './options.js';

export interface ContextsFile {
  path: string;
  current?: string;
  /** Context name → option long name → value text. */
  contexts: Map<string, Map<string, string>>;
}

/** A context in effect for a command: its name, the file it is in, its values. */
export interface ActiveContext {
  name: string;
  path: string;
  /** How it was chosen (for messages). */
  via: '--context' | '$GAZCTL_CONTEXT' | 'current';
  values: ReadonlyMap<string, string>;
}

/** Where the contexts file is. */
export function contextsPath(env: NodeJS.ProcessEnv = process.env): string {
  if (env.GAZCTL_CONTEXTS_FILE) return env.GAZCTL_CONTEXTS_FILE;
  const base = env.XDG_CONFIG_HOME && env.XDG_CONFIG_HOME.startsWith('/') ? env.XDG_CONFIG_HOME : join(env.HOME || homedir(), '.config');
  return join(base, 'gazctl', 'contexts.yaml');
}

/** A context name: letters, digits, `.`, `_`, `-`; starting with a letter or digit. */
export function checkContextName(name: string): void {
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/.test(name)) {
    throw new UsageError(`context name ${JSON.stringify(name)}: use letters, digits, ".", "_" and "-", starting with a letter or digit`);
  }
}

/**
 * Reads the contexts file; an absent file is an empty one. Every command looks for the file: the
 * YAML library is loaded only when there is one (loading it costs more than a start-up of a
 * command without contexts).
 */
export async function loadContexts(path: string = contextsPath()): Promise<ContextsFile> {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { path, contexts: new Map() };
    throw new GazctlError(`cannot read the contexts file ${path}: ${(err as Error).message}`);
  }
  const { parse: parseYaml } = await import('yaml');
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch (err) {
    throw new GazctlError(`contexts file ${path}: not valid YAML: ${(err as Error).message.split('\n')[0]}`);
  }
  const bad = (why: string) => new GazctlError(`contexts file ${path}: ${why}`);
  if (doc === null || doc === undefined) return { path, contexts: new Map() };
  if (typeof doc !== 'object' || Array.isArray(doc)) throw bad('expected a mapping with "current" and "contexts"');
  const d = doc as Record<string, unknown>;
  const contexts = new Map<string, Map<string, string>>();
  const cs = d.contexts ?? {};
  if (typeof cs !== 'object' || cs === null || Array.isArray(cs)) throw bad('"contexts" must be a mapping of names to settings');
  for (const [name, values] of Object.entries(cs as Record<string, unknown>)) {
    const m = new Map<string, string>();
    if (values !== null && values !== undefined) {
      if (typeof values !== 'object' || Array.isArray(values)) throw bad(`context ${JSON.stringify(name)} must be a mapping of option names to values`);
      for (const [k, v] of Object.entries(values as Record<string, unknown>)) {
        if (typeof v !== 'string' && typeof v !== 'number' && typeof v !== 'boolean') throw bad(`context ${JSON.stringify(name)}: ${k} must be a scalar`);
        m.set(k, String(v));
      }
    }
    contexts.set(name, m);
  }
  const current = d.current === undefined || d.current === null || d.current === '' ? undefined : String(d.current);
  return { path, current, contexts };
}

/** Writes the file atomically with mode 0600 (see the file comment). */
export async function saveContexts(f: ContextsFile): Promise<void> {
  const { stringify: stringifyYaml } = await import('yaml');
  const doc = {
    ...(f.current !== undefined ? { current: f.current } : {}),
    contexts: Object.fromEntries([...f.contexts].map(([name, m]) => [name, Object.fromEntries(m)])),
  };
  const text = '# gazctl contexts (gazctl context --help). Holds credentials: keep it private (mode 0600).\n' + stringifyYaml(doc);
  mkdirSync(dirname(f.path), { recursive: true, mode: 0o700 });
  const tmp = `${f.path}.${process.pid}.tmp`;
  const fd = openSync(tmp, 'w', 0o600);
  try {
    writeSync(fd, text);
    fsyncSync(fd);
  } catch (err) {
    closeSync(fd);
    unlinkSync(tmp);
    throw err;
  }
  closeSync(fd);
  renameSync(tmp, f.path);
}

/**
 * The context a command runs with: `--context` (flag), else $GAZCTL_CONTEXT, else the file's
 * current one. A name that is not in the file is a usage error.
 */
export async function activeContext(flag: string | undefined, env: NodeJS.ProcessEnv = process.env): Promise<ActiveContext | undefined> {
  const fromEnv = env.GAZCTL_CONTEXT !== undefined && env.GAZCTL_CONTEXT !== '' ? env.GAZCTL_CONTEXT : undefined;
  const path = contextsPath(env);
  // Without a choice and without a file, there is nothing to read (the common case: no contexts).
  const f = await loadContexts(path);
  const [name, via] = flag !== undefined && flag !== '' ? [flag, '--context' as const] : fromEnv !== undefined ? [fromEnv, '$GAZCTL_CONTEXT' as const] : [f.current, 'current' as const];
  if (name === undefined) return undefined;
  const values = f.contexts.get(name);
  if (!values) {
    const known = [...f.contexts.keys()];
    throw new UsageError(`no context ${JSON.stringify(name)} (named by ${via}) in ${path}${known.length ? `; there are: ${known.join(', ')}` : ': create it with `gazctl context create`'}`);
  }
  return { name, path, via, values };
}

/** The settings of a context as `show`, `list` and their JSON print them: sorted, secrets masked. */
export function maskedSettings(values: ReadonlyMap<string, string>): Record<string, string> {
  return Object.fromEntries([...values].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([k, v]) => [k, maskValue(k, v)]));
}

/** Option names whose values are secrets: never printed by `context show|list` or print-config. */
export function isSecretOption(name: string): boolean {
  return /(^|[.-])(auth-keys|auth-token|token|password|secret)$/.test(name);
}

/** A value as show/list print it: a secret masked; a URL's password (socks5://user:pw@h) masked. */
export function maskValue(name: string, value: string): string {
  if (value === '') return value;
  if (isSecretOption(name)) return '<masked>';
  return value.replace(/^([a-z][a-z0-9+.-]*:\/\/[^/:@]*):[^/@]*@/i, '$1:<masked>@');
}

/**
 * Checks `key=value` settings against the options a context may hold (`known`: long name →
 * spec), with each option's own parser, so a context never holds a value a command would refuse.
 */
export function parseSettings(pairs: readonly string[], known: OptionSet): [string, string][] {
  return pairs.map((p) => {
    const eq = p.indexOf('=');
    if (eq <= 0) throw new UsageError(`setting ${JSON.stringify(p)}: expected OPTION=VALUE, e.g. broker.address=http://gazette.prod:8080`);
    const key = p.slice(0, eq).replace(/^--/, '');
    const value = p.slice(eq + 1);
    const spec = known[key];
    if (!spec) throw new UsageError(`setting ${JSON.stringify(key)}: not an option a context can hold (see \`gazctl context --help\`: ${Object.keys(known).sort().join(', ')})`);
    if (spec.kind === 'boolean') throw new UsageError(`setting ${key}: a switch cannot be stored in a context`);
    try {
      spec.parse(value);
    } catch (err) {
      throw new UsageError(`setting ${key}: ${(err as Error).message}`);
    }
    return [key, value];
  });
}
