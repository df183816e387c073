// Message UUIDs as Gazette writes them: RFC 4122 version 1 UUIDs whose parts Gazette gives its
// own meaning.
//
//   bytes 0-3    timestamp bits 0-31    ┐ the timestamp: 100 ns ticks since the start of the
//   bytes 4-5    timestamp bits 32-47   │ Gregorian calendar (1582-10-15), 60 bits
//   bytes 6-7    version 1 (0x1000) | timestamp bits 48-59
//   bytes 8-9    variant (0b10) | 4-bit sequence counter | 10 bits of flags
//   bytes 10-15  the producer id (6 random bytes, multicast bit set: not a real MAC address)
//
// A Clock is the 60-bit timestamp shifted left by 4, with the sequence counter in its low 4 bits,
// so that one number orders every UUID of a producer. Ticking a clock adds one microsecond
// (10 ticks of 100 ns, that is 160 once shifted); refreshing it from wall time never moves it
// back. The flags say how a message takes part in a transaction: outside one (processed at
// once), continuing one, or acknowledging (committing) the ones before it.
import { randomBytes } from 'node:crypto';
import { GazctlError } from '../protocol/errors.js';

/** 16 bytes. */
export type UUID = Uint8Array;
/** 6 bytes: the node id of a v1 UUID, which identifies the producer of a sequence of messages. */
export type ProducerID = Uint8Array;
/** The 60-bit timestamp (100 ns ticks since 1582-10-15) shifted left by 4, plus a 4-bit sequence counter. */
export type Clock = bigint;

/** Transaction flags, the low 10 bits of a UUID's clock sequence. */
export const MessageFlags = {
  /** Not part of a transaction: readers process it at once. */
  OUTSIDE_TXN: 0x0,
  /** Begins or continues a transaction: processed once a later ACK_TXN commits it. */
  CONTINUE_TXN: 0x1,
  /** Acknowledges (commits) the producer's CONTINUE_TXN messages with smaller clocks. */
  ACK_TXN: 0x2,
} as const;

export const MAX_FLAGS = 0x3ff;

/** 100 ns intervals from 1582-10-15 (the Gregorian reform, RFC 4122's epoch) to 1970-01-01. */
export const GREGORIAN_TO_UNIX_100NS = 122_192_928_000_000_000n;

/** One microsecond in clock units: 10 ticks of 100 ns, shifted past the 4 sequence bits. */
export const CLOCK_TICK = 160n;

const MASK64 = (1n << 64n) - 1n;

export class UUIDFormatError extends GazctlError {}

/** A new random producer id: 6 bytes from a cryptographic source, with the multicast bit set. */
export function newProducerID(): ProducerID {
  const id = new Uint8Array(randomBytes(6));
  id[0]! |= 0x01;
  return id;
}

/** The clock of a wall time given as unix nanoseconds (precise to 100 ns, sequence counter 0). */
export function clockFromUnixNanos(ns: bigint): Clock {
  return ((ns / 100n + GREGORIAN_TO_UNIX_100NS) << 4n) & MASK64;
}

/** The clock of a wall time: a Date, or unix milliseconds. */
export function clockFromTime(t: Date | number): Clock {
  const ms = typeof t === 'number' ? t : t.getTime();
  return clockFromUnixNanos(BigInt(Math.floor(ms)) * 1_000_000n);
}

/** The wall time of a clock, as unix nanoseconds (a multiple of 100; the sequence counter is dropped). */
export function clockToUnixNanos(clock: Clock): bigint {
  return ((clock >> 4n) - GREGORIAN_TO_UNIX_100NS) * 100n;
}

function checkProducer(producer: ProducerID): void {
  if (producer.length !== 6) throw new UUIDFormatError(`a producer id is 6 bytes, got ${producer.length}`);
}

/** Builds the v1 UUID of `producer` at `clock` with `flags` (0 to 0x3ff). */
export function buildUUID(producer: ProducerID, clock: Clock, flags: number): UUID {
  checkProducer(producer);
  if (!Number.isInteger(flags) || flags < 0 || flags > MAX_FLAGS) throw new UUIDFormatError(`flags take the low 10 bits only, got ${flags}`);
  const c = clock & MASK64;
  const out = new Uint8Array(16);
  const v = new DataView(out.buffer);
  v.setUint32(0, Number((c >> 4n) & 0xffff_ffffn));
  v.setUint16(4, Number((c >> 36n) & 0xffffn));
  v.setUint16(6, Number((c >> 52n) & 0x0fffn) | 0x1000);
  v.setUint16(8, 0x8000 | (Number(c & 0xfn) << 10) | flags);
  out.set(producer, 10);
  return out;
}

