package digest

import (
	"strconv"
	"testing"
)

// benchPayloadSizes are a typical small entry and a large one.
var benchPayloadSizes = []int{1 << 10, 64 << 10}

// BenchmarkAppendEntryHeader measures what a writer pays per add: header and
// digest into a reused buffer, payload not copied.
func BenchmarkAppendEntryHeader(b *testing.B) {
	for _, typ := range allTypes {
		for _, size := range benchPayloadSizes {
			b.Run(typ.String()+"/"+sizeName(size), func(b *testing.B) {
				d := mustNew(b, typ, goldenPassword)
				payload := make([]byte, size)
				buf := make([]byte, 0, EntryHeaderSize+MaxDigestSize)
				b.SetBytes(int64(size))
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					buf = d.AppendEntryHeader(buf[:0], 1, int64(i), int64(i-1), int64(size), payload)
				}
			})
		}
	}
}

// BenchmarkVerifyEntry measures what a reader pays per entry read.
func BenchmarkVerifyEntry(b *testing.B) {
	for _, typ := range allTypes {
		for _, size := range benchPayloadSizes {
			b.Run(typ.String()+"/"+sizeName(size), func(b *testing.B) {
				d := mustNew(b, typ, goldenPassword)
				body := d.AppendEntry(nil, 1, 2, 1, int64(size), make([]byte, size))
				b.SetBytes(int64(size))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := d.VerifyEntry(body, 1, 2); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkDigestAndVerify is one full round: build the body, then check it.
func BenchmarkDigestAndVerify(b *testing.B) {
	for _, typ := range allTypes {
		for _, size := range benchPayloadSizes {
			b.Run(typ.String()+"/"+sizeName(size), func(b *testing.B) {
				d := mustNew(b, typ, goldenPassword)
				payload := make([]byte, size)
				buf := make([]byte, 0, EntryHeaderSize+MaxDigestSize+size)
				b.SetBytes(int64(size))
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					buf = d.AppendEntry(buf[:0], 1, int64(i), int64(i-1), int64(size), payload)
					if _, err := d.VerifyEntry(buf, 1, int64(i)); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func BenchmarkLAC(b *testing.B) {
	for _, typ := range allTypes {
		b.Run(typ.String(), func(b *testing.B) {
			d := mustNew(b, typ, goldenPassword)
			buf := make([]byte, 0, LACHeaderSize+MaxDigestSize)
			b.ReportAllocs()
			for i := int64(0); b.Loop(); i++ {
				buf = d.AppendLAC(buf[:0], 1, i)
				if _, err := d.VerifyLAC(buf, 1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func sizeName(n int) string { return strconv.Itoa(n>>10) + "KiB" }
