import { Args } from '@oclif/core';
import { open, type FileHandle } from 'node:fs/promises';
import { GazctlCommand, UsageError } from '../cli/base.js';
import { inputError } from '../cli/input.js';
import { Output } from '../cli/output.js';
import { booleanOption, intOption, oclifFlags, options, resolveOptions, stringOption, type OptionSet } from '../cli/options.js';
import { findIniFile, loadIni } from '../lib/config/ini.js';
import { GazctlError } from '../lib/protocol/errors.js';
import {
  DEFAULT_LINE_TEMPLATE,
  LineTemplateError,
  LineTooLongError,
  attachUUIDs,
  compileLineTemplate,
  type LineInput,
} from '../lib/message/attach-uuids.js';

const OPTIONS = options({
  template: stringOption({
    description:
      'Go text/template of each output line, over the fields .UUID and .Line (default "{{.UUID}},{{.Line}}" and a newline). Write a newline with $\'...\\n\' quoting.',
    default: DEFAULT_LINE_TEMPLATE,
    ini: { field: 'Template' },
  }),
  'max-length': intOption({
    description: 'Longest input line allowed, in bytes, counting its newline; a longer line fails the run.',
    default: 4_194_304,
    min: 1,
    showDefault: true,
    ini: { field: 'MaxLength' },
  }),
  'skip-header': booleanOption({ description: 'Drop the first line of each input (e.g. a CSV header).', ini: { field: 'SkipHeader' } }),
});

/** Bytes read from a file at a time. */
const READ_CHUNK = 1 << 20;

export default class AttachUUIDs extends GazctlCommand {
  static override summary = 'Attach a message UUID to each line of text input.';
  static override description = `For each line of each PATH (or of stdin, when no PATH is given), makes a Gazette message UUID and writes the line through --template to stdout. The UUIDs are RFC 4122 version 1 UUIDs as Gazette writes them: one random producer id for the whole run, and a clock set to the current time that ticks by one microsecond per line, so the UUIDs of a run are unique and ordered. They are flagged as outside any transaction (committed), so readers process the messages at once.

Exactly-once processing needs every message to carry such a UUID. Attach them to a file before appending it to a journal, into a new file, then append that file: if the append fails and is run again, the messages keep their UUIDs and readers drop the duplicates. Each run uses a new producer id, and consumers keep a little state per producer id, so join many small files into few big ones first rather than running attach-uuids on each.

Lines are split on newlines; a carriage return before the newline is dropped, and a last line without a newline is kept. The newline is not part of .Line: the template writes it. The template may use the fields {{.UUID}} and {{.Line}}, comments ({{/* ... */}}) and the trim markers {{- and -}}; other Go template actions are refused.

Needs no broker, and takes no journals or shards options. All PATHs are opened before anything is written, so a missing file fails the run with no output. Exit status 1 when a file cannot be read or a line is too long (after the lines before it were written).`;
  static override examples = [
    { description: 'Prefix CSV rows with a UUID (the default template)', command: '<%= config.bin %> attach-uuids one.csv two.csv > with-uuids.csv' },
    { description: 'The same, dropping the header row of each file', command: '<%= config.bin %> attach-uuids --skip-header one.csv two.csv' },
    { description: 'Append the UUID to each row instead', command: "<%= config.bin %> attach-uuids input.csv --template=$'{{.Line}},{{.UUID}}\\n'" },
    { description: 'Wrap JSON lines with a UUID', command: "<%= config.bin %> attach-uuids input.ndjson --template=$'{\"uuid\":\"{{.UUID}}\",\"record\":{{.Line}}}\\n'" },
    {
      description: 'Attach UUIDs into a new file, then append it',
      command: '<%= config.bin %> attach-uuids events.ndjson > events.uuid.ndjson && <%= config.bin %> journals append -l name=acme/events -i events.uuid.ndjson',
    },
  ];
  static override strict = false;
  static override args = {
    // ignoreStdin: oclif would otherwise read a missing argument from piped stdin, our input.
    PATH: Args.string({ required: false, ignoreStdin: true, description: 'Input files (default: stdin).' }),
  };
  static override flags = oclifFlags(OPTIONS);
  static override optionSet(): OptionSet {
    return OPTIONS;
  }

  async run(): Promise<void> {
    // A command of its own, outside the journals and shards groups: its options come from the
    // command line, then the [attach-uuids] section of gazctl.ini, then the defaults.
    const { flags, raw, argv } = await this.parse(AttachUUIDs);
    const given = new Set(raw.flatMap((r) => (r.type === 'flag' ? [r.flag] : [])));
    const opts = resolveOptions(OPTIONS, {
      argv: flags as Record<string, unknown>,
      given,
      ini: loadIni(findIniFile()),
      env: {},
      group: '',
      section: 'attach-uuids',
    });
    let template;
    try {
      template = compileLineTemplate(opts.template);
    } catch (err) {
      if (err instanceof LineTemplateError) throw new UsageError(`--template: ${err.message}`);
      throw err;
    }

    const paths = argv as string[];
    const files: FileHandle[] = [];
    try {
      for (const path of paths) {
        let fh: FileHandle | undefined;
        try {
          fh = await open(path, 'r');
          files.push(fh);
          if ((await fh.stat()).isDirectory()) throw Object.assign(new Error('is a directory'), { code: 'EISDIR' });
        } catch (err) {
          throw inputError(path, err);
        }
      }
      if (paths.length === 0 && process.stdin.isTTY) process.stderr.write('reading lines from stdin (end with Ctrl-D) ...\n');
      const inputs: LineInput[] =
        paths.length === 0
          ? [{ name: 'stdin', chunks: process.stdin }]
          : paths.map((name, i) => ({ name, chunks: readChunks(files[i]!, name) }));

      const out = new Output('-');
      try {
        await attachUUIDs(inputs, (chunk) => out.write(chunk), { template, maxLength: opts['max-length'], skipHeader: opts['skip-header'] });
      } catch (err) {
        if (err instanceof LineTooLongError) throw new GazctlError(`${err.message}; raise --max-length`, { cause: err });
        throw err;
      }
      await out.close();
    } finally {
      await Promise.all(files.map((f) => f.close().catch(() => {})));
    }
  }
}

/** A file's bytes in fresh chunks (attachUUIDs may keep a chunk's tail). */
async function* readChunks(fh: FileHandle, name: string): AsyncGenerator<Uint8Array> {
  for (;;) {
    const buf = Buffer.allocUnsafe(READ_CHUNK);
    let n: number;
    try {
      ({ bytesRead: n } = await fh.read(buf, 0, READ_CHUNK, null));
    } catch (err) {
      throw inputError(name, err);
    }
    if (n === 0) return;
    yield buf.subarray(0, n);
  }
}
