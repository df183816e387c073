import { mkdir, readdir, rm, stat } from 'node:fs/promises';
import { join, resolve as resolvePath } from 'node:path';

import { GazctlCommand, shardsBaseFlags, UsageError } from '../../cli/base.js';
import { jsonWithBigints } from '../../cli/fragments-plan.js';
import { booleanOption, choiceOption, oclifFlags, optionalStringOption, options, type OptionSet } from '../../cli/options.js';
import { formatBytes } from '../../cli/progress.js';
import { makeShardClient, pickRecoveryHints, recoveryLogOf } from '../../cli/shard-logs.js';
import { GazctlError } from '../../lib/protocol/errors.js';
import { emptyHints, journalLogSource, playLog } from '../../lib/recoverylog/index.js';

const OPTIONS = options({
  id: optionalStringOption({ description: 'ID of the shard whose recovery log is played (required).', ini: { field: 'ID' } }),
  dir: optionalStringOption({ char: 'd', description: 'Directory to recover the shard\'s files into (required); created when missing, and it must be empty unless --force.', ini: { field: 'Dir' } }),
  // Ours: upstream always deletes --dir first.
  force: booleanOption({ description: 'Empty a non-empty --dir before playing into it (its files are deleted).', ini: null }),
  format: choiceOption({ char: 'o', choices: ['text', 'json'], default: 'text', showDefault: true, description: 'Output format of the report at the end: text (one line on stderr) or json (on stdout).', ini: null }),
});

type DirState = 'missing' | 'empty' | 'not-empty' | 'not-a-directory';

async function dirState(dir: string): Promise<DirState> {
  try {
    if (!(await stat(dir)).isDirectory()) return 'not-a-directory';
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return 'missing';
    throw new GazctlError(`-d/--dir ${dir}: ${(e as Error).message}`);
  }
  return (await readdir(dir)).length === 0 ? 'empty' : 'not-empty';
}

/** Removes everything inside `dir`, keeping `dir` itself. */
async function emptyDir(dir: string): Promise<void> {
  for (const name of await readdir(dir)) await rm(join(dir, name), { recursive: true, force: true });
}

export default class ShardsRecover extends GazctlCommand {
  static override summary = "Rebuild a shard's local files (e.g. its RocksDB) from its recovery log.";
  static override description = `Plays the recovery log of shard --id into the directory --dir, as a consumer does when it recovers the shard, and stops at the log's write head: --dir then holds the shard's store files as of that point (for inspection, a backup, or seeding a new deployment). Nothing is written back: no hints, no log appends.

The hints played are the shard's primary hints when the consumer has them, else its first stored backup hints (backup.0 first), else none, which replays the whole log from its first offset. The log is <recovery_log_prefix>/<id> of the shard's spec; a shard without a recovery log is an error.

The log's write head is taken from the broker without appending to the log, so a suspended recovery log stays suspended (upstream appends an empty "barrier" to each log it reads, which wakes a suspended log).

--dir is created when missing. An existing --dir must be empty: --force deletes what it holds first (upstream always deletes --dir). If the playback fails or is interrupted (Ctrl-C), what it wrote is removed again, and a --dir it created too.

At the end one line on stderr names the files recovered and their bytes; -o json prints {"shard","log","dir","hints","files":[...],"bytes",...} on stdout instead.`;
  static override examples = [
    { description: 'Recover a shard into a new directory', command: '<%= config.bin %> shards recover --id shard-007 -d /tmp/shard-007' },
    { description: 'Replace an earlier recovery', command: '<%= config.bin %> shards recover --id shard-007 -d /tmp/shard-007 --force' },
    { description: 'A report for a script', command: '<%= config.bin %> shards recover --id shard-007 -d /tmp/shard-007 -o json' },
  ];
  static override group = 'shards' as const;
  static override baseFlags = shardsBaseFlags;
  static override flags = oclifFlags(OPTIONS);
  static override optionSet(): OptionSet {
    return OPTIONS;
  }

