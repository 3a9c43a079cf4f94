package apijson

import (
	"math/rand/v2"
	"testing"
	"time"
)

func TestAppendTimeMatchesFormat(t *testing.T) {
	t.Parallel()
	times := []time.Time{
		{},
		time.Date(2026, 11, 24, 6, 5, 51, 999_999_999, time.UTC),
		time.Date(2026, 1, 2, 3, 4, 5, 6_000_000, time.FixedZone("x", -7*3600-30*60)),
		time.Date(9999, 12, 31, 23, 59, 59, 999_000_000, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(0, 1, 1, 0, 0, 0, 1, time.UTC),
		time.UnixMilli(-1),
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 10_000 {
		times = append(times, time.Unix(r.Int64N(400_000_000_000)-200_000_000_000, r.Int64N(1e9)))
	}
	for _, tm := range times {
		got := string(AppendTime([]byte("x"), tm))
		want := "x" + Time(tm)
		if got != want {
			t.Fatalf("AppendTime(%v) = %q, want %q", tm, got, want)
		}
	}
}

func FuzzAppendTime(f *testing.F) {
	f.Add(int64(0), int64(0))
	f.Add(int64(1763964351), int64(123456789))
	f.Fuzz(func(t *testing.T, sec, nsec int64) {
		tm := time.Unix(sec, nsec)
		if got, want := string(AppendTime(nil, tm)), Time(tm); got != want {
			t.Fatalf("AppendTime(%v) = %q, want %q", tm, got, want)
		}
	})
}

// BenchmarkAppendTime compares AppendTime with time.Time.AppendFormat.
func BenchmarkAppendTime(b *testing.B) {
	tm := time.Date(2026, 11, 24, 6, 5, 51, 123_456_789, time.UTC)
	buf := make([]byte, 0, 64)
	b.Run("AppendTime", func(b *testing.B) {
		for b.Loop() {
			buf = AppendTime(buf[:0], tm)
		}
	})
	b.Run("AppendFormat", func(b *testing.B) {
		for b.Loop() {
			buf = tm.UTC().AppendFormat(buf[:0], TimeFormat)
		}
	})
}
