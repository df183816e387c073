// A daemon's etcd endpoints whose host names do not exist. The default, http://etcd:2379, is the
// Kubernetes Service name of upstream's manifests (docs/divergences.md D79); run elsewhere without
// --etcd.address, the daemon would only log "Name resolution failed" at each retry. One warning
// at start says what is wrong and what to set; the daemon keeps retrying (the name may appear:
// a Service created after the pods).
import { nameMissing } from '../lib/client/transport-diagnosis.js';
import type { Logger } from './log.js';

export async function warnUnresolvableEtcd(endpoints: readonly string[], log: Pick<Logger, 'warn'>): Promise<void> {
  for (const ep of endpoints) {
    let host: string;
    try {
      host = new URL(ep).hostname;
    } catch {
      continue;
    }
    if (host === '' || /^[\d.]+$/.test(host) || host.startsWith('[')) continue;
    if (await nameMissing(host)) {
      log.warn(`etcd endpoint ${ep}: host name "${host}" does not resolve; set --etcd.address or ETCD_ADDRESS (http://etcd:2379, the default, is the Kubernetes Service name); still retrying`);
    }
  }
}
