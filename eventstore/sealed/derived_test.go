package sealed

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"testing"

	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/internal/seal"
)

// keysOf is a Keys over masters (the first current) without a key table: enough for the derived
// keys, which never touch it.
func keysOf(masters ...[]byte) *Keys {
	k := &Keys{masters: map[string][]byte{}, cache: map[ident]cached{}, derived: map[derivation]*tenantKeys{}}
	for _, m := range masters {
		id := KeyID(m)
		k.masters[id], k.order = m, append(k.order, id)
	}
	k.current = k.order[0]
	return k
}

// TestDerivedKeysMatchTheirDefinition: the tenant keys kept in memory are those the stored values
// were made with (HKDF-SHA256 of the master under each purpose and tenant), per master and per
// tenant, so wrapped data keys and blind indexes written before keep opening and matching; once
// derived, they are not derived again (no allocation).
func TestDerivedKeysMatchTheirDefinition(t *testing.T) { // not parallel: AllocsPerRun
	m1, m2 := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	k := keysOf(m1, m2)
	for _, m := range [][]byte{m1, m2} {
		for _, tenant := range []domain.TenantID{"t1", "t2"} {
			fresh, err := seal.New(m, "casebook tenant key v1\x00"+string(tenant))
			if err != nil {
				t.Fatal(err)
			}
			aad := aadOf(tenant, "q1")
			kek, err := k.kek(KeyID(m), tenant)
			if err != nil {
				t.Fatal(err)
			}
			if plain, err := kek.Open(fresh.Seal([]byte("data key"), aad), aad); err != nil || string(plain) != "data key" {
				t.Errorf("%s/%s: a key wrapped as before does not open: %q, %v", KeyID(m), tenant, plain, err)
			}
			if plain, err := fresh.Open(kek.Seal([]byte("data key"), aad), aad); err != nil || string(plain) != "data key" {
				t.Errorf("%s/%s: a key wrapped now does not open as before: %q, %v", KeyID(m), tenant, plain, err)
			}
			key, err := seal.Key(m, "casebook blind index v1\x00"+string(tenant))
			if err != nil {
				t.Fatal(err)
			}
			mac := hmac.New(sha256.New, key)
			mac.Write([]byte("ada@example.com"))
			if got, want := k.blindIndex(KeyID(m), tenant, "ada@example.com"), hex.EncodeToString(mac.Sum(nil)); got != want {
				t.Errorf("%s/%s: blind index %s, stored indexes hold %s", KeyID(m), tenant, got, want)
			}
		}
	}
	other, err := k.kek(k.current, "t2")
	if err != nil {
		t.Fatal(err)
	}
	mine, _ := k.kek(k.current, "t1")
	aad := aadOf("t1", "q1")
	if _, err := other.Open(mine.Seal([]byte("data key"), aad), aad); err == nil {
		t.Error("tenant t2's key opens what tenant t1's wrapped")
	}
	if got := k.BlindIndexes("t1", "ada@example.com"); len(got) != 2 || got[0] == got[1] {
		t.Errorf("BlindIndexes = %q, want one per master, each its own", got)
	}
	if n := testing.AllocsPerRun(100, func() {
		if _, err := k.kek(k.current, "t1"); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("a derived tenant key took %v allocations a call, want none: it is derived again", n)
	}
	if _, err := k.kek("unknown", "t1"); err == nil {
		t.Error("a key under an unknown master was derived")
	}
}

// TestDerivedKeysAreBounded: tenants beyond maxDerived start the map over; each key still derives
// to the same value.
func TestDerivedKeysAreBounded(t *testing.T) {
	t.Parallel()
	k := keysOf(bytes.Repeat([]byte{1}, 32))
	first := k.BlindIndex("t0", "ada@example.com")
	for i := range maxDerived + 10 {
		k.BlindIndex(domain.TenantID(fmt.Sprint("t", i)), "ada@example.com")
	}
	if n := len(k.derived); n > maxDerived {
		t.Fatalf("%d tenants' keys kept, want at most %d", n, maxDerived)
	}
	if got := k.BlindIndex("t0", "ada@example.com"); got != first {
		t.Errorf("t0's blind index after the map started over: %s, was %s", got, first)
	}
}
