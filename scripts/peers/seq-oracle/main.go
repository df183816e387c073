// seq-oracle runs Gazette's own message code (v0.103.0) over inputs given on stdin, so that our
// TypeScript port can be compared with it (test/unit/lib/message/sequencer-oracle.test.ts and
// publisher tests). It is a test peer built by scripts/install-peers.sh.
//
//	seq-oracle sequence   a script of journal contents and reads; prints what the Sequencer
//	                      decides, dequeues and checkpoints (format below)
//	seq-oracle read       NDJSON records as `<journal>\t<line>`; decodes each with the JSON
//	                      framing into a record like sum-consumer's, sequences them, and prints
//	                      the committed ones
//	seq-oracle decode     one JSON line each; prints the record decoded (`<uuid> <key as hex>
//	                      <value>`) or `ERROR`
//	seq-oracle encode     `<uuid>\t<key as a JSON string>\t<value>` each; prints the line the
//	                      JSON framing writes for that record
//	seq-oracle publish <broker address>
//	                      Gazette's Publisher writing sum-consumer records to real journals, per a
//	                      script (below): Go-written transactions for tests of our consumers
//
// Script of `publish` (one command a line; <p> names a publisher, each its own producer):
//
//	U <p> <journal> <key> <value>   PublishUncommitted a record
//	C <p> <journal> <key> <value>   PublishCommitted a record
//	A <p>                           wait for the appends so far, BuildAckIntents, append them
//	                                and remember them as <p>'s last checkpoint
//	R <p>                           append <p>'s remembered intents again: what a producer that
//	                                recovered that checkpoint does (rolls back what it published since)
//
// and prints `ACK <journal> <uuid>` per intent appended, then `DONE` once every append committed.
//
// Script of `sequence` (one command a line, fields separated by spaces):
//
//	N <ring>                          new Sequencer with no state
//	M <journal> <begin> <end> <uuid>  a message of the journal's content (in offset order)
//	Q <journal>                       if a committed sequence is being dequeued, Step once;
//	                                  otherwise read the journal's next message and queue it
//	C <horizon-ns>                    Checkpoint with that prune horizon
//	R <ring> <horizon-ns>             Checkpoint, then restart: a new Sequencer from it, and
//	                                  each journal's reader back at its read-through offset
//	X                                 forget everything: a new, independent history follows
//
// Output: `O <outcome>`, `RR <journal> <from> <to>` (replay started), `D <journal> <begin> <end>
// <uuid>` (dequeued), `EOF` (sequence done), `-` (journal read to its end), `P <hasPending>`,
// `T <journal> <offset>` and `S <journal> <producer> <lastAck> <begin>` (checkpoint, sorted),
// `E` (Step failed) and `PANIC` (the Sequencer panicked), after which the history's remaining
// commands are skipped, and `X`.
package main

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"go.gazette.dev/core/labels"
	"go.gazette.dev/core/message"
)

type msg struct{ uuid message.UUID }

func (m *msg) GetUUID() message.UUID                         { return m.uuid }
func (m *msg) SetUUID(u message.UUID)                        { m.uuid = u }
func (m *msg) NewAcknowledgement(pb.Journal) message.Message { return new(msg) }

// record is sum-consumer's record, verbatim.
type record struct {
	UUID  message.UUID
	Key   string `json:"key"`
	Value int64  `json:"value"`
}

func (r *record) GetUUID() message.UUID                         { return r.UUID }
func (r *record) SetUUID(u message.UUID)                        { r.UUID = u }
func (r *record) NewAcknowledgement(pb.Journal) message.Message { return new(record) }

var out = bufio.NewWriter(os.Stdout)

func main() {
	defer out.Flush()
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: seq-oracle sequence|read|decode|encode|publish < input")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "sequence":
		runSequence()
	case "read":
		runRead()
	case "decode":
		runDecode()
	case "encode":
		runEncode()
	case "publish":
		if len(os.Args) != 3 {
			fmt.Fprintln(os.Stderr, "usage: seq-oracle publish <broker address> < script")
			os.Exit(2)
		}
		runPublish(os.Args[2])
	default:
		fmt.Fprintln(os.Stderr, "usage: seq-oracle sequence|read|decode|encode < input")
		os.Exit(2)
	}
}

type state struct {
	content map[pb.Journal][]message.Envelope
	cursor  map[pb.Journal]int
	seq     *message.Sequencer
	// Producer states of the last checkpoint, for a restart.
	restartStates []message.ProducerState
}

func envString(e *message.Envelope) string {
	return fmt.Sprintf("%s %d %d %s", e.Journal.Name, e.Begin, e.End, e.GetUUID().String())
}

