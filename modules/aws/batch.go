package aws

import (
	"context"
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/modules/sdk"
)

// Lookups of one instance by ID are batched, as the official CCM's
// DescribeInstances batcher does: concurrent calls put their IDs in one
// request. Each call runs in its own instance of the module, so the batch
// is gathered in the host's shared state. The first call to find no batch
// gathering starts one and leads it: it waits while other calls add
// their IDs (until none has for batchIdle, batchMaxWait in all, or
// maxBatchIDs), then describes them all in one request and stores each
// instance by ID, stamped with the batch, while the others wait on its
// claim of the batch's done mark and then read their own instance.
// Batches are as large as the calls in flight at once, which the
// module's pool bounds; a call alone waits batchIdle before it asks.
//
// The host offers no atomic update, so the gathering batch is read and
// written under a lock built from a claim (StateGet with claim on an
// entry always too old: the holder reads and writes, then stores the
// lock's key, which ends its claim and wakes the next waiter). A claim
// the host refuses, a native host (whose claims never make anyone wait),
// an evicted entry or a lost update only make a call describe its
// instance alone, never answer wrongly: a call answers from the batch
// only with its own instance, stamped with its batch. Absence is never
// read from a batch: EC2 fails a whole request for one unknown ID, and
// then every call of the batch asks for its own ID alone, where the API's
// InvalidInstanceID.NotFound is an answer about that ID.
const (
	// gatheringKey holds the batch gathering and its IDs
	// (gathering.encode).
	gatheringKey = "aws/describe/gathering"
	// gatheringLockKey is the lock of gatheringKey.
	gatheringLockKey = "aws/describe/lock"
	// batchDonePrefix + batch is stored when the batch is answered; its
	// leader claims it until then, so the calls in the batch wait on the
	// claim. Done marks are small and never read again, so the shared
	// state's least-recently-used eviction takes them first.
	batchDonePrefix = "aws/describe/done/"
	// batchedInstancePrefix + ID is the instance as the latest batch that
	// asked for it described it, stamped with the batch.
	batchedInstancePrefix = "aws/describe/instance/"
	// maxBatchIDs bounds the IDs of one request, as the official CCM does.
	maxBatchIDs = 500
	// batchIdle and batchMaxWait bound a batch's gathering. The official
	// CCM waits 100 ms for another ID and 1 s in all; here the callers
	// are the pool's instances, which all join within a few milliseconds
	// of each other, and a longer wait only delays the answer.
	batchIdle    = 5 * time.Millisecond
	batchMaxWait = 50 * time.Millisecond
	// gatheringMaxAge is when a batch still gathering has outlived its
	// leader (whose call ended while it gathered) and a new one replaces
	// it; its callers, woken when the leader's call ended, ask alone.
	gatheringMaxAge = time.Second
)

// gathering is the batch gathering IDs: its name and the IDs so far.
type gathering struct {
	batch string
	ids   []string
}

func (g gathering) encode() []byte {
	return []byte(strings.Join(append([]string{g.batch}, g.ids...), " "))
}

func decodeGathering(v []byte) gathering {
	if len(v) == 0 {
		return gathering{}
	}
	f := strings.Split(string(v), " ")
	return gathering{batch: f[0], ids: f[1:]}
}

// batchable reports an ID that may go in the shared state: instance IDs
// are "i-" and hex digits; anything else is described alone.
func batchable(id string) bool {
	if len(id) > 32 {
		return false
	}
	for _, c := range id[2:] {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'z') {
			return false
		}
	}
	return true
}

// describeByID describes the instance id, in a batch with concurrent
// lookups when it can, alone otherwise. Its answer is describeInstances'
// for InstanceId.1=id: the instance, or the API's error.
func (p *Provider) describeByID(ctx context.Context, id string) ([]instance, error) {
	if batchable(id) {
		if list, err, answered := p.batched(ctx, id); answered {
			return list, err
		}
	}
	return p.describeInstances(ctx, "describing instance "+id, url.Values{"InstanceId.1": {id}})
}

// batched finds id through a batch: it joins the one gathering, or starts
// and leads one. answered is false when the batch did not answer for id,
// which the caller then describes alone.
func (p *Provider) batched(ctx context.Context, id string) (list []instance, err error, answered bool) {
	p.lockGathering()
	g := decodeGathering(p.stateValue(gatheringKey, gatheringMaxAge))
	if g.batch != "" && (len(g.ids) < maxBatchIDs || contains(g.ids, id)) {
		if !contains(g.ids, id) {
			g.ids = append(g.ids, id)
			p.setState(gatheringKey, g.encode())
		}
		p.unlockGathering()
		return p.awaitBatch(ctx, g.batch, id)
	}
	g = gathering{batch: newBatch(), ids: []string{id}}
	// Claimed before the batch is published, so that every call that
	// joins it waits for its answer.
	p.host.StateGet(batchDonePrefix+g.batch, -1, true)
	p.setState(gatheringKey, g.encode())
	p.unlockGathering()
	return p.sendBatch(ctx, g.batch, p.gather(ctx, g), id)
}

