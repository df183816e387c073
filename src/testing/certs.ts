// Test certificates made with the openssl CLI: a CA, a certificate it signs for 127.0.0.1 and
// localhost (usable by servers and as a client certificate), and a second, unrelated CA for
// the "wrong CA" cases. EC P-256 keys, valid for two days: enough for any test run.

import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface TestCerts {
  dir: string;
  /** The CA that signed `certFile`. */
  caFile: string;
  /** Certificate for 127.0.0.1 and localhost, signed by `caFile` (server and client use). */
  certFile: string;
  keyFile: string;
  /** A CA that signed nothing here. */
  otherCaFile: string;
}

function openssl(args: string[], cwd: string): void {
  try {
    execFileSync('openssl', args, { cwd, stdio: ['ignore', 'ignore', 'pipe'] });
  } catch (e) {
    const stderr = (e as { stderr?: Buffer }).stderr?.toString().trim();
    throw new Error(`openssl ${args[0]} failed (is openssl installed? scripts/setup.sh installs it): ${stderr || (e as Error).message}`);
  }
}

/** Makes the certificates in `dir` (created if needed). */
export function makeTestCerts(dir: string): TestCerts {
  mkdirSync(dir, { recursive: true });
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  openssl(['req', '-x509', ...ec, '-keyout', 'ca.key', '-out', 'ca.crt', '-days', '2', '-subj', '/CN=gazctl test CA'], dir);
  openssl(['req', ...ec, '-keyout', 'server.key', '-out', 'server.csr', '-subj', '/CN=localhost'], dir);
  writeFileSync(join(dir, 'ext.cnf'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n');
  openssl(['x509', '-req', '-in', 'server.csr', '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'server.crt', '-days', '2', '-extfile', 'ext.cnf'], dir);
  openssl(['req', '-x509', ...ec, '-keyout', 'other.key', '-out', 'other.crt', '-days', '2', '-subj', '/CN=unrelated test CA'], dir);
  return { dir, caFile: join(dir, 'ca.crt'), certFile: join(dir, 'server.crt'), keyFile: join(dir, 'server.key'), otherCaFile: join(dir, 'other.crt') };
}