func (s *state) checkpoint(horizon time.Duration) pb.Offsets {
	fmt.Fprintf(out, "P %v\n", s.seq.HasPending())
	var offsets, states = s.seq.Checkpoint(horizon)
	var js []string
	for j := range offsets {
		js = append(js, string(j))
	}
	sort.Strings(js)
	for _, j := range js {
		fmt.Fprintf(out, "T %s %d\n", j, offsets[pb.Journal(j)])
	}
	var lines []string
	for _, st := range states {
		lines = append(lines, fmt.Sprintf("S %s %s %d %d", st.Journal, hex.EncodeToString(st.Producer[:]), st.LastAck, st.Begin))
	}
	sort.Strings(lines)
	for _, l := range lines {
		fmt.Fprintln(out, l)
	}
	var cp = make(pb.Offsets, len(offsets))
	for j, o := range offsets {
		cp[j] = o
	}
	// Restarting consumers restore from a serialized checkpoint: states are copied too.
	s.restartStates = append(s.restartStates[:0], states...)
	return cp
}

func (s *state) step() bool {
	if err := s.seq.Step(); err == io.EOF {
		fmt.Fprintln(out, "EOF")
	} else if err != nil {
		fmt.Fprintln(out, "E")
		return false
	} else {
		fmt.Fprintf(out, "D %s\n", envString(s.seq.Dequeued))
	}
	return true
}

func (s *state) exec(f []string) (ok bool) {
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintln(out, "PANIC")
			ok = false
		}
	}()
	switch f[0] {
	case "N":
		s.seq = message.NewSequencer(nil, nil, atoi(f[1]))
	case "M":
		var u, err = uuid.Parse(f[4])
		if err != nil {
			panic(err)
		}
		var j = pb.Journal(f[1])
		s.content[j] = append(s.content[j], message.Envelope{
			Journal: &pb.JournalSpec{Name: j}, Begin: int64(atoi(f[2])), End: int64(atoi(f[3])), Message: &msg{uuid: u},
		})
	case "Q":
		if s.seq.Dequeued != nil {
			return s.step()
		}
		var j = pb.Journal(f[1])
		var i = s.cursor[j]
		if i >= len(s.content[j]) {
			fmt.Fprintln(out, "-")
			return true
		}
		s.cursor[j] = i + 1
		var env = s.content[j][i]
		env.Message = &msg{uuid: env.GetUUID()} // a fresh message per read, as a reader decodes
		var outcome = s.seq.QueueUncommitted(env)
		fmt.Fprintf(out, "O %s\n", outcome)
		switch outcome {
		case message.QueueAckCommitReplay:
			var rj, from, to = s.seq.ReplayRange()
			fmt.Fprintf(out, "RR %s %d %d\n", rj, from, to)
			var items []message.Envelope
			for _, e := range s.content[rj] {
				if e.Begin >= from && e.End <= to {
					e.Message = &msg{uuid: e.GetUUID()}
					items = append(items, e)
				}
			}
			s.seq.StartReplay(message.IteratorFunc(func() (message.Envelope, error) {
				if len(items) == 0 {
					return message.Envelope{}, io.EOF
				}
				var e = items[0]
				items = items[1:]
				return e, nil
			}))
			return s.step()
		case message.QueueAckCommitRing, message.QueueAckEmpty, message.QueueOutsideCommit:
			return s.step()
		}
	case "C":
		s.checkpoint(time.Duration(atoi(f[1])))
	case "R":
		var offsets = s.checkpoint(time.Duration(atoi(f[2])))
		s.seq = message.NewSequencer(offsets, s.restartStates, atoi(f[1]))
		for j, items := range s.content {
			var i = 0
			for i < len(items) && items[i].Begin < offsets[j] {
				i++
			}
			s.cursor[j] = i
		}
	default:
		panic("bad command " + f[0])
	}
	return true
}

func runSequence() {
	var s *state
	var failed bool
	var sc = bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var f = strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		} else if f[0] == "X" || s == nil {
			s = &state{content: map[pb.Journal][]message.Envelope{}, cursor: map[pb.Journal]int{}}
			failed = false
			if f[0] == "X" {
				fmt.Fprintln(out, "X")
				continue
			}
		}
		if !failed && !s.exec(f) {
			failed = true
		}
	}
}

func atoi(s string) int {
	var n, err = strconv.ParseInt(s, 10, 64)
	if err != nil {
		panic(err)
	}
	return int(n)
}