  async run(): Promise<void> {
    const flags = await this.resolve(OPTIONS);
    const id = flags.id ?? '';
    if (id === '') throw new UsageError('missing required flag --id (the shard to recover)');
    if ((flags.dir ?? '') === '') throw new UsageError('missing required flag -d/--dir (the directory to recover into)');
    const dir = resolvePath(flags.dir!);
    const state = await dirState(dir);
    if (state === 'not-a-directory') throw new UsageError(`-d/--dir ${dir} is not a directory`);
    if (state === 'not-empty' && !flags.force) {
      throw new UsageError(`-d/--dir ${dir} is not empty (pass --force to delete what it holds first, or name a new directory)`);
    }

    const ac = new AbortController();
    const onSignal = () => ac.abort(new GazctlError('interrupted'));
    process.once('SIGINT', onSignal);
    process.once('SIGTERM', onSignal);
    const shards = makeShardClient(this.serviceOptions('consumer'), this.log_);
    const journals = this.journalClient();
    /** The top directory this run made (--dir or an ancestor), when --dir was missing. */
    let created: string | undefined;
    let touched = false;
    try {
      const listing = await shards.list({ include: { labels: [{ name: 'id', value: id, prefix: false }] }, exclude: { labels: [] } }, { signal: ac.signal });
      const found = listing.shards.filter((s) => s.spec?.id === id);
      if (found.length !== 1) throw new GazctlError(`no shard exists with id ${JSON.stringify(id)}`);
      const spec = found[0]!.spec!;
      const log = recoveryLogOf(spec);
      if (log === undefined) throw new GazctlError(`shard ${id} has no recovery log (its spec sets no recovery_log_prefix)`);
      const res = await shards.getHints(id, { signal: ac.signal });
      this.log_.debug('fetched hints', { shard: id, primary: res.primary_hints?.hints !== undefined, backups: res.backup_hints.map((b) => b.hints !== undefined) });
      const picked = pickRecoveryHints(res);
      const hints = picked?.hints ?? emptyHints(log);
      const source = picked?.source ?? 'none (full replay)';

      touched = true;
      if (state === 'missing') created = (await mkdir(dir, { recursive: true })) ?? dir;
      else if (state === 'not-empty') await emptyDir(dir);

      // The heads come from the brokers' write heads, read without appending (upstream appends
      // an empty barrier to each log, which resumes a suspended one).
      const logSource = journalLogSource(journals, { head: 'write-head', signal: ac.signal });
      const result = await playLog(logSource, hints, dir, {
        signal: ac.signal,
        onEvent: (e) => {
          if (e.kind === 'linked') this.log_.info('linked file', { path: e.path, fnode: e.fnode, size: e.size });
          else if (e.kind === 'desync') this.log_.warn('recovery log frame is corrupt; skipped', { log: e.log, from: e.from, to: e.to });
          else if (e.kind === 'jump') this.log_.warn('recovery log content is missing; skipped', { log: e.log, from: e.from, to: e.to });
          else this.log_.debug(`playback ${e.kind}`, { ...e });
        },
      });
      this.log_.info('completed playback', { shard: id, log, dir });
      // What the recovered files hold (a file under two paths counts once); result.bytes also
      // counts the data of files that were deleted later in the log.
      const seen = new Map(result.files.map((f) => [f.fnode, f.size]));
      const bytes = [...seen.values()].reduce((a, b) => a + b, 0n);
      const report = {
        shard: id,
        log,
        dir,
        hints: source,
        files: result.files.map((f) => ({ path: f.path, size: f.size })),
        properties: result.properties,
        bytes,
        bytes_played: result.bytes,
        heads: Object.fromEntries(result.heads),
        ops_applied: result.opsApplied,
        ops_skipped: result.opsSkipped,
      };
      if (flags.format === 'json') process.stdout.write(jsonWithBigints(report) + '\n');
      else {
        const props = result.properties.length > 0 ? ` and ${result.properties.length} property file(s)` : '';
        process.stderr.write(
          `recovered shard ${id} into ${dir}: ${result.files.length} file(s)${props}, ${formatBytes(Number(bytes))}, from ${log} through offset ${result.heads.get(log) ?? 0n} (hints: ${source}; ${result.opsApplied} op(s) applied, ${result.opsSkipped} skipped)\n`,
        );
      }
    } catch (err) {
      if (touched) {
        // playLog removes --dir on failure; put back what was there before (an empty directory),
        // or remove every directory this run made.
        if (created !== undefined) await rm(created, { recursive: true, force: true }).catch(() => undefined);
        else await rm(dir, { recursive: true, force: true }).then(() => mkdir(dir, { recursive: true })).catch(() => undefined);
      }
      if (ac.signal.aborted) {
        process.stderr.write(`gazctl: shards recover interrupted${touched ? `; removed what it wrote under ${dir}` : ''}\n`);
        process.exitCode = 130;
        return;
      }
      if (touched) throw new GazctlError(`recovery of shard ${id} failed (removed what it wrote under ${dir}): ${(err as Error).message}`, { cause: err });
      throw err;
    } finally {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
      shards.close();
      journals.close();
    }
  }
}
