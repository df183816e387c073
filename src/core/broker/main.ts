// Entry of the `gazette` bin: `gazette serve [flags]`. Usage errors are one line on stderr
// and exit 2.

import { parseServeArgs, serveHelp, UsageError } from './flags.js';
import { serve } from './daemon.js';
import { buildEtcdTls, buildSecurity } from '../security.js';

export async function main(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv;
  if (cmd === undefined || cmd === '-h' || cmd === '--help' || cmd === 'help') {
    process.stdout.write('Usage:\n  gazette [OPTIONS] serve\n\nCommands:\n  serve  Serve a Gazette broker\n');
    return cmd === undefined ? 2 : 0;
  }
  if (cmd !== 'serve') {
    process.stderr.write(`gazette: unknown command ${JSON.stringify(cmd)} (the one command is "serve")\n`);
    return 2;
  }
  if (rest.includes('-h') || rest.includes('--help')) {
    process.stdout.write(serveHelp());
    return 0;
  }
  let config;
  let security;
  try {
    config = parseServeArgs(rest, process.env);
    security = buildSecurity(
      'broker',
      { certFile: config.serverCertFile, keyFile: config.serverCertKeyFile, caFile: config.serverCAFile },
      { certFile: config.peerCertFile, keyFile: config.peerCertKeyFile, caFile: config.peerCAFile },
      config.authKeys,
    );
    const etcd = buildEtcdTls(config.etcdAddress, { certFile: config.etcdCertFile, certKeyFile: config.etcdCertKeyFile, trustedCAFile: config.etcdTrustedCAFile });
    if (etcd) security.etcd = etcd;
  } catch (e) {
    if (e instanceof UsageError) {
      process.stderr.write(`gazette serve: ${e.message}\n`);
      return 2;
    }
    throw e;
  }
  return serve(config, security);
}