// runRead decodes records with Gazette's JSON framing and sequences them read-committed, one
// journal after the other in input order, and prints each committed record as
// `<journal> <begin> <end> <uuid> <flags> <key> <value>`.
func runRead() {
	var framing, err = message.FramingByContentType(labels.ContentType_JSONLines)
	if err != nil {
		panic(err)
	}
	var seq = message.NewSequencer(nil, nil, 1024)
	var offsets = map[pb.Journal]int64{}
	var content = map[pb.Journal][]message.Envelope{}
	var sc = bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var parts = strings.SplitN(sc.Text(), "\t", 2)
		var j = pb.Journal(parts[0])
		var line = parts[1] + "\n"
		var rec = new(record)
		if err := framing.NewUnmarshalFunc(bufio.NewReader(strings.NewReader(line)))(rec); err != nil {
			fmt.Fprintf(out, "DECODE-ERROR %s %v\n", j, err)
			continue
		}
		var env = message.Envelope{Journal: &pb.JournalSpec{Name: j}, Begin: offsets[j], End: offsets[j] + int64(len(line)), Message: rec}
		offsets[j] = env.End
		content[j] = append(content[j], env)
		if seq.QueueUncommitted(env) == message.QueueAckCommitReplay {
			var rj, from, to = seq.ReplayRange()
			var items []message.Envelope
			for _, e := range content[rj] {
				if e.Begin >= from && e.End <= to {
					items = append(items, e)
				}
			}
			seq.StartReplay(message.IteratorFunc(func() (message.Envelope, error) {
				if len(items) == 0 {
					return message.Envelope{}, io.EOF
				}
				var e = items[0]
				items = items[1:]
				return e, nil
			}))
		}
		for {
			if err := seq.Step(); err == io.EOF {
				break
			} else if err != nil {
				fmt.Fprintf(out, "STEP-ERROR %v\n", err)
				return
			}
			var d = seq.Dequeued
			var r = d.Message.(*record)
			fmt.Fprintf(out, "%s %d %d %s %s %q %d\n", d.Journal.Name, d.Begin, d.End, r.UUID.String(),
				message.GetFlags(r.UUID), r.Key, r.Value)
		}
	}
}

func jsonFraming() message.Framing {
	var framing, err = message.FramingByContentType(labels.ContentType_JSONLines)
	if err != nil {
		panic(err)
	}
	return framing
}

func runDecode() {
	var framing = jsonFraming()
	var sc = bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var rec = new(record)
		if err := framing.NewUnmarshalFunc(bufio.NewReader(strings.NewReader(sc.Text()+"\n")))(rec); err != nil {
			fmt.Fprintln(out, "ERROR")
			continue
		}
		fmt.Fprintf(out, "%s %s %d\n", rec.UUID.String(), hex.EncodeToString([]byte(rec.Key)), rec.Value)
	}
}

func runEncode() {
	var framing = jsonFraming()
	var bw = bufio.NewWriter(out)
	var sc = bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var f = strings.SplitN(sc.Text(), "\t", 3)
		var rec = new(record)
		var err error
		if rec.UUID, err = uuid.Parse(f[0]); err != nil {
			panic(err)
		} else if err = json.Unmarshal([]byte(f[1]), &rec.Key); err != nil {
			panic(err)
		}
		rec.Value = int64(atoi(f[2]))
		if err = framing.Marshal(rec, bw); err != nil {
			panic(err)
		}
	}
	_ = bw.Flush()
}

func runPublish(address string) {
	// Accept the broker's URL as gazctl takes it (http://host:port) or a bare host:port.
	address = strings.TrimPrefix(strings.TrimPrefix(address, "http://"), "https://")
	var conn, err = grpc.Dial(address, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		panic(err)
	}
	var ctx = context.Background()
	var as = client.NewAppendService(ctx, pb.NewRoutedJournalClient(pb.NewJournalClient(conn), pb.NoopDispatchRouter{}))
	var pubs = map[string]*message.Publisher{}
	var last = map[string][]message.AckIntent{}
	var pub = func(name string) *message.Publisher {
		if pubs[name] == nil {
			pubs[name] = message.NewPublisher(as, nil)
		}
		return pubs[name]
	}
	var wait = func() {
		for op := range as.PendingExcept("") {
			if err := op.Err(); err != nil {
				panic(err)
			}
		}
	}
	var appendIntents = func(intents []message.AckIntent) {
		for _, ack := range intents {
			var aa = as.StartAppend(pb.AppendRequest{Journal: ack.Journal}, nil)
			_, _ = aa.Writer().Write(ack.Intent)
			if err := aa.Release(); err != nil {
				panic(err)
			}
			var rec = new(record)
			if err := json.Unmarshal(ack.Intent, rec); err != nil {
				panic(err)
			}
			fmt.Fprintf(out, "ACK %s %s\n", ack.Journal, rec.UUID)
		}
		wait()
	}
	var sc = bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var f = strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "U", "C":
			var journal = pb.Journal(f[2])
			var mapping = func(message.Mappable) (pb.Journal, string, error) {
				return journal, labels.ContentType_JSONLines, nil
			}
			var rec = &record{Key: f[3], Value: int64(atoi(f[4]))}
			var err error
			if f[0] == "U" {
				_, err = pub(f[1]).PublishUncommitted(mapping, rec)
			} else {
				_, err = pub(f[1]).PublishCommitted(mapping, rec)
			}
			if err != nil {
				panic(err)
			}
		case "A":
			wait()
			var intents, err = pub(f[1]).BuildAckIntents()
			if err != nil {
				panic(err)
			}
			// Keep copies: the intents reference the publisher's buffer.
			var kept []message.AckIntent
			for _, i := range intents {
				kept = append(kept, message.AckIntent{Journal: i.Journal, Intent: append([]byte(nil), i.Intent...)})
			}
			last[f[1]] = kept
			appendIntents(kept)
		case "R":
			wait()
			appendIntents(last[f[1]])
		default:
			panic("bad command " + f[0])
		}
	}
	wait()
	fmt.Fprintln(out, "DONE")
}