function checkUUID(uuid: UUID): DataView {
  if (uuid.length !== 16) throw new UUIDFormatError(`a UUID is 16 bytes, got ${uuid.length}`);
  return new DataView(uuid.buffer, uuid.byteOffset, 16);
}

/** The producer id (node id) of a UUID. */
export function getProducerID(uuid: UUID): ProducerID {
  checkUUID(uuid);
  return uuid.slice(10, 16);
}

/** The clock (timestamp and sequence counter) of a UUID. */
export function getClock(uuid: UUID): Clock {
  if (uuid.length !== 16) checkUUID(uuid);
  const lo32 = ((uuid[0]! << 24) | (uuid[1]! << 16) | (uuid[2]! << 8) | uuid[3]!) >>> 0; // timestamp bits 0-31
  const hi28 = ((uuid[6]! & 0x0f) << 24) | (uuid[7]! << 16) | (uuid[4]! << 8) | uuid[5]!; // bits 32-59 (the version nibble is not part of the clock)
  const counter = (uuid[8]! >> 2) & 0xf;
  // clock = timestamp << 4 | counter, assembled as two 32-bit halves and read as one uint64:
  // a single BigInt is made (this runs for every message a consumer sequences).
  CLOCK_SCRATCH.setUint32(0, ((hi28 << 4) | (lo32 >>> 28)) >>> 0);
  CLOCK_SCRATCH.setUint32(4, ((lo32 << 4) | counter) >>> 0);
  return CLOCK_SCRATCH.getBigUint64(0);
}

const CLOCK_SCRATCH = new DataView(new ArrayBuffer(8));

/** True when a UUID's clock is zero (as for the all-zero UUID of a message without one), without making a BigInt. */
export function hasZeroClock(uuid: UUID): boolean {
  return uuid.length === 16 && uuid[0] === 0 && uuid[1] === 0 && uuid[2] === 0 && uuid[3] === 0 && uuid[4] === 0 && uuid[5] === 0 && (uuid[6]! & 0x0f) === 0 && uuid[7] === 0 && (uuid[8]! & 0x3c) === 0;
}

/** The 10 flag bits of a UUID. */
export function getFlags(uuid: UUID): number {
  if (uuid.length !== 16) checkUUID(uuid);
  return ((uuid[8]! << 8) | uuid[9]!) & MAX_FLAGS;
}

/** The name of a flags value: OUTSIDE_TXN, CONTINUE_TXN, ACK_TXN, or Flags(<hex>). */
export function flagsName(flags: number): string {
  switch (flags) {
    case MessageFlags.OUTSIDE_TXN:
      return 'OUTSIDE_TXN';
    case MessageFlags.CONTINUE_TXN:
      return 'CONTINUE_TXN';
    case MessageFlags.ACK_TXN:
      return 'ACK_TXN';
    default:
      return `Flags(${flags.toString(16)})`;
  }
}

// Two ASCII hex digits per byte value.
const HEX_HI = new Uint8Array(256);
const HEX_LO = new Uint8Array(256);
const DIGITS = '0123456789abcdef';
for (let b = 0; b < 256; b++) {
  HEX_HI[b] = DIGITS.charCodeAt(b >> 4);
  HEX_LO[b] = DIGITS.charCodeAt(b & 15);
}
const DASH = 0x2d;
/** Where the 16 bytes' hex digits go in the 36-character form. */
const HEX_POS = [0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34];

/** Length of the canonical text form. */
export const UUID_STRING_LENGTH = 36;

/** The canonical text form: 36 characters, lowercase hex, dashes after 8, 12, 16 and 20 digits. */
export function formatUUID(uuid: UUID): string {
  checkUUID(uuid);
  const out = Buffer.allocUnsafe(UUID_STRING_LENGTH);
  writeUUIDText(uuid, out, 0);
  return out.toString('latin1');
}

function writeUUIDText(uuid: UUID, out: Uint8Array, at: number): void {
  for (let i = 0; i < 16; i++) {
    const b = uuid[i]!;
    out[at + HEX_POS[i]!] = HEX_HI[b]!;
    out[at + HEX_POS[i]! + 1] = HEX_LO[b]!;
  }
  out[at + 8] = out[at + 13] = out[at + 18] = out[at + 23] = DASH;
}

const CANONICAL = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;

/** Parses the 36-character text form (hex digits of either case). */
export function parseUUID(text: string): UUID {
  if (!CANONICAL.test(text)) throw new UUIDFormatError(`not a UUID (expected 8-4-4-4-12 hex digits): ${JSON.stringify(text)}`);
  return new Uint8Array(Buffer.from(text.replace(/-/g, ''), 'hex'));
}

const TICK = 160;
const TWO32 = 0x1_0000_0000;

