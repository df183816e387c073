// Trusting NODE_EXTRA_CA_CERTS without paying for it at start-up.
//
// Node 20 reads the file NODE_EXTRA_CA_CERTS names, and builds its whole root store (its own
// ~140 roots plus the file's), before any JavaScript runs. On a machine that points it at the
// system bundle that is 40-55 ms of every gazctl run, most of them runs that open no TLS
// connection at all (a plaintext broker, a direct read from file:// or an http:// S3 endpoint).
// Go, by comparison, loads its roots the first time it verifies a certificate.
//
// So bin/gazctl starts Node with the variable moved to GAZCTL_DEFERRED_CA_CERTS, and bin/run.js
// calls deferExtraCACerts() first thing. That puts NODE_EXTRA_CA_CERTS back into process.env (for
// the editor and any other child process) and replaces tls.createSecureContext, which every TLS
// client in the process goes through (tls.connect, https, fetch, grpc-js, our dialer), with one
// that gives a context Node's default trust where Node would have given it: when the options
// name no `ca` (Node's own test is the option's truthiness), the context is made with
// `ca: [...tls.rootCertificates, <the file>]`, the same certificates Node's root store holds.
// The file is read when the first such context is made; a file that cannot be read gets Node's
// own warning then, and the roots alone are trusted, as Node does.
//
// Making a context from ~290 PEM certificates takes about as long as Node's start-up load (some
// 45 ms), so where Node would share its root store across contexts, the contexts themselves are
// shared here: a context whose options are plain settings (versions, ciphers, curves...) is made
// once per distinct settings and handed out again, as an https agent does with `secureContext`.
// Options carrying keys or certificates make a fresh context each time, as before.
//
// This is exact only where this Node's default root store is its bundled one and
// createSecureContext reads the options listed below; canDefer() checks both (from Node's own
// sources), and where it says no bin/run.js starts Node again with the variable in place.

import { readFileSync } from 'node:fs';
import { createRequire, syncBuiltinESMExports } from 'node:module';
import type * as Tls from 'node:tls';
import { nodeLibSource } from '../lib/node-source.js';

/** Options whose values are keys, certificates or other material: contexts made with them are not shared. */
const MATERIAL = [
  'cert',
  'clientCertEngine',
  'crl',
  'dhparam',
  'key',
  'passphrase',
  'pfx',
  'privateKeyEngine',
  'privateKeyIdentifier',
  'sessionIdContext',
  'ticketKeys',
] as const;

/** Plain settings that shape a context: the key of a shared one. */
const SETTINGS = [
  'allowPartialTrustChain',
  'ciphers',
  'ecdhCurve',
  'honorCipherOrder',
  'maxVersion',
  'minVersion',
  'secureOptions',
  'secureProtocol',
  'sessionTimeout',
  'sigalgs',
] as const;

/** Every option Node 20's createSecureContext and configSecureContext read (besides `ca`). */
const KNOWN = new Set<string>(['ca', ...MATERIAL, ...SETTINGS]);

type Options = Tls.SecureContextOptions & Record<string, unknown>;

/** The sharing key of a context made from `options`, or undefined when it must not be shared. */
export function sharingKey(options: Options | undefined = {}): string | undefined {
  for (const k of MATERIAL) if (options[k] !== undefined && options[k] !== null) return undefined;
  const values: unknown[] = [];
  for (const k of SETTINGS) {
    const v = options[k];
    if (v === undefined) values.push('\u0000undefined');
    else if (v === null || typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') values.push(v);
    else return undefined;
  }
  return JSON.stringify(values);
}

/** The option names a `const { a, b = x, c } = options;` destructuring in `src` reads, in each such statement. */
function destructured(src: string): string[][] {
  const out: string[][] = [];
  for (const m of src.matchAll(/const \{([^}]*)\} = options;/g)) {
    out.push(
      m[1]!
        .split(',')
        .map((s) => s.trim().split(/[\s=]/)[0]!)
        .filter(Boolean),
    );
  }
  return out;
}

/**
 * Whether deferExtraCACerts() gives exactly Node's trust on this Node: its default roots are the
 * bundled ones (no --use-openssl-ca, no build defaulting to OpenSSL's store) and its
 * createSecureContext reads no option this module does not know.
 */
export function canDefer(env: NodeJS.ProcessEnv = process.env, execArgv: readonly string[] = process.execArgv): boolean {
  const flags = [...execArgv, ...(env.NODE_OPTIONS ?? '').split(/\s+/)];
  if (flags.some((f) => f === '--use-openssl-ca')) return false;
  const defines = (process.config as { target_defaults?: { defines?: unknown } }).target_defaults?.defines;
  if (Array.isArray(defines) && defines.includes('NODE_OPENSSL_CERT_STORE')) return false;
  const read = contextOptionsRead();
  return read !== undefined && read.every((k) => KNOWN.has(k));
}

/**
 * The option names this Node's createSecureContext and configSecureContext read, from their
 * sources (undefined when those cannot be read or do not look as expected).
 */
export function contextOptionsRead(): string[] | undefined {
  const common = nodeLibSource('_tls_common');
  const config = nodeLibSource('internal/tls/secure-context');
  if (common === undefined || config === undefined) return undefined;
  const at = common.indexOf('function createSecureContext(');
  if (at < 0) return undefined;
  const create = common.slice(at, common.indexOf('\n}\n', at));
  // Node 20: `const { honorCipherOrder, minVersion, maxVersion, secureProtocol } = options;`,
  // `let { secureOptions } = options;`, then configSecureContext's one destructuring.
  if (!/let \{ secureOptions \} = options;/.test(create)) return undefined;
  const read = [...destructured(create), ...destructured(config)].flat();
  return read.includes('ca') && read.includes('minVersion') ? [...read, 'secureOptions'] : undefined;
}

export interface Deferred {
  /** Contexts made with the deferred trust so far (shared ones counted once). */
  made(): number;
}

/**
 * Makes every TLS context that asks for Node's default trust also trust the certificates in
 * `file` (see the file comment). Call once, before any TLS context is made.
 */
export function deferExtraCACerts(file: string, warn: (line: string) => void = (l) => process.stderr.write(l)): Deferred {
  const tls = createRequire(import.meta.url)('node:tls') as typeof Tls;
  const original = tls.createSecureContext;
  let trusted: string[] | undefined;
  let made = 0;
  const shared = new Map<string, Tls.SecureContext>();

  const defaultTrust = (): string[] => {
    if (!trusted) {
      let extra: string[] = [];
      try {
        extra = [readFileSync(file, 'latin1')];
      } catch (err) {
        // Node's own words for a file it cannot load at start-up.
        warn(`Warning: Ignoring extra certs from \`${file}\`, load failed: ${(err as Error).message}\n`);
      }
      trusted = [...tls.rootCertificates, ...extra];
    }
    return trusted;
  };
  const make = (options: Options | undefined): Tls.SecureContext => {
    made++;
    return original({ ...options, ca: defaultTrust() });
  };

  tls.createSecureContext = function createSecureContext(options?: Tls.SecureContextOptions): Tls.SecureContext {
    const o = options as Options | undefined;
    if (o?.ca) return original(options);
    const key = sharingKey(o);
    if (key === undefined) return make(o);
    let c = shared.get(key);
    if (!c) {
      c = make(o);
      shared.set(key, c);
    }
    return c;
  };
  // ES modules importing { createSecureContext } from 'node:tls' see the replacement too.
  syncBuiltinESMExports();
  return { made: () => made };
}
