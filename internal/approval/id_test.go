package approval

import (
	"testing"

	"github.com/google/uuid"
)

func TestNewID(t *testing.T) {
	var prev ID
	for range 1000 {
		id, err := NewID()
		if err != nil {
			t.Fatal(err)
		}
		u, err := uuid.Parse(string(id))
		if err != nil {
			t.Fatalf("NewID() = %q: %v", id, err)
		}
		if u.Version() != 7 || u.String() != string(id) {
			t.Fatalf("NewID() = %q: version %d, want a canonical UUIDv7", id, u.Version())
		}
		if id <= prev {
			t.Fatalf("NewID() = %q after %q: ids must sort by creation", id, prev)
		}
		prev = id
	}
}