/**
 * A producer's clock: it ticks by one microsecond per message and can be refreshed from wall
 * time, which moves it forward only (a refresh to an earlier time, or to a time it has ticked
 * past, leaves it as it is). The value is held as two 32-bit halves so that ticking and writing
 * UUIDs need no BigInt arithmetic.
 */
export class MessageClock {
  /** @internal high 32 bits */
  hi = 0;
  /** @internal low 32 bits */
  lo = 0;

  constructor(initial: Clock = 0n) {
    this.set(initial);
  }

  /** A clock set to a wall time (a Date or unix milliseconds; default now). */
  static now(t: Date | number = Date.now()): MessageClock {
    return new MessageClock(clockFromTime(t));
  }

  get value(): Clock {
    return (BigInt(this.hi) << 32n) | BigInt(this.lo);
  }

  /** Advances by one microsecond and returns the new value. */
  tick(): Clock {
    this.advance();
    return this.value;
  }

  /** @internal tick without building a BigInt */
  advance(): void {
    const lo = this.lo + TICK;
    if (lo >= TWO32) {
      this.lo = lo - TWO32;
      this.hi = (this.hi + 1) >>> 0;
    } else {
      this.lo = lo;
    }
  }

  /** Moves the clock forward to a wall time (Date, unix milliseconds, or unix nanoseconds as a bigint), never back. */
  update(t: Date | number | bigint): void {
    const next = typeof t === 'bigint' ? clockFromUnixNanos(t) : clockFromTime(t);
    if (next > this.value) this.set(next);
  }

  private set(v: Clock): void {
    const c = v & MASK64;
    this.hi = Number(c >> 32n);
    this.lo = Number(c & 0xffff_ffffn);
  }
}

/**
 * UUIDs of one producer on one clock, ticking the clock once per UUID: the fast path for writing
 * many (attach-uuids), straight into an output buffer as text.
 */
export class UUIDSequence {
  private readonly tail = new Uint8Array(13); // "-" and the producer id's 12 hex digits

  constructor(
    readonly producer: ProducerID = newProducerID(),
    readonly clock: MessageClock = MessageClock.now(),
  ) {
    checkProducer(producer);
    this.tail[0] = DASH;
    for (let i = 0; i < 6; i++) {
      this.tail[1 + 2 * i] = HEX_HI[producer[i]!]!;
      this.tail[2 + 2 * i] = HEX_LO[producer[i]!]!;
    }
  }

  /** Ticks the clock and returns the UUID at the new value. */
  next(flags: number = MessageFlags.OUTSIDE_TXN): UUID {
    return buildUUID(this.producer, this.clock.tick(), flags);
  }

  /**
   * Ticks the clock and writes the new UUID's 36-character text at `out[at]`; returns `at + 36`.
   * `flags` must be 0 to 0x3ff (not checked here).
   */
  writeNext(out: Uint8Array, at: number, flags: number = MessageFlags.OUTSIDE_TXN): number {
    const c = this.clock;
    c.advance();
    const hi = c.hi;
    const lo = c.lo;
    // bytes 0-3: clock >> 4 (low 32 bits); 4-5: clock >> 36; 6-7: version | clock >> 52; 8-9: variant | counter | flags
    const b03 = ((hi << 28) | (lo >>> 4)) >>> 0;
    const b45 = (hi >>> 4) & 0xffff;
    const b67 = ((hi >>> 20) & 0x0fff) | 0x1000;
    const b89 = 0x8000 | ((lo & 0xf) << 10) | flags;
    hex8(out, at, b03 >>> 24);
    hex8(out, at + 2, (b03 >>> 16) & 0xff);
    hex8(out, at + 4, (b03 >>> 8) & 0xff);
    hex8(out, at + 6, b03 & 0xff);
    out[at + 8] = DASH;
    hex8(out, at + 9, b45 >>> 8);
    hex8(out, at + 11, b45 & 0xff);
    out[at + 13] = DASH;
    hex8(out, at + 14, b67 >>> 8);
    hex8(out, at + 16, b67 & 0xff);
    out[at + 18] = DASH;
    hex8(out, at + 19, b89 >>> 8);
    hex8(out, at + 21, b89 & 0xff);
    out.set(this.tail, at + 23);
    return at + UUID_STRING_LENGTH;
  }

  /** Ticks the clock and returns the new UUID's text form. */
  nextString(flags: number = MessageFlags.OUTSIDE_TXN): string {
    const out = Buffer.allocUnsafe(UUID_STRING_LENGTH);
    this.writeNext(out, 0, flags);
    return out.toString('latin1');
  }
}

function hex8(out: Uint8Array, at: number, b: number): void {
  out[at] = HEX_HI[b]!;
  out[at + 1] = HEX_LO[b]!;
}
