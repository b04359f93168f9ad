package devices

import (
	"testing"
	"time"
)

func TestSampleTimeFilesLateSamplesAtTheirTime(t *testing.T) {
	now := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { t := now.Add(d); return &t }
	for _, c := range []struct {
		name        string
		sampled     *time.Time
		want        time.Time
		late, keept bool
	}{
		{"live", nil, now, false, true},
		{"a few seconds old", at(-5 * time.Second), now.Add(-5 * time.Second), false, true},
		{"late", at(-10 * time.Minute), now.Add(-10 * time.Minute), true, true},
		{"slightly ahead", at(20 * time.Second), now, false, true},
		{"from the future", at(10 * time.Minute), now, false, false},
		{"older than the history", at(-25 * time.Hour), now.Add(-25 * time.Hour), true, false},
	} {
		got, late, keep := sampleTime(now, c.sampled, 24*time.Hour)
		if !got.Equal(c.want) || late != c.late || keep != c.keept {
			t.Errorf("%s: = %s late %v keep %v; want %s %v %v", c.name, got, late, keep, c.want, c.late, c.keept)
		}
	}
}
