// Regenerates src/lib/protocol/gen from proto/ with buf and ts-proto, both from npm.
import { execFileSync } from 'node:child_process';
import { rmSync } from 'node:fs';

rmSync('src/lib/protocol/gen', { recursive: true, force: true });
execFileSync('npx', ['buf', 'generate'], { stdio: 'inherit' });
