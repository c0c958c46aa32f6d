package main

import (
	"encoding/json"
	"math"
	"testing"
	"time"
)

func TestWithShares(t *testing.T) {
	line := []byte(`{"label":"new","calls":100}`)
	// 150 and 40 ticks (1/100 s) over 3 s; the third process not read.
	got, err := withShares(line, []int64{50, 10, -1}, []int64{200, 50, 7}, 3*time.Second, 0.25, 20)
	if err != nil {
		t.Fatal(err)
	}
	var r result
	if err := json.Unmarshal(got, &r); err != nil {
		t.Fatal(err)
	}
	want := []float64{0.5, 0.4 / 3, -1}
	if len(r.Share) != 3 {
		t.Fatalf("shares %v, want %v", r.Share, want)
	}
	for i := range want {
		if math.Abs(r.Share[i]-want[i]) > 1e-9 {
			t.Errorf("shares %v, want %v", r.Share, want)
		}
	}
	if r.OneP == nil || *r.OneP != 0.25 || r.Label != "new" || r.Calls != 100 {
		t.Errorf("line %s: want one_p_share 0.25 and the line's own fields", got)
	}
	got, err = withShares(line, []int64{1}, []int64{2}, time.Second, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	r = result{}
	if err := json.Unmarshal(got, &r); err != nil || r.OneP != nil {
		t.Errorf("no samples: %s, %v; want no one_p_share", got, err)
	}
}
