// TLS towards etcd, as upstream's daemons and etcdctl take it: three files, all optional.
//
//   * the trusted CA, which etcd's server certificate must chain to (the system roots when not
//     given);
//   * a client certificate and its key, presented to an etcd that runs with
//     `--client-cert-auth` (without one, such an etcd ends the handshake).
//
// TLS is used for `https://` endpoints only; upstream reads the files only then, and so do the
// callers (they say so when files are given for http:// endpoints). Kept apart from client.ts
// so that the CLI (gazctl health's status call, status.ts) can use it without loading etcd3.

import { readFileSync } from 'node:fs';
import { createSecureContext } from 'node:tls';
import { GazctlError } from '../protocol/errors.js';

/** PEM contents for TLS to etcd; every part optional. */
export interface EtcdTls {
  /** CA certificates that etcd's server certificate must chain to; the system roots when absent. */
  ca?: Buffer;
  /** Client certificate chain, presented to an etcd with client certificate auth. */
  cert?: Buffer;
  /** Private key of `cert`. */
  key?: Buffer;
}

/** The files of {@link EtcdTls}, as options name them (`--etcd.cert-file` etc.). */
export interface EtcdTlsFiles {
  certFile?: string;
  certKeyFile?: string;
  trustedCAFile?: string;
}

/** Which option a bad TLS file came from (its name under `etcd.`). */
export type EtcdTlsOption = 'cert-file' | 'cert-key-file' | 'trusted-ca-file';

/** A TLS file for etcd could not be read or used; `option` names the option it came from. */
export class EtcdTlsError extends GazctlError {
  constructor(
    readonly option: EtcdTlsOption,
    message: string,
  ) {
    super(message);
  }
}

/** Whether any endpoint is `https://`; throws when https and http endpoints are mixed. */
export function etcdEndpointsSecure(endpoints: readonly string[]): boolean {
  const secure = endpoints.filter((e) => /^https:\/\//i.test(e.trim())).length;
  if (secure !== 0 && secure !== endpoints.length) {
    // etcd3 (and grpc-js under it) uses one set of channel credentials for all endpoints.
    throw new GazctlError(`etcd endpoints mix https:// and http:// (${endpoints.join(', ')}): use one scheme for all`);
  }
  return secure !== 0;
}

/**
 * Reads the files (undefined when none is given) and checks that they are usable: PEM that
 * parses, and a key that goes with the certificate. Errors name the option.
 */
export function loadEtcdTls(files: EtcdTlsFiles): EtcdTls | undefined {
  const given = (v: string | undefined): v is string => v !== undefined && v !== '';
  const read = (option: EtcdTlsOption, path: string, what: string): Buffer => {
    try {
      return readFileSync(path);
    } catch (e) {
      throw new EtcdTlsError(option, `reading ${what} ${path}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
    }
  };
  if (!given(files.certFile) && !given(files.certKeyFile) && !given(files.trustedCAFile)) return undefined;
  if (given(files.certFile) !== given(files.certKeyFile)) {
    const missing: EtcdTlsOption = given(files.certFile) ? 'cert-key-file' : 'cert-file';
    throw new EtcdTlsError(missing, `a client certificate needs both --etcd.cert-file and --etcd.cert-key-file`);
  }
  const out: EtcdTls = {};
  if (given(files.trustedCAFile)) {
    out.ca = read('trusted-ca-file', files.trustedCAFile, 'CA certificate');
    try {
      createSecureContext({ ca: out.ca });
    } catch (e) {
      throw new EtcdTlsError('trusted-ca-file', `${files.trustedCAFile}: ${(e as Error).message}`);
    }
    if (!/-----BEGIN CERTIFICATE-----/.test(out.ca.toString('latin1'))) {
      throw new EtcdTlsError('trusted-ca-file', `${files.trustedCAFile}: no PEM certificate in it`);
    }
  }
  if (given(files.certFile) && given(files.certKeyFile)) {
    out.cert = read('cert-file', files.certFile, 'certificate');
    out.key = read('cert-key-file', files.certKeyFile, 'private key');
    try {
      // Says which is wrong: an unparsable certificate, an unparsable key, or a key of another certificate.
      createSecureContext({ cert: out.cert, key: out.key });
    } catch (e) {
      throw new EtcdTlsError('cert-file', `${files.certFile} with key ${files.certKeyFile}: ${(e as Error).message}`);
    }
  }
  return out;
}

/** Node's certificate verification failures, as grpc-js reports them. */
const UNTRUSTED =
  /self[- ]signed certificate|unable to verify the first certificate|unable to get (local )?issuer certificate|certificate has expired|certificate is not yet valid|Hostname\/IP does not match|does not match certificate's altnames|ERR_TLS_CERT_ALTNAME_INVALID|certificate signature failure/i;
/** An etcd asking for a client certificate that we did not send (or that it does not accept). */
const CLIENT_CERT_REFUSED = /certificate required|alert number 116|bad certificate|alert number 42|unknown ca|alert number 48/i;

/**
 * What to add to an etcd transport error so that it says which TLS option to look at: an
 * untrusted server certificate, or an etcd that refused our (missing) client certificate.
 * Empty when the error is not one of those.
 */
export function etcdTlsHint(message: string): string {
  if (UNTRUSTED.test(message)) return " (etcd's server certificate is not trusted: pass etcd's CA with --etcd.trusted-ca-file)";
  if (CLIENT_CERT_REFUSED.test(message)) {
    return ' (etcd refused the TLS handshake: it requires a client certificate it trusts; pass one with --etcd.cert-file and --etcd.cert-key-file)';
  }
  return '';
}
