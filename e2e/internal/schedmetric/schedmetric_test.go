package schedmetric

import "testing"

func TestGomaxprocs(t *testing.T) {
	body := []byte("# HELP go_sched_gomaxprocs_threads x\n# TYPE go_sched_gomaxprocs_threads gauge\ngo_sched_gomaxprocs_threads 2\ngo_threads 9\n")
	if p, ok := Gomaxprocs(body); !ok || p != 2 {
		t.Errorf("Gomaxprocs = %d, %v, want 2, true", p, ok)
	}
	for _, b := range []string{"go_threads 9\n", "\ngo_sched_gomaxprocs_threads x\n"} {
		if p, ok := Gomaxprocs([]byte(b)); ok {
			t.Errorf("%q: Gomaxprocs = %d, true; want no value", b, p)
		}
	}
}
