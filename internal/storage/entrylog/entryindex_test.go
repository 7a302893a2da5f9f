package entrylog

import (
	"math/rand/v2"
	"testing"
)

// The index answers exactly as a map would, for in-order, striped,
// out-of-order, sparse and negative ids, across ledger removals.
func TestEntryIndexMatchesMap(t *testing.T) {
	for seed := range uint64(50) {
		rng := rand.New(rand.NewPCG(seed, 7))
		x := newEntryIndex()
		ref := map[entryKey]int{}
		next := map[int64]int64{}
		for op := range 5000 {
			ledger := int64(rng.IntN(4))
			var k entryKey
			switch r := rng.IntN(10); {
			case r < 6: // next entries in order, sometimes skipping (striping)
				next[ledger] += 1 + int64(rng.IntN(3))
				k = entryKey{ledger, next[ledger]}
			case r < 7: // far away
				k = entryKey{ledger, rng.Int64N(1 << 40)}
			case r < 8: // negative (special ids)
				k = entryKey{ledger, -1 - int64(rng.IntN(5))}
			case r < 9: // somewhere already seen, or just before
				k = entryKey{ledger, next[ledger] - int64(rng.IntN(50))}
			default:
				// A ledger's removal rebuilds the index from the kept
				// keys, as generation.removeLedger does.
				for rk := range ref {
					if rk.ledgerID == ledger {
						delete(ref, rk)
					}
				}
				x = newEntryIndex()
				for rk, v := range ref {
					x.set(rk, v)
				}
				continue
			}
			if _, ok := ref[k]; !ok {
				ref[k] = op
				x.set(k, op)
			}
			// Probe the key and a few neighbours.
			for _, p := range []entryKey{k, {k.ledgerID, k.entryID + 1}, {k.ledgerID, k.entryID - 1}, {k.ledgerID + 10, k.entryID}} {
				want, wok := ref[p]
				got, gok := x.get(p)
				if wok != gok || want != got {
					t.Fatalf("seed %d op %d: get(%v) = %d,%v, want %d,%v", seed, op, p, got, gok, want, wok)
				}
			}
		}
		for k, want := range ref {
			if got, ok := x.get(k); !ok || got != want {
				t.Fatalf("seed %d: final get(%v) = %d,%v, want %d", seed, k, got, ok, want)
			}
		}
	}
}

// Sparse ids, far apart or spaced just inside maxWindowGap (the worst
// case), keep a window's backing array within the entryOverheadBytes
// charged per entry.
func TestEntryIndexSparseIDsStayBounded(t *testing.T) {
	for _, stride := range []int64{1000, maxWindowGap + 1, maxWindowGap + 2} {
		x := newEntryIndex()
		const n = 1000
		for i := range int64(n) {
			x.set(entryKey{1, i * stride}, int(i))
		}
		if lp := x.ledgers[1]; lp != nil && int64(cap(lp.pos))*4 > n*entryOverheadBytes {
			t.Errorf("stride %d: window of %d slots (cap %d) for %d entries", stride, len(lp.pos), cap(lp.pos), n)
		}
		for i := range int64(n) {
			if got, ok := x.get(entryKey{1, i * stride}); !ok || got != int(i) {
				t.Fatalf("stride %d: get(%d) = %d,%v", stride, i*stride, got, ok)
			}
		}
	}
}

func BenchmarkEntryIndexStriped(b *testing.B) {
	const perGen = 400_000 // a 64 MiB generation of 100-byte entries
	for b.Loop() {
		x := newEntryIndex()
		for i := range perGen {
			e := int64(i / 2 * 3) // two of every three entries
			if i%2 == 1 {
				e++
			}
			x.set(entryKey{42, e}, i)
		}
	}
}

func BenchmarkEntryMapStriped(b *testing.B) {
	const perGen = 400_000
	for b.Loop() {
		m := map[entryKey]int{}
		for i := range perGen {
			e := int64(i / 2 * 3)
			if i%2 == 1 {
				e++
			}
			if _, ok := m[entryKey{42, e}]; !ok {
				m[entryKey{42, e}] = i
			}
		}
	}
}
