// Append flow control, per journal at its primary, with the same accounting as the reference
// broker so that clients see the same behaviour on both implementations:
//
//   - max rate: a journal may be appended to at most `min(spec.max_append_rate,
//     --broker.max-append-rate)` bytes per second. The global flag only lowers a journal's own
//     non-zero rate; a journal whose spec says 0 is not limited, whatever the flag (this is what
//     the reference broker does, though the spec's comment suggests otherwise). A journal
//     starts with one second of credit, and unused credit is banked up to ten seconds' worth,
//     so short bursts after idle time go through at once. A chunk that exceeds the balance is
//     held until enough credit has accrued; only then is the next message read from the client
//     (gRPC's own flow control then slows the client down).
//   - min rate: a client must keep streaming at least `--broker.min-append-rate` bytes per
//     second (default 64 KiB/s). `spent` starts at one second's worth, falls at that rate as
//     time passes and rises with every byte admitted (capped at one second's worth); reaching
//     zero aborts the RPC, so a stalled client cannot hold the journal's pipeline forever.
//   - when the journal's route changes during the RPC, the max rate is lifted for the rest of
//     it: the append is what makes the new topology consistent, so it should finish fast.
//
// The state is kept per journal (on its replica) across RPCs: a new RPC keeps the prior balance
// and accrues what the time since the last tick earned. Time is in milliseconds; the evaluation
// quantum is 50 ms.

/** How often the accounting is evaluated while an RPC streams, in milliseconds. */
export const FLOW_QUANTUM_MS = 50;
/** Initial credit, for both rates, in seconds. */
const BURST_SECONDS = 1;
/** Unused max-rate credit is banked up to this many seconds' worth. */
const BANK_FACTOR = 10;

export const FLOW_UNDERFLOW_MESSAGE = "client stream didn't sustain the minimum append data rate";

export class AppendFlowControl {
  /** Bytes per second; 0 is no limit. */
  maxRate = 0;
  /** Bytes per second the client must sustain. */
  minRate = 0;
  /** Bytes that may be admitted before throttling. */
  balance = 0;
  /** Bytes admitted within the last second's window; reaching 0 is an underflow. */
  spent = 0;
  /** Bytes of the current chunk still waiting for credit. */
  charge = 0;
  /** Time of the last update, in ms; 0 before the first RPC. */
  lastMillis = 0;
  /** Chunks of the current RPC, and how many of them had to wait. */
  totalChunks = 0;
  delayedChunks = 0;

  /**
   * Start the accounting of a new Append RPC of a journal whose spec allows `specMaxRate`
   * bytes per second, under the broker's `globalMaxRate` and `globalMinRate` flags.
   */
  reset(specMaxRate: number, globalMaxRate: number, globalMinRate: number, nowMillis: number): void {
    this.maxRate = specMaxRate;
    if (globalMaxRate !== 0 && globalMaxRate < this.maxRate) this.maxRate = globalMaxRate;
    this.charge = 0;
    this.totalChunks = 0;
    this.delayedChunks = 0;
    this.minRate = 0;
    this.spent = 0;
    if (this.lastMillis === 0) {
      this.balance = this.maxRate * BURST_SECONDS;
      this.lastMillis = nowMillis;
    } else {
      this.onTick(nowMillis);
    }
    this.minRate = globalMinRate;
    this.spent = globalMinRate * BURST_SECONDS;
  }

  /** Advance the clock to `millis`; false when the client fell below the minimum rate. */
  onTick(millis: number): boolean {
    // A clock stepped backwards: wait for it to catch up.
    if (millis < this.lastMillis) return true;
    const elapsed = millis - this.lastMillis;
    this.balance = Math.min(this.balance + Math.floor((this.maxRate * elapsed) / 1000), this.maxRate * BANK_FACTOR);
    this.spent -= Math.min(Math.floor((this.minRate * elapsed) / 1000), this.spent);
    this.lastMillis = millis;
    this.debit();
    return this.spent > 0;
  }

  /** A chunk of `length` bytes arrived; it may be passed on once `charge` is back to 0. */
  onChunk(length: number): void {
    if (this.charge !== 0) throw new Error('flow control: a chunk arrived while another waits for credit');
    this.charge = length;
    this.debit();
    if (this.charge !== 0) this.delayedChunks++;
    this.totalChunks++;
  }

  /** The journal's route changed: no max rate for the rest of this RPC. */
  onInvalidate(): void {
    this.maxRate = 0;
    this.debit();
  }

  private debit(): void {
    const d = Math.min(this.balance, this.charge);
    this.balance -= d;
    this.charge -= d;
    this.spent = Math.min(this.spent + d, this.minRate);
    if (this.maxRate === 0) {
      // No max rate: the balance is unlimited.
      this.spent = Math.min(this.spent + this.charge, this.minRate);
      this.charge = 0;
    }
  }
}