// gather waits while calls add IDs to the batch g, then closes it, so
// that the next call starts another, and returns its IDs.
func (p *Provider) gather(ctx context.Context, g gathering) []string {
	start, seen := time.Now(), len(g.ids)
	for {
		time.Sleep(batchIdle)
		p.lockGathering()
		now := decodeGathering(p.stateValue(gatheringKey, -1))
		if now.batch != g.batch {
			// Replaced, which only a lost update does: the IDs that
			// joined are asked for alone.
			p.unlockGathering()
			return g.ids
		}
		if len(now.ids) == seen || len(now.ids) >= maxBatchIDs || time.Since(start) >= batchMaxWait || ctx.Err() != nil {
			p.host.StateDelete(gatheringKey)
			p.unlockGathering()
			return now.ids
		}
		seen = len(now.ids)
		p.unlockGathering()
	}
}

// sendBatch describes the batch's IDs in one request and stores each
// instance for the calls waiting, then marks the batch done: "ok",
// "failed", or "retry <ms>" when the API throttled it, which the waiting
// calls answer without asking again.
func (p *Provider) sendBatch(ctx context.Context, batch string, ids []string, id string) ([]instance, error, bool) {
	what := "describing instance " + id
	if len(ids) > 1 {
		what += " in a batch of " + strconv.Itoa(len(ids))
	}
	list, err := p.describeInstances(ctx, what, list(url.Values{}, "InstanceId", ids))
	done := "ok"
	if err == nil {
		for _, in := range list {
			if v, err := json.Marshal(in); err == nil {
				// A full store only makes a waiting call ask alone.
				_ = p.host.StateSet(batchedInstancePrefix+in.ID, append([]byte(batch+" "), v...))
			}
		}
	} else if o := sdk.OutcomeOf(err); o.Status == abi.StatusRetryAfter {
		done = "retry " + strconv.FormatInt(o.RetryAfter.Milliseconds(), 10)
	} else {
		done = "failed"
	}
	_ = p.host.StateSet(batchDonePrefix+batch, []byte(done))
	if len(ids) == 1 || done != "ok" && done != "failed" {
		// The request asked for id alone, or was throttled: its answer is
		// the one id alone would get.
		return list, err, true
	}
	if err != nil {
		return nil, nil, false
	}
	var own []instance
	for _, in := range list {
		if in.ID == id {
			own = append(own, in)
		}
	}
	return own, nil, len(own) > 0
}

// awaitBatch waits for the batch id was gathered in and reads id's
// instance from its answer.
func (p *Provider) awaitBatch(ctx context.Context, batch, id string) ([]instance, error, bool) {
	done, err := p.waitForBatch(ctx, batch)
	if err != nil {
		return nil, err, true
	}
	if in, ok := p.batchedInstance(batch, id); ok {
		return []instance{in}, nil, true
	}
	if ms, ok := strings.CutPrefix(done, "retry "); ok {
		n, _ := strconv.ParseInt(ms, 10, 64)
		return nil, sdk.RetryAfter(time.Duration(n)*time.Millisecond,
			"aws: describing instance "+id+": DescribeInstances of its batch was throttled"), true
	}
	return nil, nil, false
}

// waitForBatch waits until batch is marked done and returns the mark. A
// call that gets the mark's claim instead finds the batch's sender gone
// (its call ended unanswered), and marks it failed for the others. An
// error only when this call's own deadline passed.
func (p *Provider) waitForBatch(ctx context.Context, batch string) (string, error) {
	if v, ok := p.host.StateGet(batchDonePrefix+batch, -1, true); ok {
		return string(v), nil
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	p.setState(batchDonePrefix+batch, []byte("failed"))
	return "failed", nil
}

// batchedInstance reads id's instance as batch described it.
func (p *Provider) batchedInstance(batch, id string) (instance, bool) {
	var in instance
	v, ok := p.host.StateGet(batchedInstancePrefix+id, -1, false)
	if !ok {
		return in, false
	}
	stamp, encoded, _ := strings.Cut(string(v), " ")
	if stamp != batch || json.Unmarshal([]byte(encoded), &in) != nil {
		return in, false
	}
	return in, in.ID == id
}

// lockGathering waits for the claim on the lock's key, whose value is
// always too old to read.
func (p *Provider) lockGathering() { p.host.StateGet(gatheringLockKey, 0, true) }

// unlockGathering ends the claim, waking the next waiter.
func (p *Provider) unlockGathering() { p.setState(gatheringLockKey, []byte{1}) }

func (p *Provider) stateValue(key string, maxAge time.Duration) []byte {
	v, _ := p.host.StateGet(key, maxAge, false)
	return v
}

// setState stores value under key; a store refused only costs requests,
// as the batching reads nothing it did not check.
func (p *Provider) setState(key string, value []byte) { _ = p.host.StateSet(key, value) }

// newBatch names a batch.
func newBatch() string { return strconv.FormatInt(time.Now().UnixNano(), 36) }

func contains(ids []string, id string) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}
