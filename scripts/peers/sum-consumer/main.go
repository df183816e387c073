// sum-consumer is the reference Go consumer application of gazctl's tests: a real
// Gazette consumer (runconsumer, v0.103.0) that the `shards` commands can be run against.
//
// Each shard reads NDJSON records such as {"key":"a","value":3} from its source journals
// and adds `value` to a running total of `key`. The totals live in a consumer.JSONFileStore
// (no RocksDB, so no cgo), which writes them into a `state.json` file recorded in the
// shard's recovery log. Playing that log back (`gazctl shards recover`) therefore yields a
// state.json whose second JSON document is the map of totals.
//
// Usage: sum-consumer serve --etcd.prefix=/gazette/consumers/sums --consumer.port=... ...
// (see docs/test-consumer.md).
package main

import (
	"fmt"

	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
	"go.gazette.dev/core/consumer"
	pc "go.gazette.dev/core/consumer/protocol"
	"go.gazette.dev/core/consumer/recoverylog"
	"go.gazette.dev/core/mainboilerplate/runconsumer"
	"go.gazette.dev/core/message"
)

// record is one input line. UUID deliberately has no json tag: plain lines written by
// `gazctl journals append` carry none, decode to the zero UUID, and the consumer's
// sequencer takes a zero UUID as "outside any transaction, committed now".
type record struct {
	UUID  message.UUID
	Key   string `json:"key"`
	Value int64  `json:"value"`
}

func (r *record) GetUUID() message.UUID                         { return r.UUID }
func (r *record) SetUUID(u message.UUID)                        { r.UUID = u }
func (r *record) NewAcknowledgement(pb.Journal) message.Message { return new(record) }

// sums is the state a shard keeps: total of `value` by `key`.
type sums map[string]int64

// summer implements runconsumer.Application.
type summer struct{}

// NewConfig: only the standard consumer flags (--consumer.*, --broker.*, --etcd.*, --log.*).
func (summer) NewConfig() runconsumer.Config { return new(struct{ runconsumer.BaseConfig }) }

// InitApplication: nothing to register beyond the Shard service runconsumer serves.
func (summer) InitApplication(runconsumer.InitArgs) error { return nil }

// NewStore opens the shard's JSON file store, recovered from its recovery log. A shard
// without recovery_log_prefix gets no recorder (nil), which the JSON store cannot work
// without, so such a shard is failed with an error that says why. The error comes with a
// placeholder store rather than none: on an error with neither store nor recorder, Gazette
// v0.103.0 cleans up the recorder's directory and so dereferences the nil recorder, which
// takes the whole process down instead of failing the one shard.
func (summer) NewStore(shard consumer.Shard, rec *recoverylog.Recorder) (consumer.Store, error) {
	if rec == nil {
		return refusedStore{}, fmt.Errorf("shard %q has no recovery_log_prefix: sum-consumer keeps its sums "+
			"in a recorded JSON file and needs a recovery log", shard.Spec().Id)
	}
	var state = make(sums)
	return consumer.NewJSONFileStore(rec, &state)
}

// refusedStore stands in for the store of a refused shard. The shard fails before it is
// used; only Destroy is called, at tear-down, and it has nothing to release.
type refusedStore struct{}

func (refusedStore) StartCommit(consumer.Shard, pc.Checkpoint, consumer.OpFutures) consumer.OpFuture {
	return client.FinishedOperation(fmt.Errorf("shard was refused: no store"))
}
func (refusedStore) RestoreCheckpoint(consumer.Shard) (pc.Checkpoint, error) {
	return pc.Checkpoint{}, fmt.Errorf("shard was refused: no store")
}
func (refusedStore) Destroy() {}

// NewMessage: every source journal holds records.
func (summer) NewMessage(*pb.JournalSpec) (message.Message, error) { return new(record), nil }

// ConsumeMessage adds the record into the store's in-memory totals; the store writes them
// out at the transaction's commit.
func (summer) ConsumeMessage(_ consumer.Shard, store consumer.Store, env message.Envelope, _ *message.Publisher) error {
	var r = env.Message.(*record)
	var state = store.(*consumer.JSONFileStore).State.(*sums)
	(*state)[r.Key] += r.Value
	return nil
}

// FinalizeTxn: the totals are already in the store's state; nothing to flush.
func (summer) FinalizeTxn(consumer.Shard, consumer.Store, *message.Publisher) error { return nil }

func main() { runconsumer.Main(summer{}) }
