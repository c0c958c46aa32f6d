package cpuuse

import (
	"errors"
	"testing"
	"time"
)

// TestMeterUnknownAroundAFailure: a look measures from the last reading;
// a failed reading makes its own look and the next one unknown (false),
// whatever the readings around it; a failed first reading makes the first
// look unknown.
func TestMeterUnknownAroundAFailure(t *testing.T) {
	type reading struct {
		d    time.Duration
		fail bool
	}
	type look struct {
		used  time.Duration
		known bool
	}
	for _, tc := range []struct {
		name     string
		readings []reading // the first is NewMeter's
		want     []look
	}{
		{"readings", []reading{{d: 5}, {d: 7}, {d: 7}, {d: 20}}, []look{{2, true}, {0, true}, {13, true}}},
		{"a failure", []reading{{d: 5}, {fail: true}, {d: 9}, {d: 12}}, []look{{0, false}, {0, false}, {3, true}}},
		{"failures", []reading{{d: 5}, {fail: true}, {fail: true}, {d: 9}, {d: 9}}, []look{{0, false}, {0, false}, {0, false}, {0, true}}},
		{"the first fails", []reading{{fail: true}, {d: 9}, {d: 10}}, []look{{0, false}, {1, true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			i := 0
			m := NewMeter(func() (time.Duration, error) {
				r := tc.readings[i]
				i++
				if r.fail {
					return time.Hour, errors.New("getrusage: no reading")
				}
				return r.d, nil
			})
			for j, w := range tc.want {
				if used, known := m.Since(); used != w.used || known != w.known {
					t.Errorf("look %d: %v, %t, want %v, %t", j+1, used, known, w.used, w.known)
				}
			}
			if i != len(tc.readings) {
				t.Fatalf("%d readings taken, want %d", i, len(tc.readings))
			}
		})
	}
}
