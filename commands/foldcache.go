package commands

import (
	"container/list"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
)

// FoldCache keeps the latest fold of recently used inquiries, so a command reads only the events
// after the cached revision instead of the whole stream: its cost does not grow with the
// inquiry's history. Every load still reads the stream from the cached revision on, so a cache
// that another replica's appends made stale is only slower, never wrong.
//
// The cache holds no personal data: a cached fold lacks the requester, subject, message, the
// portal's customer id and follow-up notes, and each load reads them again from their events
// (the inquiry's first event and the pending follow-ups' own events), through the same store
// that opens sealed data. An erased inquiry reads erased, as without the cache.
type FoldCache struct {
	mu  sync.Mutex
	max int
	lru *list.List // of *foldEntry, most recently used first
	by  map[string]*list.Element
}

// DefaultFoldCacheSize is the number of inquiries a FoldCache keeps by default.
const DefaultFoldCacheSize = 4096

// NewFoldCache returns a cache of the folds of at most size inquiries (DefaultFoldCacheSize when
// size ≤ 0).
func NewFoldCache(size int) *FoldCache {
	if size <= 0 {
		size = DefaultFoldCacheSize
	}
	return &FoldCache{max: size, lru: list.New(), by: map[string]*list.Element{}}
}

// foldEntry is one inquiry's fold at q.Version events. Nothing in it changes once stored.
type foldEntry struct {
	stream    string
	q         *domain.Inquiry // without personal fields (strip)
	lastActor domain.PrincipalID
	keys      *keyIndex
	// notes names, for each pending follow-up with a note, the revision of the event that has it.
	notes map[string]uint64
}

// keyIndex is the idempotency keys of a stream, shared by its folds at every revision: only ever
// added to, each key with the version its command reached.
type keyIndex struct {
	mu sync.RWMutex
	m  map[string]keyUse
}

func (k *keyIndex) get(key string, upTo uint64) (keyUse, bool) {
	if k == nil {
		return keyUse{}, false
	}
	k.mu.RLock()
	defer k.mu.RUnlock()
	use, ok := k.m[key]
	if !ok || use.version > upTo {
		return keyUse{}, false
	}
	return use, true
}

func (k *keyIndex) add(keys map[string]keyUse) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for key, use := range keys {
		if old, ok := k.m[key]; !ok || old.version < use.version {
			k.m[key] = use
		}
	}
}

func (c *FoldCache) get(stream string) *foldEntry {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.by[stream]
	if !ok {
		return nil
	}
	c.lru.MoveToFront(el)
	return el.Value.(*foldEntry)
}

// put stores the fold of q (which it copies and strips) unless a fold at a later revision is
// stored already. keys are the idempotency keys of the events after base's revision.
func (c *FoldCache) put(stream string, q *domain.Inquiry, l loaded, keys map[string]keyUse, notes map[string]uint64) {
	if c == nil {
		return
	}
	e := &foldEntry{stream: stream, q: strip(q), lastActor: l.lastActor, keys: l.base, notes: map[string]uint64{}}
	for id := range q.FollowUps {
		if rev, ok := notes[id]; ok {
			e.notes[id] = rev
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.by[stream]; ok {
		old := el.Value.(*foldEntry)
		if e.keys == nil {
			e.keys = old.keys
		}
		if e.keys != nil {
			e.keys.add(keys)
		}
		if old.q.Version < e.q.Version {
			el.Value = e
		}
		c.lru.MoveToFront(el)
		return
	}
	if e.keys == nil {
		e.keys = &keyIndex{m: map[string]keyUse{}}
	}
	e.keys.add(keys)
	c.by[stream] = c.lru.PushFront(e)
	for c.lru.Len() > c.max {
		last := c.lru.Back()
		delete(c.by, last.Value.(*foldEntry).stream)
		c.lru.Remove(last)
	}
}

// Len is the number of inquiries cached.
func (c *FoldCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}

// strip returns a copy of q without its personal fields. An erased inquiry's requester, subject
// and message read as erased, which is not personal, and stay.
func strip(q *domain.Inquiry) *domain.Inquiry {
	s := q.Clone()
	s.ExternalID = ""
	if !s.Erased {
		s.Requester, s.Subject, s.Message = domain.Requester{}, "", ""
	}
	for id, f := range s.FollowUps {
		f.Note = ""
		s.FollowUps[id] = f
	}
	return s
}

// restore reads back into q, a fold from the cache, the personal fields strip removed.
func (h *Handler) restore(ctx context.Context, tenant domain.TenantID, id domain.InquiryID, stream string, q *domain.Inquiry, notes map[string]uint64) error {
	first, err := h.readOne(ctx, tenant, id, stream, 0)
	if err != nil {
		return err
	}
	if _, ok := first.event.(domain.InquiryReceived); !ok {
		return fmt.Errorf("inquiry %s begins with %s", id, first.event.EventType())
	}
	var r domain.Inquiry
	r.Apply(first.event, first.at)
	q.ExternalID = r.ExternalID
	if !q.Erased {
		q.Requester, q.Subject, q.Message = r.Requester, r.Subject, r.Message
	}
	for jobID, rev := range notes {
		f, ok := q.FollowUps[jobID]
		if !ok {
			continue
		}
		rec, err := h.readOne(ctx, tenant, id, stream, rev)
		if err != nil {
			return err
		}
		s, ok := rec.event.(domain.FollowUpScheduled)
		if !ok || s.JobID != jobID {
			return fmt.Errorf("inquiry %s revision %d: not the follow-up %s", id, rev, jobID)
		}
		f.Note = s.Note
		q.FollowUps[jobID] = f
	}
	return nil
}

type decoded struct {
	event domain.Event
	meta  domain.Metadata
	at    time.Time
}

// readOne reads and decodes the event at revision rev of stream.
func (h *Handler) readOne(ctx context.Context, tenant domain.TenantID, id domain.InquiryID, stream string, rev uint64) (decoded, error) {
	recs, err := h.Store.ReadStream(ctx, stream, rev, 1)
	if err != nil {
		return decoded{}, err
	}
	if len(recs) != 1 || recs[0].Revision != rev {
		return decoded{}, fmt.Errorf("inquiry %s: no event at revision %d", id, rev)
	}
	return decode(recs[0], tenant, id)
}

// decode decodes an event of inquiry id, which must be of tenant.
func decode(r eventstore.RecordedEvent, tenant domain.TenantID, id domain.InquiryID) (decoded, error) {
	m, err := eventstore.DecodeMetadata(r.Metadata)
	if err != nil {
		return decoded{}, fmt.Errorf("inquiry %s revision %d: metadata: %w", id, r.Revision, err)
	}
	e, err := eventstore.DecodeEvent(r.Type, m.SchemaVersion, r.Data)
	if err != nil {
		return decoded{}, err
	}
	if m.TenantID != tenant {
		return decoded{}, fmt.Errorf("inquiry %s: event of tenant %s in stream of %s", id, m.TenantID, tenant)
	}
	return decoded{event: e, meta: m, at: m.OccurredAt}, nil
}
